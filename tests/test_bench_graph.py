"""A real crawl's link graph (:mod:`webcrawl.bench.graph`): recorded from a crawl, renamed,
copied at scale, and replayed by ``webcrawl bench frontier --graph``."""

import gzip
import json
import random
import subprocess
import sys

import pytest
from conftest import ROOT, crawl_env

from webcrawl.bench.graph import FORMAT, Graph, names_of, record, rename
from webcrawl.demo import demo_server

PAGES = {
    "http://www.s0m0.example/": ["http://www.s0m0.example/a", "http://www.s0m0.example/b"],
    "http://www.s0m0.example/a": ["http://www.s0m0.example/", "http://www.s1m0.example/"],
    "http://www.s1m0.example/": [],
}


def test_links_stay_within_their_copy():
    graph = Graph(PAGES, ["http://www.s0m0.example/", "http://www.s1m0.example/"], copies=3)
    assert graph.hosts == ["www.s0m0.example", "www.s1m0.example"]
    assert len(graph.all_hosts()) == 6
    assert graph.all_seeds()[2:4] == ["http://c1.www.s0m0.example/", "http://c1.www.s1m0.example/"]
    assert graph.links_of("http://c2.www.s0m0.example/a") == [
        "http://c2.www.s0m0.example/",
        "http://c2.www.s1m0.example/",
    ]
    # a page the recorded crawl did not parse (an image, a 404) has no links
    assert graph.links_of("http://c0.www.s0m0.example/b") == []
    assert graph.pages == 3 and graph.links == 4
    rng = random.Random(1)
    for _ in range(50):
        url = graph.sample(rng)
        copy = url.split("://")[1].split(".")[0]
        assert copy in ("c0", "c1", "c2")
        assert all(link.startswith(f"http://{copy}.") for link in graph.links_of(url))
    # the same graph in more copies, its pages shared
    five = graph.with_copies(5)
    assert len(five.all_hosts()) == 10 and graph.copies == 3
    assert five.links_of("http://c4.www.s0m0.example/a")[0] == "http://c4.www.s0m0.example/"
    assert five.pages == graph.pages


def test_rename_keeps_the_crawl_hosts_links_once_each():
    names = {"127.0.0.2:8080": "www.s0m0.example", "127.0.0.3:8080": "www.s0m1.example"}
    pages = rename(
        [
            (
                "http://127.0.0.2:8080/x.html",
                [
                    "http://127.0.0.2:8080/y.html",
                    "http://127.0.0.2:8080/y.html#part",  # the same page
                    "http://127.0.0.3:8080/",
                    "https://docs.python.org/3/",  # outside the crawl: not followed
                    "mailto:someone@example.org",
                ],
            ),
            ("http://127.0.0.9:8080/", ["http://127.0.0.2:8080/"]),  # not the crawl's
        ],
        names,
    )
    assert pages == {
        "http://www.s0m0.example/x.html": [
            "http://www.s0m0.example/y.html",
            "http://www.s0m1.example/",
        ]
    }
    assert names_of(["a:1", "b:1", "c:1", "d:1"], 2) == {
        "a:1": "www.s0m0.example",
        "b:1": "www.s0m1.example",
        "c:1": "www.s1m0.example",
        "d:1": "www.s1m1.example",
    }


def test_a_file_that_is_not_a_graph_is_refused(tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a link graph"):
        Graph.load(bad)
    other = tmp_path / "other.json.gz"
    with gzip.open(other, "wt") as f:
        json.dump({"format": "something else"}, f)
    with pytest.raises(ValueError, match=FORMAT):
        Graph.load(other)


@pytest.mark.e2e
def test_a_recorded_crawl_is_replayed_by_bench_frontier(tmp_path):
    out = tmp_path / "graph.json.gz"
    with demo_server(2, 40) as info:
        hosts = info["hosts"]
        names = {netloc: f"www.s{i}m0.example" for i, netloc in enumerate(hosts)}
        counts = record(info["seeds"], names, out, settings=["DEPTH_LIMIT=20"])
    graph = Graph.load(out)
    # the demo web's pages of both seed hosts, with their links (those into the crawl's
    # hosts: the out-of-scope host is not followed)
    assert counts["pages"] == graph.pages >= 60
    assert set(graph.hosts) >= {"www.s0m0.example", "www.s1m0.example"}
    assert graph.links / graph.pages > 2
    assert sorted(graph.seeds) == ["http://www.s0m0.example/", "http://www.s1m0.example/"]

    result = subprocess.run(
        [
            *(sys.executable, "-m", "webcrawl.cli", "bench", "frontier", "--graph", str(out)),
            *("--hosts", "40", "--duration", "2", "--workers", "2"),
        ],
        cwd=ROOT,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = result.stdout
    assert result.returncode == 0, text + result.stderr
    assert f"{graph.pages} pages on" in text and "copies: " in text, text
    lost = text[text.rindex("lost") :].splitlines()[1]
    added, acked, queued, leased, missing, failed = (int(x) for x in lost.split()[-6:])
    assert added == acked + queued + leased and acked > 0, text
    assert missing == 0 and failed == 0, text
    assert added <= graph.urls * 20, text  # never more than the 20 copies hold
    assert "navigation prefill" not in text, text  # nothing prefilled
