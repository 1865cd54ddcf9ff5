"""robots.txt rules as RFC 9309 says (webcrawl.safety.robots): no Scrapy, no network."""

import gzip
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protego import Protego

from webcrawl.safety import robots
from webcrawl.safety.robots import RobotsEntry

UA = "webcrawl/0.1 (+https://github.com/webcrawl/webcrawl)"


# -- what an answer means ---------------------------------------------------------


def test_a_2xx_is_parsed_and_only_our_group_is_kept_with_the_sitemaps():
    text = (
        "User-agent: googlebot\nDisallow: /g/\n\nUser-agent: *\nDisallow: /private/\n"
        "Crawl-delay: 2\nSitemap: https://example.com/s.xml\n"
    )
    entry = robots.from_response(200, text.encode(), 10.0, UA, None, 300)
    assert entry.state == robots.RULES
    assert entry.rules == (
        "User-agent: *\ndisallow: /private/\ncrawl-delay: 2\nSitemap: https://example.com/s.xml\n"
    )
    parser = entry.parser()
    assert list(parser.sitemaps) == ["https://example.com/s.xml"]  # (everyone's: kept)
    assert not parser.can_fetch("https://example.com/private/x", UA)
    assert parser.can_fetch("https://example.com/g/x", UA)
    assert parser.crawl_delay(UA) == 2


def test_a_group_naming_us_wins_over_the_star():
    text = "User-agent: *\nDisallow: /\n\nUser-agent: webcrawl\nDisallow: /only-this/\n"
    parser = robots.from_response(200, text.encode(), 0, UA, None, 300).parser()
    assert parser.can_fetch("http://h/page", UA)
    assert not parser.can_fetch("http://h/only-this/page", UA)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451])
def test_4xx_but_429_allows_everything(status):
    entry = robots.from_response(status, b"<html>nope</html>", 5.0, UA, None, 300)
    assert (entry.state, entry.reason) == (robots.ALLOW_ALL, f"HTTP {status}")
    assert robots.verdict(entry, 6.0, 3) == ("check", 0.0)
    assert entry.parser() is None


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 599])
def test_5xx_and_429_disallow_everything_until_the_next_try(status):
    first = robots.from_response(status, b"", 100.0, UA, None, 300)
    assert (first.state, first.tries, first.retry_at) == (robots.UNREACHABLE, 1, 400.0)
    assert robots.verdict(first, 150.0, 3) == ("wait", 250.0)
    assert robots.verdict(first, 400.0, 3) == ("fetch", 0.0)
    second = robots.unreachable("ConnectionRefusedError: x", 400.0, first, 300)
    third = robots.from_response(status, b"", 700.0, UA, second, 300)
    assert third.tries == 3
    assert robots.verdict(third, 2000.0, 3) == ("give_up", 0.0)
    ok = robots.from_response(200, b"", 1000.0, UA, third, 300)  # a success resets the count
    assert ok.state == robots.RULES and robots.verdict(ok, 1001.0, 3) == ("check", 0.0)


def test_nothing_known_means_fetch():
    assert robots.verdict(None, 0.0, 3) == ("fetch", 0.0)


@pytest.mark.parametrize(
    "body",
    [
        b"<!doctype html><html><head><title>500</title></head><body>Oops</body></html>",
        bytes(range(256)) * 40,
        b"\xff\xfe\x00garbage\x00\x00Disallow /x",
    ],
)
def test_an_html_page_or_garbage_in_a_200_is_parsed_like_a_file(body):
    entry = robots.from_response(200, body, 0, UA, None, 300)
    assert entry.state == robots.RULES
    assert Protego.parse(entry.rules).can_fetch("http://h/anything", UA)


def test_only_the_first_500_kib_are_read_cut_at_a_whole_line():
    head = "User-agent: *\nDisallow: /private/\n"
    filler = "# " + "x" * 97 + "\n"
    text = head + filler * (robots.MAX_BYTES // 100) + "Disallow: /late-rule-is-cut/\n" * 10
    entry = robots.from_response(200, text.encode(), 0, UA, None, 300)
    assert entry.truncated
    parser = entry.parser()
    assert not parser.can_fetch("http://h/private/a", UA)
    assert parser.can_fetch("http://h/late-rule-is-cut/a", UA)
    text, cut = robots.decode_body(b"Disallow: /a\n" + b"y" * robots.MAX_BYTES)
    assert cut and text == "Disallow: /a\n"  # the half line is dropped, not read as /a...


def test_a_bom_and_bad_utf8_are_survived():
    text, cut = robots.decode_body(b"\xef\xbb\xbfUser-agent: *\nDisallow: /\xff\xfe/\n")
    assert text.startswith("User-agent") and not cut


def test_an_entry_round_trips_and_junk_is_not_an_entry():
    entry = RobotsEntry(robots.UNREACHABLE, "", 1.5, 2, 301.5, "HTTP 503")
    assert RobotsEntry.loads(entry.dumps()) == entry
    rules = RobotsEntry(robots.RULES, "User-agent: *\nDisallow: /x\n", 3.0, truncated=True)
    assert RobotsEntry.loads(rules.dumps()) == rules
    silent = robots.unreachable("DNSLookupError: x", 9.0, entry, 300.0, unanswered=True)
    assert silent.unanswered and silent.tries == 3 and silent.retry_at == 309.0
    assert RobotsEntry.loads(silent.dumps()) == silent
    assert not RobotsEntry.loads(entry.dumps()).unanswered
    for junk in (b"", b"{", b"[]", b'{"s": "maybe"}', b'{"t": 1}', b'{"s": "rules", "n": "x"}'):
        assert RobotsEntry.loads(junk) is None


# -- decompressing only the first 500 KiB ------------------------------------------


def test_a_gzip_bomb_expands_only_to_the_limit():
    member = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB in ~64 KiB
    bomb = member * 16  # 1 GiB, as concatenated gzip members
    out = robots.decompress_prefix(bomb, ["gzip"])
    assert robots.MAX_BYTES <= len(out) <= 2 * robots.MAX_BYTES


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate", "br", "zstd", "identity"])
def test_each_encoding_decodes(encoding):
    text = b"User-agent: *\nDisallow: /private/\n" * 3
    if encoding in ("gzip", "x-gzip"):
        body = gzip.compress(text)
    elif encoding == "deflate":
        body = zlib.compress(text)
    elif encoding == "br":
        body = brotli.compress(text)
    elif encoding == "zstd":
        try:
            from compression import zstd
        except ImportError:
            from backports import zstd
        body = zstd.compress(text)
    else:
        body = text
    assert robots.decompress_prefix(body, [encoding]) == text


def test_raw_deflate_stacked_encodings_and_bad_bodies():
    raw = zlib.compressobj(wbits=-15)
    body = raw.compress(b"Disallow: /x\n") + raw.flush()
    assert robots.decompress_prefix(body, ["deflate"]) == b"Disallow: /x\n"
    stacked = brotli.compress(gzip.compress(b"abc"))  # gzip first, then br
    assert robots.decompress_prefix(stacked, ["gzip, br"][0].split(",")) == b"abc"
    with pytest.raises(ValueError, match="bad compressed body"):
        robots.decompress_prefix(b"not gzip at all", ["gzip"])
    with pytest.raises(ValueError, match="unknown Content-Encoding 'compress'"):
        robots.decompress_prefix(b"abc", ["compress"])


# -- the shared group answers as the whole file does ----------------------------------

_AGENTS = ["*", "webcrawl", "WebCrawl", "web*", "googlebot", "webcrawl/0.1", "crawl", "", "*bot"]
_PATHS = [
    "/",
    "/a",
    "/a/",
    "/a/b",
    "/b*",
    "/*.pdf$",
    "/a$",
    "/index.html",
    "/%7Ex",
    "/~x",
    "/p?q=1",
    "/$",
    "/a/b/index.html",
    "",
]
_line = st.one_of(
    st.sampled_from(_AGENTS).map(lambda a: f"User-agent: {a}"),
    st.tuples(
        st.sampled_from(["Allow", "Disallow", "disalow", "DISALLOW"]), st.sampled_from(_PATHS)
    ).map(lambda t: f"{t[0]}: {t[1]}"),
    st.sampled_from(
        [
            "Crawl-delay: 3",
            "Crawl-delay: x",
            "Request-rate: 1/5",
            "Sitemap: http://h/s.xml",
            "Host: h",
            "",
            "# comment",
            "junk line",
            "Visit-time: 0100-0500",
            "Disallow: /a # trailing",
        ]
    ),
    st.text(max_size=20),
)
_URLS = [
    "http://h/",
    "http://h/a",
    "http://h/a/b",
    "http://h/a/b/c",
    "http://h/bx",
    "http://h/x.pdf",
    "http://h/x.pdf?y",
    "http://h/index.html",
    "http://h/~x",
    "http://h/%7Ex",
    "http://h/p?q=1",
    "http://h/a/b/",
    "http://h/z",
]


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(_line, max_size=25), agent=st.sampled_from([UA, "googlebot/2.1", "x"]))
def test_the_compact_group_gives_the_same_answers_as_the_file(lines, agent):
    text = "\n".join(lines)
    whole = Protego.parse(text)
    compact = Protego.parse(robots.compact_rules(text, agent))
    for url in _URLS:
        assert compact.can_fetch(url, agent) == whole.can_fetch(url, agent), url
    assert compact.crawl_delay(agent) == whole.crawl_delay(agent)
    assert compact.request_rate(agent) == whole.request_rate(agent)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=3000), status=st.integers(100, 599))
def test_any_answer_gives_an_entry_and_never_raises(body, status):
    entry = robots.from_response(status, body, 0, UA, None, 300)
    assert RobotsEntry.loads(entry.dumps()) == entry
    parser = entry.parser()
    if parser is not None:
        parser.can_fetch("http://h/a", UA)


def test_a_copy_is_fetched_again_after_a_day_and_kept_while_the_file_is_unreachable():
    """RFC 9309 2.4: a copy is used 24 h; past that it is fetched again, and if the file
    is unreachable then (5xx, or no answer at all) the copy is kept, up to 48 h old, and
    tried again every ``wait``: one failed refetch must not stop a site that is crawled
    well (with the failed-path filter, an unanswered one would kill it)."""
    day = robots.CACHE_SECONDS
    copy = robots.from_response(200, b"User-agent: *\nDisallow: /x\n", 0.0, UA, None, 300)
    assert robots.verdict(copy, day - 1, 3) == ("check", 0.0)
    assert robots.verdict(copy, day, 3) == ("fetch", 0.0)
    silent = robots.unreachable("DNSLookupError: x", day, copy, 300, unanswered=True)
    for kept in (robots.from_response(503, b"", day, UA, copy, 300), silent):
        assert (kept.state, kept.rules, kept.fetched_at) == (robots.RULES, copy.rules, 0.0)
        assert kept.retry_at == day + 300 and not kept.unanswered
        assert kept.reason.startswith("kept: the refetch got ")
        assert robots.verdict(kept, day + 299, 3) == ("check", 0.0)  # the copy's rules
        assert robots.verdict(kept, day + 300, 3) == ("fetch", 0.0)
        assert not kept.parser().can_fetch("http://h/x/1", UA)
    # up to two days old: after that the file is unreachable like any other
    late = robots.unreachable("DNSLookupError: x", 2 * day, copy, 300, unanswered=True)
    assert late.state == robots.UNREACHABLE and late.unanswered and late.tries == 1
    # a fresh answer replaces the copy
    fresh = robots.from_response(200, b"", day + 300, UA, copy, 300)
    assert fresh.fetched_at == day + 300 and robots.verdict(fresh, day + 301, 3) == ("check", 0.0)


def test_sitemap_lines_are_kept_when_no_group_applies_and_capped():
    text = "User-agent: googlebot\nDisallow: /g/\n" + "".join(
        f"Sitemap: /s{i}.xml\n" for i in range(robots.MAX_SITEMAP_LINES + 5)
    )
    entry = robots.from_response(200, text.encode(), 10.0, UA, None, 300)
    parser = entry.parser()
    assert parser.can_fetch("https://example.com/g/x", UA)  # no group of ours
    assert len(list(parser.sitemaps)) == robots.MAX_SITEMAP_LINES
    assert next(iter(parser.sitemaps)) == "/s0.xml"
    assert robots.compact_rules("User-agent: googlebot\nDisallow: /\n", UA) == ""


def test_decoding_is_linear_in_the_members_and_stops_at_a_bound():
    import gzip
    import random
    import time as clock

    empty = gzip.compress(b"")
    body = empty * (2**21 // len(empty)) + gzip.compress(b"x")  # 2 MiB of empty members
    started = clock.perf_counter()
    assert robots.decompress_prefix(body, ["gzip"], 1000) == b""  # MAX_MEMBERS read, no more
    assert clock.perf_counter() - started < 1.0  # (quadratic: about 2 s; 50 MiB: minutes)
    several = gzip.compress(b"a" * 10) + gzip.compress(b"b" * 10) + b"trailing garbage"
    assert robots.decompress_prefix(several, ["gzip"], 1000) == b"a" * 10 + b"b" * 10
    assert robots.decompress_prefix(gzip.compress(b"z" * 100_000), ["gzip"], 5000) == b"z" * 5000
    noise = random.Random(1).randbytes(20_000)
    cut = gzip.compress(noise)[:-200]  # broken off: what came is kept
    decoded = robots.decompress_prefix(cut, ["gzip"], 10**6)
    assert len(decoded) > 15_000 and noise.startswith(decoded)
    with pytest.raises(ValueError, match="bad compressed body"):
        robots.decompress_prefix(b"not compressed at all", ["gzip"], 1000)
    with pytest.raises(ValueError, match="bad brotli body"):
        robots.decompress_prefix(b"not brotli either", ["br"], 1000)
