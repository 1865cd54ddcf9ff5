"""Property-based tests (hypothesis): URL canonicalisation and row keys, seed parsing,
and text and link extraction, on arbitrary input."""

from __future__ import annotations

import contextlib
import string

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scrapy.http import HtmlResponse, Request
from scrapy.linkextractors import LinkExtractor

from webcrawl import extract
from webcrawl.safety.traps import TrapRules
from webcrawl.urls.seeds import parse_seed_lines
from webcrawl.urls.urlkey import BadURLError, canonical_url, key_to_url, url_to_key

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_label = st.text(string.ascii_letters + string.digits + "-", min_size=1, max_size=12)
_hosts = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"),
    st.text(min_size=1, max_size=15),  # anything, IDNA and garbage included
)
_part = st.text(max_size=12)  # any characters: percent-encoding, unicode, separators
_urls = st.builds(
    lambda scheme, host, port, segments, query, fragment: (
        f"{scheme}://{host}{port}/" + "/".join(segments) + query + fragment
    ),
    st.sampled_from(["http", "https", "HTTP", "ftp", ""]),
    _hosts,
    st.one_of(st.just(""), st.integers(0, 70000).map(lambda p: f":{p}")),
    st.lists(_part, max_size=6),
    st.one_of(
        st.just(""),
        st.lists(st.tuples(_part, _part), max_size=4).map(
            lambda kv: "?" + "&".join(f"{k}={v}" for k, v in kv)
        ),
    ),
    st.one_of(st.just(""), _part.map(lambda f: "#" + f)),
)


@SETTINGS
@given(st.one_of(_urls, st.text(max_size=60)))
def test_canonicalising_twice_changes_nothing_and_keys_round_trip(url):
    try:
        canon = canonical_url(url)
    except BadURLError:
        return  # our clear error, and only it
    assert canonical_url(canon) == canon
    assert url_to_key(canon) == url_to_key(url)
    assert key_to_url(url_to_key(url)) == canon
    TrapRules().why(canon)  # never raises


@SETTINGS
@given(st.lists(st.one_of(_urls, st.text(max_size=40)), max_size=20))
@example(lines=["http://\\/"])  # found by Hypothesis: w3lib reads the host "\\" as a path
def test_seed_parsing_reports_every_line_it_skips(lines):
    urls, bad = parse_seed_lines(lines, "seeds.txt")
    assert len(urls) == len(set(urls))
    assert all(canonical_url(u) == u for u in urls)
    kept = [
        n for n, line in enumerate(lines, 1) if line.strip() and not line.strip().startswith("#")
    ]
    skipped = {b.line for b in bad}
    assert skipped <= set(kept)
    for n in kept:  # every line is a seed, or reported
        if n not in skipped:
            assert canonical_url(lines[n - 1].strip()) in urls
    for seed in bad:
        assert str(seed).startswith(f"seeds.txt:{seed.line}: ")


@SETTINGS
@given(
    body=st.binary(max_size=3000),
    encoding=st.sampled_from(["utf-8", "latin-1", "no-such-charset", "utf-16", ""]),
)
def test_text_and_links_of_arbitrary_bytes(body, encoding):
    headers = {"Content-Type": f"text/html; charset={encoding}" if encoding else "text/html"}
    response = HtmlResponse("http://h/p", body=body, headers=headers, request=Request("http://h/p"))
    extract.title(response.selector)
    extract.visible_text(response.selector)
    for link in LinkExtractor(unique=True).extract_links(response):
        with contextlib.suppress(BadURLError):  # our clear error, and only it
            canonical_url(link.url)
