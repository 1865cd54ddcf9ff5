"""Queue entries are data from Redis or the store: what a worker refuses to read
(webcrawl/frontier/entry.py), and what it leaves out of its own entries."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.linkextractors import LinkExtractor
from scrapy.settings import Settings
from scrapy.spiders import CrawlSpider, Rule

from webcrawl.frontier.entry import EntryCodec, EntryRules, RefusedEntry
from webcrawl.frontier.scheduler import entry_rules


class S(Spider):
    name = "s"

    def parse(self, response):  # pragma: no cover - never called
        return None


def codec(**rules: object) -> EntryCodec:
    return EntryCodec(S(), EntryRules(**rules))


@pytest.mark.parametrize(
    ("member", "kind", "url"),
    [
        # the review's example: a local file, through the metadata service as a proxy
        (
            b'1|{"url":"file:///etc/hostname","meta":{"proxy":"http://169.254.169.254:80"}}',
            "scheme",
            None,
        ),
        (b'1|{"url":"ftp://h/x"}', "scheme", None),
        (b'1|{"url":"data:text/plain,hi"}', "scheme", None),
        (b'1|{"url":"s3://bucket/key"}', "scheme", None),
        (b'1|{"url":"http:///x"}', "url", None),
        (
            b'1|{"url":"http://a/x","meta":{"proxy":"http://169.254.169.254:80"}}',
            "meta",
            "http://a/x",
        ),
        (
            b'1|{"url":"https://a/x","meta":{"_auth_proxy":"http://10.0.0.1:3128"}}',
            "meta",
            "https://a/x",
        ),
        (b'1|{"url":"http://a/x","meta":{"bindaddress":["127.0.0.1",0]}}', "meta", "http://a/x"),
        (b'1|{"url":"http://a/x","meta":{"download_slot":"victim.example"}}', "meta", "http://a/x"),
        (b'1|{"url":"http://a/x","meta":"proxy"}', "unreadable", "http://a/x"),
        (b'1|{"url":"http://a/x","_class":"os.system"}', "class", "http://a/x"),
        (b'1|{"url":"http://a/x","callback":"nowhere"}', "callback", "http://a/x"),
        # a spider attribute that is not a callback: would replace spider.crawler
        (b'1|{"url":"http://a/x","callback":"_set_crawler"}', "callback", "http://a/x"),
        (b'1|{"url":"http://a/x","errback":"close"}', "callback", "http://a/x"),
        (b'1|{"url":"http://a/x","meta":{"dont_obey_robotstxt":true}}', "meta", "http://a/x"),
        (b'1|{"url":"http://a/x","meta":{"robots_txt":1}}', "meta", "http://a/x"),
        (b'1|{"url":"http://a/x","meta":{"download_maxsize":0}}', "meta", "http://a/x"),
        (
            b'1|{"url":"http://a/x","meta":{"$d":[["proxy","http://10.0.0.1/"]]}}',
            "meta",
            "http://a/x",
        ),
        # garbage of other shapes: refused, never an exception out of the queue's step
        (b"1|" + b"[" * 100000 + b"]" * 100000, "unreadable", None),
        (b'1|{"url":{"$b":5}}', "unreadable", None),
        (b'1|{"url":"http://a/x","meta":{"$d":5}}', "unreadable", None),
        (b'1|{"url":"http://a/x","_ref":"/\\u0100"}', "unreadable", None),
        (b'1|{"url":"http://a:99999/x","meta":{"proxy":"http://10.0.0.1/"}}', "meta", None),
        (b"1|[]", "unreadable", None),
    ],
)
def test_forged_entries_are_refused_with_their_kind(member, kind, url):
    with pytest.raises(RefusedEntry) as refused:
        codec().decode(member)
    assert (refused.value.kind, refused.value.url) == (kind, url)


@pytest.mark.parametrize("value", ["null", "false", "0", "1000"])
def test_a_guarded_key_is_refused_whatever_its_value(value):
    """Found by a review: Scrapy reads a null or false download_maxsize as no limit, and
    a null proxy as no proxy (not the operator's)."""
    for key in ("download_maxsize", "proxy", "download_timeout"):
        with pytest.raises(RefusedEntry, match=key):
            codec().decode(
                b'1|{"url":"http://a/x","meta":{"%s":%s}}' % (key.encode(), value.encode())
            )


def test_a_callback_of_the_spider_is_read():
    assert codec().decode(b'1|{"url":"http://a/x","callback":"parse"}').callback.__name__ == "parse"


def test_a_crawlspiders_rule_requests_are_read_back():
    """CrawlSpider's rules name its own ``_callback``; no other spider's entry may."""

    class Rules(CrawlSpider):
        name = "rules"
        rules = (Rule(LinkExtractor(), callback="parse_item"),)

        def parse_item(self, response):  # pragma: no cover - never called
            return None

    entries = EntryCodec(Rules(), EntryRules())
    member = b'1|{"url":"http://a/x","callback":"_callback","errback":"_errback","meta":{"rule":0}}'
    request = entries.decode(member)
    assert request.callback.__name__ == "_callback" and request.meta == {"rule": 0}
    with pytest.raises(RefusedEntry, match="public methods"):
        codec().decode(b'1|{"url":"http://a/x","callback":"_callback"}')


def test_a_crawl_can_trust_a_meta_key_and_allow_a_scheme():
    member = b'1|{"url":"http://a/x","meta":{"proxy":"http://proxy.corp:3128"}}'
    request = codec(trusted_meta=frozenset({"proxy"})).decode(member)
    assert request.meta["proxy"] == "http://proxy.corp:3128"
    assert codec(schemes=frozenset({"http", "ftp"})).decode(b'1|{"url":"ftp://h/x"}').url == (
        "ftp://h/x"
    )


def test_own_requests_are_queued_without_what_chooses_where_a_worker_connects(caplog):
    entries = codec()
    request = Request(
        "http://a/x",
        meta={
            "proxy": "http://u:p@proxy.corp:3128",
            "_auth_proxy": "http://proxy.corp:3128",
            "download_slot": "a",
            "depth": 2,
        },
        headers={"Proxy-Authorization": "Basic dTpw", "Accept": "text/html"},
    )
    with caplog.at_level(logging.INFO):
        back = entries.decode(b"1|" + entries.encode(request))
        entries.encode(request)  # said once per key
    assert back.meta == {"depth": 2}
    assert b"Proxy-Authorization" not in back.headers and back.headers[b"Accept"] == b"text/html"
    said = [r.getMessage() for r in caplog.records]
    # once, for the proxy (Scrapy's own download_slot and _auth_proxy go quietly)
    assert len(said) == 1 and "'proxy'" in said[0] and "FRONTIER_TRUSTED_META" in said[0]
    trusted = codec(trusted_meta=frozenset({"proxy", "_auth_proxy", "download_slot"}))
    kept = trusted.decode(b"1|" + trusted.encode(request))
    assert kept.meta["proxy"] == "http://u:p@proxy.corp:3128"
    assert kept.headers[b"Proxy-Authorization"] == b"Basic dTpw"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"FRONTIER_TRUSTED_META": ["proxy", "cookiejar"]}, "FRONTIER_TRUSTED_META: cookiejar"),
        ({"FRONTIER_SCHEMES": []}, "FRONTIER_SCHEMES"),
    ],
)
def test_bad_entry_settings_fail_at_start_with_the_setting(values, message):
    with pytest.raises(ValueError, match=message):
        entry_rules(Settings({"FRONTIER_SCHEMES": ["http", "https"], **values}))


class Linked(S):
    def page(self, response):  # pragma: no cover - never called
        return None

    def failed(self, failure):  # pragma: no cover - never called
        return None


_texts = st.text(st.characters(codec="latin-1"), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "method": st.sampled_from(["GET", "POST", "HEAD"]),
            "body": st.binary(max_size=8),
            "cookies": st.dictionaries(st.sampled_from(["c", "d"]), _texts, max_size=2),
            "meta": st.dictionaries(
                st.sampled_from(["depth", "k", "proxy"]), st.integers(0, 3), max_size=3
            ),
            "encoding": st.sampled_from(["utf-8", "latin-1"]),
            "flags": st.lists(st.sampled_from(["x", "y"]), max_size=2),
            "cb_kwargs": st.dictionaries(st.sampled_from(["k"]), st.integers(), max_size=1),
            "dont_filter": st.booleans(),
            "priority": st.integers(-5, 5),
        }
    ),
    st.sampled_from([None, "http://a.example/from", "http://b.example/", "http://a.example"]),
    st.dictionaries(st.sampled_from(["X-A", "Accept"]), _texts, max_size=2),
    st.sampled_from([(None, None), ("page", None), ("page", "failed")]),
)
def test_a_plain_requests_entry_reads_back_as_the_same_request(fields, referer, headers, callbacks):
    """A plain Request's entry (each field read once, only those that differ from the
    constructor's) reads back as the request, but for the meta that chooses where a
    worker connects; a link with nothing of its own is its URL alone."""
    spider = Linked()
    entries = EntryCodec(spider)
    if referer is not None:
        headers["Referer"] = referer
    callback, errback = (getattr(spider, name) if name else None for name in callbacks)
    request = Request(
        "http://a.example/x", headers=headers, callback=callback, errback=errback, **fields
    )
    back = entries.decode(b"7|" + entries.encode(request)).to_dict(spider=spider)
    expected = request.to_dict(spider=spider)
    expected["meta"] = {k: v for k, v in expected["meta"].items() if k != "proxy"}
    assert back == expected
    assert entries.encode(Request("http://a.example/y")) == b'{"url":"http://a.example/y"}'
