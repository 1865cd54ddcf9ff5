"""The demo web serves what its ground truth says."""

import time
import urllib.request
from urllib.error import HTTPError

import pytest

from webcrawl.demo import demo_server
from webcrawl.demo.web import DemoWeb


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_generated_graph_is_deterministic():
    hosts = ["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"]
    a, b = DemoWeb(hosts, 30, seed=1), DemoWeb(hosts, 30, seed=1)
    assert {u: p.links for u, p in a.pages.items()} == {u: p.links for u, p in b.pages.items()}
    reach = a.reachable()
    assert all(u.startswith(("http://127.0.0.2:1/", "http://127.0.0.3:1/")) for u in reach)
    assert not any("/private/" in u for u in reach)
    assert len(a.reachable(scope="broad")) > len(reach)
    assert set(a.reachable(depth_limit=1)) == set(a.seeds()) | {
        link for s in a.seeds() for link in a.pages[s].links
    }


@pytest.mark.e2e
def test_served_pages(demo):
    home = demo.seeds[0]
    status, headers, body = get(home)
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert int(headers["Content-Length"]) == len(body)
    assert get(home, {"If-None-Match": headers["ETag"]})[0] == 304
    assert get(home + "robots.txt")[2] == b"User-agent: *\nDisallow: /private/\n"
    assert get(home + "no-such-page")[0] == 404
    pdf = next(u for u in demo.web.pages if u.startswith(home) and u.endswith(".pdf"))
    status, headers, body = get(pdf)
    assert (status, headers["Content-Type"]) == (200, "application/pdf")
    assert body.startswith(b"%PDF")
    paths = [r["path"] for r in demo.requests()]
    assert paths == ["/", "/", "/robots.txt", "/no-such-page", pdf[len(home) - 1 :]]


@pytest.mark.e2e
def test_a_fault_with_an_end_lasts_from_its_first_answer(tmp_path):
    """``HOST:PREFIX:KIND@UNTIL``: the fault ends UNTIL seconds after the first request it
    answered, however late after the server's start that request comes."""
    with demo_server(2, 20, faults=["0:/s0/:429@1"]) as info:
        home = info["seeds"][0]
        time.sleep(1.5)  # longer than the fault lasts: it has not started yet
        assert get(home + "s0/")[0] == 429
        assert get(home)[0] == 200  # outside the prefix
        time.sleep(0.5)
        assert get(home + "s0/")[0] == 429
        time.sleep(0.7)
        assert get(home + "s0/")[0] == 200
