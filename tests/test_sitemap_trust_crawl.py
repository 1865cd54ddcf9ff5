"""End to end: on a continuously crawled changing demo web, a host whose sitemap lastmods
tell the truth is trusted and its lastmods keep moving revisits; a host that stamps
every entry with "now" loses trust and its lastmods stop driving revisits.

The demo web's pages change 600 times faster than real time; the pages' own first
revisits are planned 60 s after their first fetch, past the 35 s run, so that within
the run the refetches are the sitemaps' doing (at 30 s, the pages' own revisits came in
the run's last seconds, each finding nothing new, and the truthful host's share of
refetches that found a change went down to 0.43 when its trust came late).  Sitemaps
are read every 2 s, where a real crawl reads them daily: the liar's probes, 3 a read,
weigh far more here than they would there."""

import json
import re
import time
from collections import defaultdict
from itertools import pairwise

import pytest

from webcrawl.demo import demo_server
from webcrawl.sitemaps.trust import DISTRUSTED, TRUSTED, TrustParams
from webcrawl.sitemaps.trustbook import parse_value

pytestmark = pytest.mark.e2e


def test_a_liars_lastmods_stop_driving_revisits_and_a_truthful_hosts_keep_doing_so(
    tmp_path, redis_server, crawls
):
    crawl = f"trust-{time.monotonic_ns()}"
    log = tmp_path / "requests.jsonl"
    settings = [
        "WEBCRAWL_CONTINUOUS=True",
        f"REDIS_URL={redis_server.url}",
        f"WEBCRAWL_CRAWL={crawl}",
        "SITEMAP_REFRESH=2",
        "SITEMAP_LASTMOD_SLACK=0.5",
        "SITEMAP_TRUST_PROBES=3",
        "REVISIT_MIN_INTERVAL=15",
        "REVISIT_MAX_INTERVAL=60",
        "REVISIT_INITIAL_INTERVAL=60",
        "FRONTIER_HOST_DELAY=0",
        "LOG_LEVEL=INFO",
    ]
    with demo_server(4, 30, log, change_speed=600.0, sitemaps=True) as info:
        truthful, liar = info["hosts"][0], info["hosts"][1]
        worker = crawls.run_for(35, info["seeds"], tmp_path / "data", *settings)
    text = worker.log_text()
    stats = text.split("Dumping Scrapy stats")[-1]
    trust = {
        k.decode().split("//")[1]: parse_value(v)
        for k, v in redis_server.client().hgetall(f"webcrawl:{{{crawl}}}:sitemap_trust").items()
    }
    params = TrustParams()
    assert trust[truthful][0].state(params) == TRUSTED, trust
    assert trust[liar][0].state(params) == DISTRUSTED, trust
    # refetches (after a page's first fetch) and whether each found a new version
    seen: dict[str, list[int]] = defaultdict(list)
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if r.get("method") == "GET" and "v" in r and r["host"] in (truthful, liar):
            seen[f"http://{r['host']}{r['path']}"].append(r["v"])
    refetches = {truthful: [0, 0], liar: [0, 0]}  # host -> [found a change, found none]
    for url, versions in seen.items():
        host = url.split("/")[2]
        for before, after in pairwise(versions):
            refetches[host][0 if after != before else 1] += 1
    true_share = refetches[truthful][0] / max(1, sum(refetches[truthful]))
    # (the rest: a sitemap's prior for a new page of a trusted host may plan its first
    # revisit early)
    assert sum(refetches[truthful]) >= 20 and true_share >= 0.6, refetches
    told = trust[truthful][0]
    assert told.refuted <= 0.1 * told.tested, trust  # its claims proved true when tested
    # the liar's claims were tested a few at a time (probes), and the rest ignored: most
    ignored = int(re.search(r"'sitemap/lastmod_ignored': (\d+)", stats).group(1))
    assert ignored > 3 * refetches[liar][1], (ignored, refetches)
    assert "'sitemap/claims_refuted'" in stats and "'sitemap/lastmod_trusted'" in stats
