"""The demo web's sitemaps (``--sitemaps``): each host's role, read as a crawler reads it."""

import email.utils
import json
import subprocess
import sys
import time
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import urlsplit

import pytest

from webcrawl.demo.changes import ChangeModel
from webcrawl.demo.web import BOMB_BYTES, LAST_MODIFIED, DemoWeb
from webcrawl.sitemaps.parse import SITEMAPINDEX, TEXT, URLSET, Sitemap, parse_sitemap

HOSTS = [f"127.0.0.{2 + i}:1" for i in range(5)]  # 4 seed hosts: every role
WEB = DemoWeb(HOSTS, 24, seed=2, sitemaps=True)
PLAIN = DemoWeb(HOSTS, 24, seed=2)
H0, H1, H2, H3, H4 = (f"http://{h}" for h in HOSTS)
NOW = 1_800_000_000.0


def read(web: DemoWeb, url: str, now: float = NOW, changes: ChangeModel | None = None) -> Sitemap:
    served = web.sitemap_file(url, now, changes)
    assert served is not None, url
    return parse_sitemap(served[0])


def pages_of(host: str) -> list[str]:
    """What a truthful sitemap lists: the host's pages recorded at their own URL."""
    moved = {p.redirect_to for p in PLAIN.pages.values()}
    return sorted(
        u
        for u, p in PLAIN.pages.items()
        if u.startswith(host + "/") and p.kind == "html" and PLAIN.allowed(u) and u not in moved
    )


def sitemap_lines(robots: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in robots.splitlines() if line.startswith("Sitemap:")]


def test_without_the_option_the_web_is_what_it_was():
    assert set(PLAIN.pages) < set(WEB.pages)
    assert set(WEB.pages) - set(PLAIN.pages) == set(WEB.sitemap_only()) | {
        f"{H3}/only/x0.html",
        f"{H3}/only/x1.html",
    }
    changed = [
        u
        for u, page in PLAIN.pages.items()
        if PLAIN.render(page) != WEB.render(WEB.pages[u]) or page.links != WEB.pages[u].links
    ]
    assert changed == [f"{h}/robots.txt" for h in (H0, H1, H2)]
    assert all("Sitemap" not in PLAIN.robots_txt(h) for h in HOSTS)
    assert PLAIN.sitemap_urls() == [] and PLAIN.sitemap_only() == {}
    assert PLAIN.truthful_host is None and PLAIN.lying_host is None
    assert PLAIN.sitemap_file(f"{H3}/sitemap.xml", NOW) is None
    assert PLAIN.reachable(sitemaps=True) == PLAIN.reachable() == WEB.reachable()


def test_the_truthful_host_lists_its_pages_with_their_last_change():
    assert WEB.truthful_host == HOSTS[0]
    assert sitemap_lines(WEB.robots_txt(HOSTS[0])) == [f"{H0}/sitemap_index.xml"]
    index = read(WEB, f"{H0}/sitemap_index.xml")
    assert index.kind == SITEMAPINDEX and index.complete
    assert [s.url for s in index.sitemaps] == [
        f"{H0}/sitemaps/pages.xml",
        f"{H0}/sitemaps/more.xml.gz",
    ]
    assert {s.lastmod for s in index.sitemaps} == {LAST_MODIFIED}
    first, second = read(WEB, f"{H0}/sitemaps/pages.xml"), read(WEB, f"{H0}/sitemaps/more.xml.gz")
    assert first.kind == second.kind == URLSET and first.complete and second.complete
    assert WEB.sitemap_file(f"{H0}/sitemaps/more.xml.gz", NOW)[1] == "application/gzip"
    own = [e.url for e in first.entries + second.entries if e.url.startswith(H0 + "/")]
    assert own == pages_of(H0) and len(second.entries) == len(pages_of(H0)) // 2
    strays = [e.url for e in first.entries if not e.url.startswith(H0 + "/")]
    assert len(strays) == 2 and all(u.startswith(H1 + "/s") and PLAIN.pages[u] for u in strays)
    assert set(strays) <= set(WEB.sitemap_dropped())
    assert {e.lastmod for e in first.entries + second.entries} == {LAST_MODIFIED}
    assert {e.changefreq for e in first.entries + second.entries} == {None}  # static: no period


@pytest.mark.parametrize("speed", [1.0, 3600.0])
def test_truthful_lastmods_are_the_pages_last_modified_in_the_changing_web(speed):
    html = [u for u, p in WEB.pages.items() if p.kind == "html"]
    changes = ChangeModel(html, seed=2, speed=speed, periodic_share=1.0, start=NOW - 600)
    first = read(WEB, f"{H0}/sitemaps/pages.xml", NOW, changes).entries
    entries = first + read(WEB, f"{H0}/sitemaps/more.xml.gz", NOW, changes).entries
    assert len(entries) == len(pages_of(H0)) + 2
    for entry in entries:
        modified = changes.last_modified(entry.url, changes.version(entry.url, NOW))
        header = email.utils.formatdate(modified, usegmt=True)  # what the page sends now
        assert entry.lastmod == email.utils.parsedate_to_datetime(header).timestamp()
        period = changes.processes[entry.url].period / speed  # periodic: hour, day or week
        expected = {3600: "hourly", 86400: "daily", 604800: "weekly"}.get(period, "always")
        assert entry.changefreq == expected
    assert len({changes.version(e.url, NOW) for e in entries}) > 1  # not all as they began
    index = read(WEB, f"{H0}/sitemap_index.xml", NOW, changes)
    assert index.sitemaps[0].lastmod == max(e.lastmod for e in first)  # its latest page


def test_the_lying_host_says_every_page_changed_now():
    assert WEB.lying_host == HOSTS[1]
    assert sitemap_lines(WEB.robots_txt(HOSTS[1])) == [f"{H1}/sitemap.xml"]
    for now in (NOW, NOW + 3600.5):
        sitemap = read(WEB, f"{H1}/sitemap.xml", now)
        assert sitemap.kind == URLSET and sitemap.complete
        assert [e.url for e in sitemap.entries] == pages_of(H1)
        assert {e.lastmod for e in sitemap.entries} == {float(int(now))}


def test_pages_only_sitemaps_lead_to_one_of_them_cross_submitted():
    assert sitemap_lines(WEB.robots_txt(HOSTS[2])) == [
        f"{H2}/sitemap.txt",
        f"{H0}/sitemaps/cross.xml",
    ]
    text = read(WEB, f"{H2}/sitemap.txt")
    assert WEB.sitemap_file(f"{H2}/sitemap.txt", NOW)[1].startswith("text/plain")
    only = [f"{H2}/only/o{i}.html" for i in range(15)]
    assert text.kind == TEXT and text.complete
    listed = [e.url for e in text.entries]
    assert listed[:10] == only[:10] and set(listed[10:]) < set(pages_of(H2))
    cross = read(WEB, f"{H0}/sitemaps/cross.xml")
    decoys = [f"{H3}/only/x0.html", f"{H3}/only/x1.html"]
    assert [e.url for e in cross.entries] == only[10:] + decoys
    dropped = {u: why for u, why in WEB.sitemap_dropped().items() if u.startswith(H3)}
    assert dropped == dict.fromkeys(decoys, "not cross-submitted by " + HOSTS[3])
    # host 0 names it nowhere: it is host 2's to submit
    assert f"{H0}/sitemaps/cross.xml" not in WEB.robots_txt(HOSTS[0])
    assert all(
        s.url != f"{H0}/sitemaps/cross.xml" for s in read(WEB, f"{H0}/sitemap_index.xml").sitemaps
    )
    linked = {link for page in WEB.pages.values() for link in page.links}
    for url in only + decoys:
        page = WEB.pages[url]
        body = WEB.render(page)[0]
        assert page.kind == "html" and b"<title>" in body and b"<p>" in body
        assert url not in linked and page.links == [url[: url.index("/only/")] + "/"]
    assert WEB.sitemap_only() == {
        **dict.fromkeys(only[:10], "sitemap"),
        **dict.fromkeys(only[10:], "cross-submitted"),
        **dict.fromkeys([f"{H3}/only/b{i}.html" for i in range(3)], "bomb"),
    }


def test_reachable_with_sitemaps_adds_the_pages_only_sitemaps_lead_to_at_depth_1():
    plain, full = WEB.reachable(), WEB.reachable(sitemaps=True)
    assert set(full) == set(plain) | set(WEB.sitemap_only())
    assert all(full[u] == 1 for u in WEB.sitemap_only())
    assert not set(full) & {f"{H3}/only/x0.html", f"{H3}/only/x1.html"}  # dropped: never
    assert all(full[u] <= 1 for u in pages_of(H0) + pages_of(H1))  # listed: taken at once
    assert set(WEB.reachable(sitemaps=True, depth_limit=0)) == set(WEB.seeds())
    # only host 0 in scope: its own pages, none of host 2's (its robots.txt is never read)
    alone = WEB.reachable([f"{H0}/"], sitemaps=True)
    assert set(alone) == set(WEB.reachable([f"{H0}/"]))
    dead = (f"{H2}/",)  # host 2 down: its robots.txt, so its sitemaps, unread
    assert set(WEB.reachable(sitemaps=True, dead=dead)) == set(WEB.reachable(dead=dead)) | {
        u for u, how in WEB.sitemap_only().items() if how == "bomb"
    }


def test_the_hostile_host_loops_and_bombs():
    assert sitemap_lines(WEB.robots_txt(HOSTS[3])) == []
    index = read(WEB, f"{H3}/sitemap.xml")
    assert index.kind == SITEMAPINDEX
    assert [s.url for s in index.sitemaps] == [
        f"{H3}/sitemap.xml",
        f"{H3}/loop/a.xml",
        f"{H3}/bomb.xml.gz",
    ]
    assert [s.url for s in read(WEB, f"{H3}/loop/a.xml").sitemaps] == [f"{H3}/sitemap.xml"]
    for host in (H0, H2, H4):  # a guess elsewhere finds nothing
        assert WEB.sitemap_file(f"{host}/sitemap.xml", NOW) is None
    assert set(WEB.sitemap_urls()) == {
        f"{H0}/sitemap_index.xml",
        f"{H0}/sitemaps/pages.xml",
        f"{H0}/sitemaps/more.xml.gz",
        f"{H0}/sitemaps/cross.xml",
        f"{H1}/sitemap.xml",
        f"{H2}/sitemap.txt",
        f"{H3}/sitemap.xml",
        f"{H3}/loop/a.xml",
        f"{H3}/bomb.xml.gz",
    }


def test_the_bomb_is_built_fast_once_and_inflates_past_a_gib():
    web = DemoWeb(HOSTS, 24, seed=2, sitemaps=True)
    started = time.perf_counter()
    body, ctype = web.sitemap_file(f"{H3}/bomb.xml.gz", NOW)
    assert time.perf_counter() - started < 2.0
    assert web.sitemap_file(f"{H3}/bomb.xml.gz", NOW)[0] is body  # made once
    assert ctype == "application/gzip" and len(body) < 2 << 20
    inflater, total, data = zlib.decompressobj(16 + zlib.MAX_WBITS), 0, body
    while not inflater.eof and total <= 2 * BOMB_BYTES:  # one member, its CRC checked at eof
        total += len(inflater.decompress(data, 16 << 20))
        data = inflater.unconsumed_tail
        assert data or inflater.eof
    assert inflater.eof and not inflater.unused_data and total > BOMB_BYTES
    sitemap = parse_sitemap(body)
    assert sitemap.kind == URLSET and sitemap.too_large and not sitemap.malformed
    assert [e.url for e in sitemap.entries] == [f"{H3}/only/b{i}.html" for i in range(3)]


def test_a_smaller_web_has_fewer_roles():
    three = DemoWeb(HOSTS[:3], 20, sitemaps=True)  # hosts 0 and 1 are seeds
    assert (three.truthful_host, three.lying_host) == (HOSTS[0], HOSTS[1])
    assert three.sitemap_only() == {} and "Sitemap" not in three.robots_txt(HOSTS[2])
    two = DemoWeb(HOSTS[:2], 20, sitemaps=True)  # host 1 is out of scope: no liar
    assert (two.truthful_host, two.lying_host) == (HOSTS[0], None)
    assert sorted(two.sitemap_urls()) == sorted(
        f"{H0}/{p}" for p in ("sitemap_index.xml", "sitemaps/pages.xml", "sitemaps/more.xml.gz")
    )


# -- served ---------------------------------------------------------------------


def get(url: str, method: str = "GET", **headers: str) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
    except HTTPError as exc:
        with exc:
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


@contextmanager
def sitemap_server(log: Path, *options: str) -> Iterator[dict]:
    """The demo web with ``--sitemaps`` in a subprocess (``demo_server`` has no option for it)."""
    cmd = [sys.executable, "-m", "webcrawl.demo.web", "--hosts", "4", "--pages", "20"]
    proc = subprocess.Popen(
        [*cmd, "--sitemaps", "--log", str(log), *options], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"the demo web did not start (exit {proc.wait()})"
        yield json.loads(line)
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.e2e
def test_served_sitemaps_headers_faults_and_log(tmp_path):
    log = tmp_path / "requests.jsonl"
    with sitemap_server(log, "--fault", "2:/sitemap.txt:503:1") as info:
        assert info["sitemaps"] is True
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"], sitemaps=True)
        h0, h1, h3 = (f"http://{info['hosts'][i]}" for i in (0, 1, 3))
        assert get(f"{h0}/robots.txt")[2] == web.robots_txt(info["hosts"][0]).encode()
        served = {}
        for url in web.sitemap_urls():
            if url.endswith("/sitemap.txt"):
                assert get(url)[0] == 503  # the fault, once
            status, headers, body = get(url)
            expected = web.sitemap_file(url, time.time())
            assert status == 200 and "content-encoding" not in headers, url
            assert headers["content-type"] == expected[1]
            assert int(headers["content-length"]) == len(body)
            if url != f"{h1}/sitemap.xml":  # the liar's lastmods move with the clock
                assert body == expected[0], url
            served[url] = body, headers
        assert get(f"{h0}/sitemap.xml")[0] == 404  # a guess finds nothing but on host 3
        pages, headers = served[f"{h0}/sitemaps/pages.xml"]
        assert get(f"{h0}/sitemaps/pages.xml", **{"If-None-Match": headers["etag"]})[0] == 304
        assert get(f"{h3}/bomb.xml.gz", "HEAD")[2] == b""
        for entry in parse_sitemap(pages).entries[:5]:
            modified = get(entry.url)[1]["last-modified"]
            assert entry.lastmod == email.utils.parsedate_to_datetime(modified).timestamp()
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    paths = [(r["host"], r["path"], r["status"]) for r in sent]
    for url in web.sitemap_urls():
        parts = urlsplit(url)
        assert (parts.netloc, parts.path, 200) in paths
    assert (info["hosts"][2], "/sitemap.txt", 503) in paths
    assert (info["hosts"][0], "/sitemaps/pages.xml", 304) in paths


@pytest.mark.e2e
def test_served_truthful_lastmods_follow_the_changing_pages(tmp_path):
    with sitemap_server(tmp_path / "requests.jsonl", "--change-speed", "60") as info:
        h0 = f"http://{info['hosts'][0]}"
        before = parse_sitemap(get(f"{h0}/sitemaps/pages.xml")[2]).entries
        headers = {e.url: get(e.url)[1]["last-modified"] for e in before}
        after = {
            e.url: e.lastmod for e in parse_sitemap(get(f"{h0}/sitemaps/pages.xml")[2]).entries
        }
    steady = [e for e in before if after[e.url] == e.lastmod]  # no change while we looked
    assert len(steady) > len(before) // 2
    for entry in steady:
        assert entry.lastmod == email.utils.parsedate_to_datetime(headers[entry.url]).timestamp()
        assert entry.lastmod != LAST_MODIFIED and entry.changefreq is not None
