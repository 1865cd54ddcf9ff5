"""Hostile servers (the demo web's hostile faults): each page gives a clean record, no
traceback, nothing else lost, memory flat under a 10 GiB gzip bomb."""

import json
import re

import pytest
from scrapy.exceptions import IgnoreRequest

from webcrawl.demo import demo_server
from webcrawl.demo.web import DemoWeb
from webcrawl.spiders.web import refused_answer
from webcrawl.store import open_store

# a page per case, each where its parent still links to the rest of the site
HOSTILE = {
    "/s0/a0.html": "bomb:0:10",  # 10 GiB of zeros once decompressed, ~10 MB on the wire
    "/s0/sub0/a6.html": "loop",
    "/s1/a0.html": "liar",
    "/s1/sub1/a7.html": "headers:0:1",  # 1 MiB of headers
    "/s2/a0.html": "charset",
    "/s2/sub2/a8.html": "binary",
    "/s0/sub1/a7.html": "trickle:0:1",  # a byte a second, never ending
}
FAST = (
    "FAILPATH_ENABLED=False",
    "DOWNLOAD_TIMEOUT=3",
    "RETRY_TIMES=1",
    "FRONTIER_RETRY_BACKOFF=0.2",
    "LOG_LEVEL=INFO",
)


# `scrapy crawl` that prints its peak resident memory (ru_maxrss, KiB) as it exits
PEAK = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: print('peak-rss-kib', resource.getrusage("
    "resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
    "from scrapy.cmdline import execute\nexecute(['scrapy'] + sys.argv[1:])\n"
)


def stat(log: str, name: str) -> int:
    match = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(match.group(1)) if match else 0


@pytest.mark.e2e
def test_each_hostile_page_gives_a_clean_record_and_nothing_else_is_lost(tmp_path, crawls):
    log = tmp_path / "requests.jsonl"
    faults = [f"0:{path}:{kind}" for path, kind in HOSTILE.items()]
    with demo_server(2, 40, log, faults=faults) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        host = info["hosts"][0]
        result = crawls.run(info["seeds"], tmp_path / "data", *FAST, code=PEAK, timeout=240)
    err = result.stderr
    assert result.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[err.index("Traceback") - 500 :][:3000]
    hostile = {f"http://{host}{path}": kind for path, kind in HOSTILE.items()}
    expected = set(web.reachable(dead=tuple(hostile)))
    assert set(hostile) <= expected
    with open_store(f"sqlite:///{tmp_path / 'data' / 'webtable.sqlite3'}") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    assert expected - set(rows) == set(), "pages lost"
    why = {
        url: (rows[url].get("kind"), rows[url].get("status"), rows[url].get("error") or "")
        for url in hostile
    }
    by_kind = {kind.split(":")[0]: why[url] for url, kind in hostile.items()}
    assert by_kind["bomb"][0] == "failed" and by_kind["bomb"][2].startswith("TooLarge:")
    assert "exceeded DOWNLOAD_MAXSIZE" in by_kind["bomb"][2]
    assert by_kind["loop"][0] == "failed" and "RedirectLoop: redirect loop" in by_kind["loop"][2]
    assert by_kind["liar"][0] == "failed" and "DataLoss" in by_kind["liar"][2]
    assert (
        by_kind["trickle"][0] == "failed"
        and "took longer than 3.0 seconds" in by_kind["trickle"][2]
    )
    for kind in ("headers", "charset", "binary"):  # answered: recorded as what they are
        assert by_kind[kind][1] == 200 and by_kind[kind][0] in ("html", "other"), by_kind
    assert rows[f"http://{host}/s2/a0.html"]["title"] == "Café crème"  # Latin-1 guessed
    # the trickle was given up at DOWNLOAD_TIMEOUT each time (one retry), not let run
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    trickle = [r for r in sent if r["host"] == host and r["path"] == "/s0/sub1/a7.html"]
    assert len(trickle) == 2
    assert stat(err, "hostile/too_large") == 1 and stat(err, "hostile/redirect_loop") == 1
    # a 10 GiB bomb costs at most its 10 MiB cut, twice (compressed and expanded), not more
    peak = int(re.search(r"peak-rss-kib (\d+)", err).group(1)) * 1024
    grew = peak - stat(err, "memusage/startup")
    assert grew < 100 * 2**20, f"memory grew by {grew / 2**20:.0f} MiB"


def test_an_ignored_response_of_scrapys_decompression_limit_is_recognised():
    """Scrapy raises IgnoreRequest from its private _DecompressionMaxSizeExceeded; if
    that changes, bombs would silently go unrecorded: this fails first."""
    from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
    from scrapy.http import Request, Response
    from scrapy.utils.test import get_crawler

    from webcrawl.demo.hostile import bomb_body

    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 1 << 20})
    middleware = HttpCompressionMiddleware.from_crawler(crawler)
    request = Request("http://h/")
    body = bomb_body(0.1)
    response = Response(
        "http://h/", body=body, headers={"Content-Encoding": "gzip"}, request=request
    )
    with pytest.raises(IgnoreRequest) as caught:
        middleware.process_response(request, response)
    assert refused_answer(caught.value)[0] == "too_large"
    assert refused_answer(IgnoreRequest("max redirections reached"))[0] == "too_many_redirects"
    assert refused_answer(IgnoreRequest("Forbidden by robots.txt")) is None


@pytest.mark.e2e
def test_a_trap_host_stops_at_its_budget_and_a_redirect_inside_is_refused(tmp_path, crawls):
    """A calendar without end, session ids in every link, a path repeating itself,
    and a redirect to a loopback address that is not a seed's."""
    from test_cli import webcrawl

    log = tmp_path / "requests.jsonl"
    faults = ["0:/s0/a0.html:trap", "0:/s0/a1.html:ssrf"]
    data = tmp_path / "data"
    budget = 60
    with demo_server(2, 40, log, faults=faults) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        result = crawls.run(
            info["seeds"],
            data,
            "LOG_LEVEL=INFO",
            "FAILPATH_ENABLED=False",
            f"FRONTIER_MAX_PAGES_PER_HOST={budget}",
            timeout=240,
        )
    err = result.stderr
    assert result.returncode == 0, err[-3000:]  # the crawl ended by itself
    assert "Traceback" not in err
    trap, other = info["hosts"][:2]
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    paths = [r["path"] for r in sent if r["host"] == trap]
    assert not [p for p in paths if "jsessionid" in p.lower() or "phpsessid" in p.lower()]
    assert not [p for p in paths if p.count("/x/y") > 2]  # x three times: not followed
    assert any("day=" in p for p in paths)  # the calendar was followed, up to the budget
    assert len(set(paths)) <= budget + 1  # + robots.txt
    assert stat(err, "traps/host_budget") >= 1 and stat(err, "traps/repeated_segments") >= 1
    status = json.loads(webcrawl("status", "--json", data_dir=data).stdout)
    assert list(status["hosts_over_budget"]) == [trap]
    with open_store(f"sqlite:///{data / 'webtable.sqlite3'}") as store:
        rows = {r["url"]: r for r in store.scan_pages()}
    refused = rows[f"http://{trap}/s0/a1.html"]
    assert refused["kind"] == "failed" and refused["error"].startswith("BlockedAddress:")
    assert stat(err, "security/blocked_address") >= 1
    assert {u for u in web.reachable() if other in u} <= set(rows)  # the other host: all
