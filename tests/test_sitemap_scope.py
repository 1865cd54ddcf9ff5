"""Which sitemaps a host offers and which URLs a sitemap may list (sitemaps.org), and
the download bound of a sitemap's body."""

import gzip
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Request, Response
from scrapy.utils.test import get_crawler

from webcrawl.frontier.signals import crawl_may_end
from webcrawl.middlewares.sitemaps import (
    TOKEN,
    SitemapBusy,
    SitemapLimitMiddleware,
    SitemapMemoryMiddleware,
    SitemapWait,
)
from webcrawl.sitemaps.memory import SitemapMemory
from webcrawl.sitemaps.scope import (
    MAX_LISTED,
    Authority,
    directory_of,
    guessed_sitemap,
    listed_sitemaps,
    origin_of,
)
from webcrawl.spiders.sitemaps import _read_body
from webcrawl.urls.urlkey import canonical_url

MiB = 1 << 20


def test_origins_are_normal_and_only_http():
    assert origin_of("HTTP://Example.COM:80/a") == "http://example.com"
    assert origin_of("https://example.com:443/") == "https://example.com"
    assert origin_of("https://example.com:8443/x") == "https://example.com:8443"
    assert origin_of("http://[::1]:8080/") == "http://[::1]:8080"
    assert origin_of("ftp://example.com/") == ""
    assert origin_of("http:///nohost") == ""
    assert origin_of("http://example.com:99999/") == ""


def test_a_sitemap_lists_its_own_directory_by_itself():
    own = Authority.of("http://a.example/news/sitemap.xml")
    assert directory_of("http://a.example/news/sitemap.xml") == "http://a.example/news/"
    assert own.allows("http://a.example/news/2026/x.html")
    assert own.allows("http://A.example:80/news/x")
    assert not own.allows("http://a.example/sports/x")
    assert not own.allows("http://a.example/news/../admin/x")  # dot segments resolved
    assert not own.allows("http://a.example.evil/news/x")
    assert not own.allows("https://a.example/news/x")  # another scheme
    assert not own.allows("http://a.example:8080/news/x")  # another port
    assert not own.allows("mailto:x@a.example")
    root = Authority.of("http://a.example/sitemap.xml")
    assert root.allows("http://a.example/anything") and not root.allows("http://b.example/")
    # the sitemap's own URL is written as the canonical URLs it is compared with are
    tilde = Authority.of("http://A.example/News%7e/./sitemap.xml")
    assert tilde.prefixes == ("http://a.example/News~/",)
    assert tilde.allows(canonical_url("http://a.example/News%7E/x"))
    assert Authority.of("http://a.example/x/../news/s.xml").prefixes == ("http://a.example/news/",)


def test_cross_submission_and_inheritance():
    # b's robots.txt lists a sitemap hosted on a: b's URLs are allowed in it
    hosted = Authority.of("http://a.example/maps/b.xml", ("http://b.example",))
    assert hosted.allows("http://b.example/any/page") and hosted.allows("http://a.example/maps/x")
    assert not hosted.allows("http://c.example/")
    # a child of an index inherits what the index could list
    child = hosted.joined(Authority.of("http://a.example/maps/deep/c.xml"))
    assert child.allows("http://b.example/p") and child.allows("http://a.example/maps/deep/x")
    assert Authority.loads(child.dumps()) == child
    assert Authority.loads("nonsense") == Authority() and not Authority().allows("http://a/")
    assert Authority.loads({"prefixes": "x", "origins": None}) == Authority()


def test_robots_sitemap_lines_are_resolved_deduplicated_and_capped():
    lines = ["/s.xml", " http://b.example/s.xml ", "ftp://x/y", "/s.xml", "http://[bad"]
    assert listed_sitemaps("https://a.example/robots.txt", lines) == [
        "https://a.example/s.xml",
        "http://b.example/s.xml",
    ]
    many = [f"/s{i}.xml" for i in range(MAX_LISTED + 10)]
    assert len(listed_sitemaps("http://a/robots.txt", many)) == MAX_LISTED
    assert guessed_sitemap("http://a.example:8080") == "http://a.example:8080/sitemap.xml"


@given(st.text(max_size=60), st.text(max_size=60))
def test_authority_never_raises(sitemap, url):
    Authority.of(sitemap).allows(url)
    listed_sitemaps("http://a/robots.txt", [sitemap, url])


def _middleware(max_bytes=1000, memory=None, kind=SitemapLimitMiddleware):
    crawler = get_crawler(settings_dict={"SITEMAP_ENABLED": True, "SITEMAP_MAX_BYTES": max_bytes})
    crawler.spider = SimpleNamespace(sitemap_memory=memory)
    return kind.from_crawler(crawler)


def test_a_sitemap_download_lifts_scrapys_maxsize_for_its_own_bound():
    middleware = _middleware()
    request = Request("http://a/sitemap.xml", meta={"sitemap": {}})
    page = Request("http://a/page", meta={"download_maxsize": 5})
    middleware.process_request(request)
    middleware.process_request(page)
    assert request.meta["download_maxsize"] == 0 and page.meta["download_maxsize"] == 5


def test_a_sitemap_holds_its_bytes_until_read_and_an_error_or_a_bad_status_frees_them():
    memory = SitemapMemory(10_000, stale_after=600)
    middleware = _middleware(max_bytes=4000, memory=memory, kind=SitemapMemoryMiddleware)
    limit = _middleware(max_bytes=4000, memory=memory)
    first = Request("http://a/sitemap.xml", meta={"sitemap": {}})
    middleware.process_request(first)
    assert memory.held == 1 and memory.used == 0 and first.meta[TOKEN]  # no answer yet
    middleware._bytes_received(b"x" * 300, first)
    assert 300 <= memory.used <= 4000  # what came (and a little ahead)
    middleware.process_request(first.replace(url="http://a/moved.xml"))  # a redirect
    assert memory.held == 1
    ok = Response(first.url, body=b"<urlset/>")
    ok = limit.process_response(first, middleware.process_response(first, ok))
    assert memory.used == len(b"<urlset/>") and TOKEN in first.meta  # until read
    # its body rides in meta, off Scrapy's scraper slot (which counts response bodies)
    assert ok.body == b"" and first.meta["sitemap_body"] == b"<urlset/>"
    # a redirect (its request may go to another worker) or an error status frees it
    middleware.process_response(first, Response(first.url, status=302))
    assert memory.held == 0 and TOKEN not in first.meta
    middleware.process_request(first)
    middleware.process_response(first, Response(first.url, status=503))
    assert memory.held == 0
    second = Request("http://a/other.xml", meta={"sitemap": {}})
    middleware.process_request(second)
    middleware.process_exception(second, TimeoutError())
    assert memory.held == 0


def test_bytes_are_held_as_they_come_and_a_download_is_stopped_when_they_do_not_fit():
    memory = SitemapMemory(3 * MiB, stale_after=600)
    middleware = _middleware(max_bytes=50 * MiB, memory=memory, kind=SitemapMemoryMiddleware)
    a = Request("http://a/sitemap.xml", meta={"sitemap": {}})
    b = Request("http://b/sitemap.xml", meta={"sitemap": {}})
    middleware.process_request(a)
    middleware.process_request(b)
    chunk = b"x" * (MiB // 4)
    for _ in range(4):
        middleware._bytes_received(chunk, a)  # 1 MiB
    assert memory.used == MiB
    for _ in range(8):  # up to 2 MiB, beside a's
        middleware._bytes_received(chunk, b)
    assert memory.used == 3 * MiB
    with pytest.raises(SitemapBusy):  # they no longer fit
        middleware._bytes_received(chunk, b)
    assert TOKEN not in b.meta  # b's share is freed, its claim held in its place...
    assert memory.held == 2 and memory.used == MiB + int(2 * 2.25 * MiB)
    memory.release(a.meta[TOKEN])
    c = Request("http://c/sitemap.xml", meta={"sitemap": {}})
    try:
        with pytest.raises(SitemapWait):  # ...and claimed for b's return: c waits
            middleware.process_request(c)
        middleware.process_request(b)  # b is admitted with its claim held for it
        assert memory.held_by(b.meta[TOKEN]) == int(2 * 2.25 * MiB)  # (alone: fits)
    finally:
        for call in list(middleware._parked):
            call.cancel()


def test_a_sitemap_waits_while_its_host_has_one_in_flight_and_so_does_a_stopped_one():
    memory = SitemapMemory(5000, stale_after=600)
    middleware = _middleware(memory=memory, kind=SitemapMemoryMiddleware)
    first = Request("http://a/1.xml", meta={"sitemap": {}})
    middleware.process_request(first)
    second = Request("http://a/2.xml", meta={"sitemap": {}})
    try:
        with pytest.raises(SitemapWait):  # (Scrapy's own scheduler: crawled again later)
            middleware.process_request(second)
        assert len(middleware._parked) == 1
        with pytest.raises(SitemapWait):
            middleware.process_exception(first, SitemapBusy())
        assert len(middleware._parked) == 2 and memory.held == 0 and TOKEN not in first.meta
        # parked sitemaps keep the worker open, and a finite crawl from its end (the
        # frontier's crawl_may_end: before crawl_out_of_work and its final re-probe)
        for signal in (signals.spider_idle, crawl_may_end):
            answers = middleware.crawler.signals.send_catch_log(signal, spider=None)
            assert [type(answer.value) for _, answer in answers] == [DontCloseSpider]
    finally:
        for call in list(middleware._parked):
            call.cancel()
    for signal in (signals.spider_idle, crawl_may_end):  # read (here: cancelled): no hold
        assert middleware.crawler.signals.send_catch_log(signal, spider=None) == [
            (middleware._idle, None)
        ]


def test_a_sitemap_body_goes_to_the_spider_as_it_came_with_its_coding():
    """Decoded on the spider's sitemaps thread as it is read (one decoded body in memory
    at a time), not here for every download."""
    middleware = _middleware(max_bytes=1000)
    request = Request("http://a/sitemap.xml", meta={"sitemap": {}})
    bomb = gzip.compress(b" " * 10_000_000)
    response = Response(request.url, body=bomb, headers={"Content-Encoding": "gzip"})
    out = middleware.process_response(request, response)
    assert request.meta["sitemap_body"] == bomb and request.meta["sitemap_encodings"] == ["gzip"]
    assert out.body == b"" and b"Content-Encoding" not in out.headers  # (Scrapy's: not)
    read, undecodable, _ = _read_body(bomb, ["gzip"], max_urls=10, max_bytes=1000)
    assert read.too_large and not undecodable
    read, undecodable, size = _read_body(b"not gzip", ["gzip"], max_urls=10, max_bytes=1000)
    assert undecodable and not read.entries and size == 0
    text = b"http://a/1\nhttp://a/2\n"
    read, _, size = _read_body(text, [], max_urls=10, max_bytes=1000)
    assert [e.url for e in read.entries] == ["http://a/1", "http://a/2"] and size > 20
    other = Request("http://a/page")
    untouched = Response(other.url, body=bomb, headers={"Content-Encoding": "gzip"})
    assert middleware.process_response(other, untouched) is untouched


def test_the_memory_sees_a_redirect_before_scrapy_follows_it():
    from scrapy.settings.default_settings import DOWNLOADER_MIDDLEWARES_BASE

    from webcrawl.settings import defaults

    ours = defaults.DOWNLOADER_MIDDLEWARES
    redirect = DOWNLOADER_MIDDLEWARES_BASE[
        "scrapy.downloadermiddlewares.redirect.RedirectMiddleware"
    ]
    slots = ours["webcrawl.middlewares.sitemaps.SitemapMemoryMiddleware"]
    # responses pass from the highest order down: the memory frees a redirect's share,
    # and gives theirs after the host's turn (AdaptiveDelayMiddleware) and robots.txt
    assert slots > redirect
    assert slots > ours["webcrawl.middlewares.adaptive_delay.AdaptiveDelayMiddleware"]
    assert slots > ours["webcrawl.middlewares.robotstxt.RobotsTxtMiddleware"]
