"""Change detection: noise is not a change, a new version is; 304s and failures."""

import random
import time

import pytest
from parsel import Selector

from webcrawl.demo.web import DemoWeb
from webcrawl.extract import visible_text
from webcrawl.incremental.change import (
    NoStoredContent,
    compare,
    holds_content,
    http_time,
    signature_text,
)
from webcrawl.incremental.simhash import distance, simhash
from webcrawl.page import Page

WEB = DemoWeb(["127.0.0.2:1", "127.0.0.3:1", "127.0.0.4:1"], 60, seed=3)
HTML = [p for p in WEB.pages.values() if p.kind == "html"]


def fingerprint(page, version, now, noise):
    body, _ = WEB.render_version(page, version, now, noise)
    return simhash(signature_text(visible_text(Selector(text=body.decode()))))


def test_demo_noise_is_never_a_change_and_a_new_version_nearly_always_is():
    noise = random.Random(1)
    noisy, missed = [], 0
    for page in HTML:
        a = fingerprint(page, 4, 1_800_000_000, noise)
        b = fingerprint(page, 4, 1_800_003_777, noise)  # other timestamp and advert
        c = fingerprint(page, 5, 1_800_003_777, noise)
        noisy.append(distance(a, b))
        missed += distance(a, c) <= 3
    assert max(noisy) <= 3
    assert missed <= len(HTML) // 100  # SimHash can miss a change; measured: 1 in 1 836


def test_timestamps_and_marked_up_adverts_are_not_fingerprinted():
    base = "<html><body><h1>News</h1><p>" + "A long and stable article text. " * 40 + "</p>"
    one = base + "<p>Updated 2026-11-22 08:01:23 UTC, 5 minutes ago</p>"
    one += '<div class="ad-slot">Buy shoes</div>'
    two = base + "<p>Updated Nov 23, 2026 at 5:45 pm, 2 hours ago</p>"
    two += '<aside id="sponsored">Cheap flights now</aside>'
    texts = [signature_text(visible_text(Selector(text=t + "</body></html>"))) for t in (one, two)]
    assert simhash(texts[0]) == simhash(texts[1])
    assert "Buy shoes" not in texts[0] and "Cheap flights" not in texts[1]


def test_signature_text_scans_only_around_digits_with_the_same_result():
    from webcrawl.incremental.change import _VOLATILE

    rng = random.Random(5)
    words = (
        "Updated 2026-11-22 08:01:23 UTC 5 minutes ago Nov 23, 2026 at 5:45 pm "
        "Sunday, 22nd November 2026 release 4.2 22.11.2026 11/22/26 version 3 of 12 "
        "the quick brown fox jumps over the lazy dog Django documentation "
        "Wednesday September 9 at 10 a.m. GMT 2 hours ago 1999 12th Sept. 3 days "
        "ago 1st Jan. Jan. 5th 10:30am 2026/11/22 v1.2.3 8-bit x86-64 1,000 "
        "PostgreSQL 15 int64 page 4 of 9 MAY 31ST, 1 mayonnaise 7 Years"
    ).split()
    texts = ["", "no digits at all", "7", "2026-11-22", "ends with a date 2026-11-22"]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 400))) for _ in range(500)]
    for text in texts:
        assert signature_text(text) == _VOLATILE.sub(" ", text), text


def page(**kw):
    base = dict(
        url="http://h/a",
        final_url="http://h/a",
        status=200,
        fetched_at=1000.0,
        text="hello world " * 50,
        title="T",
    )
    return Page(**{**base, **kw})


def test_first_visit_then_unchanged_then_changed():
    first = page()
    compare(first, None, threshold=3, keep=10)
    assert first.changed is None and first.distance is None
    assert first.visits == [[1000.0, None, None]]
    row = {"key": "k", **first.__dict__}
    again = page(fetched_at=2000.0, last_modified="Sun, 22 Nov 2026 08:00:00 GMT")
    compare(again, row, threshold=3, keep=10)
    assert again.changed is False and again.distance == 0
    assert again.previous_simhash == first.simhash
    assert again.visits[-1] == [2000.0, 0, http_time("Sun, 22 Nov 2026 08:00:00 GMT")]
    row = {"key": "k", **again.__dict__}
    new = page(fetched_at=3000.0, text="an entirely different article about rivers " * 20)
    compare(new, row, threshold=3, keep=2)
    assert new.changed is True and new.distance > 3
    assert len(new.visits) == 2  # keep: the oldest dropped


def test_304_takes_the_stored_content_and_counts_unchanged():
    stored = page(etag='"v1"', content_length=1234, outlinks=["http://h/b"])
    compare(stored, None, 3, 10)
    row = {"key": "k", **stored.__dict__}
    answer = page(
        status=304,
        kind="not_modified",
        text="",
        title="",
        fetched_at=5000.0,
        etag='"v1"',
        content_length=0,
    )
    compare(answer, row, 3, 10)
    assert answer.kind == "html" and answer.status == 304
    assert answer.changed is False and answer.simhash == stored.simhash
    assert answer.text == stored.text and answer.outlinks == ["http://h/b"]
    assert answer.content_length == 1234


def test_a_304_for_a_page_whose_content_is_not_stored_is_refused():
    """A 304 with no row, or with an empty row written for an earlier 304 (and kept
    forever by the stored ETag), or with the row of a fetch that failed before any
    content was stored, must not write an empty html row: fetch it again."""
    answer = page(status=304, kind="not_modified", text="", title="", etag='"v1"')
    blank = {"key": "k", **page(status=304, text="", title="", etag='"v1"').__dict__}
    failed = {"key": "k", **page(status=0, kind="failed", text="", title="").__dict__}
    failed["content_type"] = ""
    for row in (None, {}, blank, failed):
        assert not holds_content(row)
        with pytest.raises(NoStoredContent):
            compare(answer, row, 3, 10)
    assert answer.text == "" and answer.visits == []  # untouched


def test_a_304_after_a_failed_fetch_takes_the_content_the_failure_kept():
    stored = page(etag='"v1"')
    compare(stored, None, 3, 10)
    failed = page(status=0, kind="failed", text="", title="", error="TimeoutError")
    compare(failed, {"key": "k", **stored.__dict__}, 3, 10)
    row = {"key": "k", **failed.__dict__}
    assert holds_content(row)
    answer = page(status=304, kind="not_modified", text="", title="", etag='"v1"')
    compare(answer, row, 3, 10)
    assert answer.kind == "html" and answer.text == stored.text and answer.changed is False


def test_a_failed_fetch_keeps_the_stored_version_and_adds_no_visit():
    stored = page()
    compare(stored, None, 3, 10)
    row = {"key": "k", **stored.__dict__}
    failed = page(status=0, kind="failed", text="", title="", error="TimeoutError")
    compare(failed, row, 3, 10)
    assert failed.text == stored.text and failed.simhash == stored.simhash
    assert failed.visits == stored.visits


def test_non_html_changes_by_what_the_server_says():
    pdf = page(kind="other", text="", etag='"a"', content_length=10)
    compare(pdf, None, 3, 10)
    row = {"key": "k", **pdf.__dict__}
    same = page(kind="other", text="", etag='"a"', content_length=10)
    compare(same, row, 3, 10)
    assert same.changed is False
    other = page(kind="other", text="", etag='"b"', content_length=10)
    compare(other, row, 3, 10)
    assert other.changed is True


def test_http_time():
    assert http_time("Sun, 22 Nov 2026 08:00:00 GMT") == 1795334400.0
    assert http_time("yesterday") is None and http_time(None) is None
    now = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())
    assert abs(http_time(now) - time.time()) < 2
