"""Outlinks from the lxml tree (webcrawl.links): the same URLs as Scrapy's LinkExtractor
followed by canonical_url, on made-up links, on real pages, on the demo web."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.response import get_base_url

from webcrawl.links import LinkResolver, page_links
from webcrawl.settings.defaults import LINKS_DENY_EXTENSIONS
from webcrawl.urls.urlkey import BadURLError, canonical_url

DENY = {f".{e}" for e in LINKS_DENY_EXTENSIONS}
PAGES = Path(__file__).parent / "data" / "pages"


def reference(response: HtmlResponse) -> list[str]:
    """What the spider took before: LinkExtractor, then canonical_url on each link."""
    extractor = LinkExtractor(deny_extensions=LINKS_DENY_EXTENSIONS, unique=True)
    out: dict[str, None] = {}
    for link in extractor.extract_links(response):
        try:
            out[canonical_url(link.url)] = None
        except BadURLError:
            continue
    return list(out)


def ours(response: HtmlResponse) -> list[str]:
    return page_links(
        response.selector.root,
        response.url,
        get_base_url(response),
        response.encoding,
        deny_extensions=DENY,
    )


def html_response(url: str, body: bytes, content_type: str = "text/html") -> HtmlResponse:
    return HtmlResponse(url, body=body, headers={"Content-Type": content_type})


# -- the fast path against the slow one (which is LinkExtractor's steps) ----------------

_PIECES = [
    "a",
    "B",
    "0",
    "-",
    ".",
    "..",
    "/",
    "//",
    "./",
    "../",
    "#",
    "#x",
    "?",
    "?b=1&a=2",
    "&",
    "=",
    ";",
    ";jsessionid=1",
    "(",
    ")",
    "%",
    "%2E",
    "%41",
    "%zz",
    ":",
    "@",
    "!",
    "~",
    "_",
    "*",
    "'",
    "+",
    ",",
    "$",
    " ",
    "\t",
    "\n",
    "\\",
    "[",
    "]",
    "é",
    "ü/",
    "\u0130",
    "\ud800",
    "http:",
    "https:",
    "HTTP:",
    "http://",
    "https://",
    "javascript:",
    "mailto:",
    "ftp://",
    "file:///",
    "1a:",
    "a.pdf",
    ".PNG",
    ".tar.gz",
    "x.html",
    "index.html",
    "xn--bcher-kva.example",
    "Example.COM",
    "h.example:80",
    ":8080",
    ":443",
    ":99999",
    "[::1]",
    "[",
    "user@",
    "..//",
    "\x00",
]
_BASES = [
    "http://example.com/",
    "http://example.com",
    "http://example.com/a/b/c.html",
    "https://docs.example.org/3/library/os.html?q=1#top",
    "http://h.example:8080/a/",
    "http://example.com/a//b/",
    "http://example.com/a/./b/../c",
    "http://EXAMPLE.com/A/",
    "https://example.com:443/x",
    "http://192.168.0.1/a/b",
    "http://[::1]:8000/a/b",
    "http://xn--bcher-kva.example/a",
    "http://example.com/%7Euser/",
    "http://e.com/a;p=1/b",
    "https://example.com/a/b?x=1&y=2",
    "ftp://example.com/pub/",
    "http://example.com/é/",
]
_HOSTS = [
    "example.com",
    "Example.COM",
    "h.example:8080",
    "h.example:80",
    "e.com:443",
    "a..b",
    "xn--bcher-kva.example",
    "bücher.example",
    "[::1]",
    "1.2.3.4",
    "-x.example",
    "x" * 64,
]
_paths = st.lists(st.sampled_from(_PIECES), max_size=8).map("".join)
# mostly characters of the fast path, where the two paths could part
_SAFE_PIECES = [
    "a",
    "Z",
    "9",
    "/",
    "//",
    ".",
    "..",
    "./",
    "../",
    "/.",
    "/..",
    ".x",
    "x.",
    "-",
    "~",
    "!",
    "$",
    "&",
    "'",
    "*",
    "+",
    ",",
    "=",
    ":",
    "@",
    "x.html",
    ".PNG",
    ".pdf",
    ".tar.gz",
    "#",
    "#a/b?c",
    "?",
    "%",
    ";",
]
_safe_paths = st.lists(st.sampled_from(_SAFE_PIECES), max_size=10).map("".join)
_absolute = st.builds(
    "{}{}{}".format,
    st.sampled_from(["http://", "https://", "HTTP://", "//"]),
    st.sampled_from(_HOSTS),
    st.one_of(_paths, _safe_paths),
)
hrefs = st.one_of(_paths, _safe_paths, _absolute)


@settings(max_examples=1200, deadline=None)
@given(base=st.sampled_from(_BASES), href=hrefs, deny=st.booleans())
@example(base="http://example.com/a/", href="../../../x", deny=False)
@example(base="http://example.com", href="a", deny=False)
@example(base="http://example.com/a/b", href="/../x", deny=False)
@example(base="http://example.com/a/b", href="javascript:void(0)", deny=False)
@example(base="http://example.com/a/b", href="x.PNG#y", deny=True)
def test_fast_path_agrees_with_linkextractor_steps(base: str, href: str, deny: bool) -> None:
    resolver = LinkResolver(base, base, "utf-8", DENY if deny else ())
    assert resolver.canonical(href) == resolver.slow(href.strip(" \t\n\r\x0c"))


@settings(max_examples=200, deadline=None)
@given(
    page=st.sampled_from(_BASES),
    base=st.sampled_from(["", *_BASES]),
    hrefs=st.lists(hrefs, max_size=12),
    charset=st.sampled_from(["utf-8", "latin-1"]),
)
def test_page_links_agree_with_linkextractor(
    page: str, base: str, hrefs: list[str], charset: str
) -> None:
    base_tag = f'<base href="{base}">' if base else ""
    anchors = "".join(f"<a href='{h.replace(chr(39), '&#39;')}'>x</a>" for h in hrefs)
    body = (
        f"<html><head>{base_tag}</head><body>{anchors}<area href='{hrefs[0] if hrefs else ''}'>"
        f"</body></html>"
    ).encode(charset, "xmlcharrefreplace")
    try:
        response = html_response(page, body, f"text/html; charset={charset}")
    except ValueError:
        return  # Scrapy refuses the page's URL itself
    assert ours(response) == reference(response)


# -- hand-picked cases ------------------------------------------------------------------

EDGE_PAGE = """<!DOCTYPE html><html><head><title>Links</title>
<base href="/docs/v2/"></head><body>
<a href="intro.html">relative to the base</a>
<a href="  ../up.html#sec  ">whitespace and a fragment</a>
<a href="#top">the base itself</a><a href="">empty</a><a>no href</a>
<a href="javascript:void(0)">js</a><a href="mailto:a@example.com">mail</a>
<a href="tel:+123">tel</a><a href="ftp://example.com/f">ftp</a>
<a href="//other.example/x">network path</a><a href="HTTP://Example.COM:80/A">upper</a>
<a href="https://example.com:443/b">default port</a><a href="http://[::1]:8080/v6">v6</a>
<a href="http://bücher.example/straße">IDNA</a><a href="/café/menü.html">non-ASCII path</a>
<a href="/a%2Epdf">encoded dot</a><a href="/x.pdf">pdf</a><a href="/y.PNG">png</a>
<a href="/q?b=2&amp;a=1&amp;PHPSESSID=9">query</a><a href="/s;jsessionid=ABC">session</a>
<a href="/(S(abcdefghijklmnopqrstuvwx))/p.aspx">asp.net</a><a href="http://[::1">bad v6</a>
<a href="http://example.com:99999/">bad port</a><a href="/a/./b/../c">dots</a>
<a href="/a//b">double slash</a><a href="HTTPS:rel">scheme, no host</a>
<map><area href="/map-area" shape="rect"></map>
<svg><a href="/in-svg">svg link</a></svg>
<a href="intro.html">repeat</a><a href="/%7euser/">tilde</a><a href="/sp ace">space</a>
</body></html>"""


def test_edge_cases_page() -> None:
    response = html_response("http://example.com/page?id=1", EDGE_PAGE.encode())
    got = ours(response)
    assert got == reference(response)
    assert "http://example.com/docs/v2/intro.html" in got
    assert "http://example.com/docs/up.html" in got
    assert "http://example.com/x.pdf" in got  # documents are followed (settings)
    assert not any(u.endswith(".png") or u.startswith(("mailto", "javascript")) for u in got)


def test_base_beyond_the_first_4096_characters_is_ignored_as_scrapy_does() -> None:
    body = (
        f"<html><head><!-- {'x' * 5000} --><base href='/deep/'></head><body>"
        "<a href='p.html'>p</a></body></html>"
    )
    response = html_response("http://example.com/top/index.html", body.encode())
    assert ours(response) == reference(response) == ["http://example.com/top/p.html"]


def test_latin1_page_query_is_encoded_in_the_page_encoding() -> None:
    body = "<a href='/s?q=caf\xe9'>x</a><a href='/caf\xe9'>y</a>".encode("latin-1")
    response = html_response("http://example.com/", body, "text/html; charset=latin-1")
    assert ours(response) == reference(response)
    assert ours(response)[0] == "http://example.com/s?q=caf%E9"


# -- real pages: saved pages of other projects (see data/pages/README.md) ----------------


def _saved_pages() -> list[Path]:
    return sorted(PAGES.glob("*.html.gz"))


def test_the_saved_pages_are_there() -> None:
    assert len(_saved_pages()) >= 20


@pytest.mark.parametrize("path", _saved_pages(), ids=lambda p: p.name.removesuffix(".html.gz"))
def test_saved_real_pages_agree_with_linkextractor(path: Path) -> None:
    meta = json.loads(path.with_name(path.name.removesuffix(".html.gz") + ".json").read_text())
    response = html_response(
        meta["url"], gzip.decompress(path.read_bytes()), meta.get("content_type", "text/html")
    )
    expected = reference(response)
    assert expected, "a saved page without links tests nothing"
    assert ours(response) == expected


def test_demo_web_pages_agree_with_linkextractor() -> None:
    from webcrawl.demo.web import DemoWeb

    web = DemoWeb(["127.0.0.1:8001", "127.0.0.1:8002", "localhost:8003"], 40)
    checked = 0
    for page in web.pages.values():
        body, content_type = web.render(page)
        if page.kind != "html":
            continue
        response = html_response(page.url, body, content_type)
        assert ours(response) == reference(response), page.url
        checked += 1
    assert checked >= 100
