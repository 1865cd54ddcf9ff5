"""`webcrawl status` shows each host's sitemap lastmod trust and its evidence, read from
the crawl's real Redis (records put there with HSET, as the workers' script leaves them:
``"confirmed refuted claims"``)."""

import json
import subprocess
import sys

from conftest import ROOT, crawl_env

from webcrawl.commands.status import SITEMAP_TRUST_READ
from webcrawl.frontier.keys import CrawlKeys

KEY = CrawlKeys("web", 16).sitemap_trust

RECORDS = {
    "http://127.0.0.2:8001": "30 1 240",  # trusted: 31/33 of its tested claims true
    "http://127.0.0.3:8002": "0.5 37.5 900",  # distrusted, halved past the window
    "http://127.0.0.4:8003": "1 1 3",  # unknown: 2 tested claims, under 5
    "http://127.0.0.5:8004": "0 0 12",  # unknown: claims seen, none tested yet
    "http://127.0.0.6:8005": "0 6 40",  # distrusted, fewer claims
}


def status(redis_server, tmp_path, *args, check=True):
    cmd = [sys.executable, "-m", "webcrawl.cli", "status", *args]
    cmd += ["-s", f"REDIS_URL={redis_server.url}", "-s", f"WEBCRAWL_DATA_DIR={tmp_path}"]
    result = subprocess.run(
        cmd, cwd=ROOT, env=crawl_env(), capture_output=True, text=True, timeout=60
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def section(text):
    """The lines of the sitemap trust section of `webcrawl status`'s text."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("sitemaps "))
    end = next(i for i in range(first + 1, len(lines)) if not lines[i].startswith("  "))
    return lines[first:end]


def test_hosts_are_listed_distrusted_first_then_by_claims(redis_server, tmp_path):
    redis_server.client().hset(KEY, mapping=RECORDS)
    trust = json.loads(status(redis_server, tmp_path, "--json").stdout)["sitemap_trust"]
    assert {k: v for k, v in trust.items() if k != "listed"} == {
        "hosts": 5,
        "read": 5,
        "truncated": False,
        "distrusted": 2,
        "trusted": 1,
        "unknown": 2,
    }
    assert [(h["host"], h["state"], h["claims"]) for h in trust["listed"]] == [
        ("http://127.0.0.3:8002", "distrusted", 900),
        ("http://127.0.0.6:8005", "distrusted", 40),
        ("http://127.0.0.2:8001", "trusted", 240),
        ("http://127.0.0.5:8004", "unknown", 12),
        ("http://127.0.0.4:8003", "unknown", 3),
    ]
    liar = trust["listed"][0]
    assert (liar["confirmed"], liar["refuted"]) == (0.5, 37.5)
    assert liar["precision"] == (0.5 + 1) / (38 + 2)

    lines = section(status(redis_server, tmp_path, "--top", "3").stdout)
    assert lines[0] == (
        "sitemaps   lastmod trust of 5 hosts: 2 distrusted, 1 trusted, 2 unknown "
        "(too few claims tested); distrusted first:"
    )
    assert lines[1].split() == "host state claims confirmed refuted precision".split()
    assert [line.split() for line in lines[2:]] == [
        ["http://127.0.0.3:8002", "distrusted", "900", "0.5", "37.5", "0.04"],
        ["http://127.0.0.6:8005", "distrusted", "40", "0", "6", "0.12"],
        ["http://127.0.0.2:8001", "trusted", "240", "30", "1", "0.94"],
        ["and", "2", "more"],
    ]


def test_the_verdicts_follow_the_crawls_settings(redis_server, tmp_path):
    redis_server.client().hset(KEY, mapping=RECORDS)
    # the trusted host's 31 tested claims are too few when 35 are needed, and so are 6
    args = ("--json", "-s", "SITEMAP_TRUST_MIN_EVIDENCE=35", "-s", "SITEMAP_TRUST_WINDOW=100")
    trust = json.loads(status(redis_server, tmp_path, *args).stdout)["sitemap_trust"]
    assert (trust["distrusted"], trust["trusted"], trust["unknown"]) == (1, 0, 4)
    assert trust["listed"][0]["host"] == "http://127.0.0.3:8002"


def test_no_records_is_one_line(redis_server, tmp_path):
    trust = json.loads(status(redis_server, tmp_path, "--json").stdout)["sitemap_trust"]
    assert trust["hosts"] == 0 and trust["listed"] == []
    assert section(status(redis_server, tmp_path).stdout) == [
        "sitemaps   no host's lastmod trust recorded"
    ]


def test_a_large_crawl_is_read_with_hscan_up_to_a_bound_and_says_so(redis_server, tmp_path):
    client = redis_server.client()
    hosts = SITEMAP_TRUST_READ + 50
    client.hset(KEY, mapping={f"http://h{i}.example:80": f"0 9 {i}" for i in range(hosts)})
    client.config_resetstat()
    trust = json.loads(status(redis_server, tmp_path, "--json").stdout)["sitemap_trust"]
    calls = client.info("commandstats")
    assert "cmdstat_hgetall" not in calls  # never the whole hash at once
    assert calls["cmdstat_hscan"]["calls"] >= 10  # but a thousand fields a call
    assert trust["hosts"] == hosts and trust["read"] == SITEMAP_TRUST_READ
    assert trust["truncated"] and trust["distrusted"] == SITEMAP_TRUST_READ
    assert len(trust["listed"]) == 10  # --top
    claims = [h["claims"] for h in trust["listed"]]
    assert claims == sorted(claims, reverse=True)

    lines = section(status(redis_server, tmp_path, "--top", "2").stdout)
    assert lines[0].startswith(
        f"sitemaps   lastmod trust of {hosts} hosts (only {SITEMAP_TRUST_READ} read: "
        f"the counts and rows are theirs): {SITEMAP_TRUST_READ} distrusted, 0 trusted"
    )
    assert len(lines) == 5 and lines[-1] == f"  and {hosts - 2} more"


def test_records_it_cannot_read_fail_the_command_not_read_as_none(redis_server, tmp_path):
    redis_server.client().set(KEY, "not a hash")
    result = status(redis_server, tmp_path, check=False)
    assert result.returncode == 2
    assert "webcrawl status: Redis: WRONGTYPE" in result.stderr
    assert "sitemaps" not in result.stdout
