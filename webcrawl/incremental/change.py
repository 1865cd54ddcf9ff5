"""Did a page really change?  SimHash of its visible text against the stored version.

Pure: :func:`compare` takes the new fetch and the stored row and fills in
the fetch's change fields; the pipeline (``webcrawl.pipelines.change``) reads the
row and calls it.  Rules:

- HTML: the SimHash of the visible text (no script, style, markup or
  marked-up adverts: :func:`webcrawl.extract.visible_text`) with dates,
  times and "5 minutes ago"s taken out (:func:`signature_text`); a change is
  a Hamming distance above the threshold (``SIMHASH_CHANGE_DISTANCE``, 3).
  Why both: on real documentation pages (median 3 000 characters of text)
  a new timestamp alone moved the SimHash by more than 3 bits on 5 % of the
  pages and a new one-line advert on 19 %;
- other content (PDF, JSON...), which has no text here: a change is a new
  ETag, Last-Modified or length;
- a 304 (Not Modified) is unchanged and takes the stored content, when we
  hold that content (:func:`holds_content`); a 304 for a page we hold no
  content for (no row, a row of a failed fetch, a row emptied by an earlier
  bug) is no observation: :func:`compare` refuses it, and the page must be
  fetched again without conditional headers.  A row that could not be *read*
  is not a missing row: the caller must not call :func:`compare` at all;
- a fetch that failed is no observation: the stored content, fingerprint
  and history stay as they were.

The stored history gains one visit per fetch, the oldest dropped past
``keep`` entries.
"""

from __future__ import annotations

import email.utils
import re
from typing import Any

from webcrawl.incremental.simhash import distance, simhash
from webcrawl.page import Page

# what a 304 or a failed fetch takes from the stored row
_CONTENT = (
    "final_url",
    "content_type",
    "title",
    "text",
    "outlinks",
    "content_length",
    "etag",
    "last_modified",
    "redirects",
    "content",
)


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DAY = r"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?"
_VOLATILE = re.compile(
    "|".join(
        [
            r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?",  # ISO
            r"\b\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\b",  # 22.11.2026, 11/22/26
            r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?(?:\s*(?:utc|gmt|[a-z]{2,4}t))?\b",
            rf"\b(?:{_DAY}\s*)?\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s*\d{{4}})?\b",
            rf"\b(?:{_DAY}\s*)?{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s*\d{{4}})?\b",
            r"\b\d+\s+(?:second|minute|hour|day|week|month|year)s?\s+ago\b",
        ]
    ),
    re.IGNORECASE,
)


_DIGITS = re.compile(r"\d+")
_REACH = 64  # how far a date or time extends beyond its first or last digit, at most


def signature_text(text: str) -> str:
    """``text`` without the dates and times pages print about themselves (what we fingerprint).

    Every date or time has a digit, so the pattern only runs in windows of
    whole words around the digits: 4 times faster on documentation pages,
    same result (``_VOLATILE.sub(" ", text)``) for text whose whitespace is
    collapsed, as visible text is.
    """
    out, done = [], 0
    for lo, hi in _windows(text):
        out.append(text[done:lo])
        pos = lo
        for m in _VOLATILE.finditer(text, lo, hi):
            out += (text[pos : m.start()], " ")
            pos = m.end()
        out.append(text[pos:hi])
        done = hi
    out.append(text[done:])
    return "".join(out)


def _windows(text: str) -> list[tuple[int, int]]:
    """Disjoint spans, on word boundaries, covering ``_REACH`` characters around each digit."""
    raw: list[list[int]] = []
    for m in _DIGITS.finditer(text):
        lo, hi = m.start() - _REACH, m.end() + _REACH
        if raw and lo <= raw[-1][1]:
            raw[-1][1] = hi
        else:
            raw.append([lo, hi])
    n, spans = len(text), []
    for raw_lo, raw_hi in raw:
        lo, hi = max(raw_lo, 0), min(raw_hi, n)
        while lo > 0 and not text[lo - 1].isspace():
            lo -= 1
        while hi < n and not text[hi].isspace():
            hi += 1
        if spans and lo <= spans[-1][1]:
            spans[-1] = (spans[-1][0], hi)
        else:
            spans.append((lo, hi))
    return spans


def http_time(value: str | None) -> float | None:
    """Unix time of an HTTP date, or None when absent or unparseable."""
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def content_kind(row: dict[str, Any]) -> str:
    """The kind ("html" or "other") of the content a stored row holds."""
    kind = row.get("kind")
    if kind in ("html", "other"):
        return kind
    return "html" if row.get("simhash") else "other"  # a failed fetch's row keeps its content


def holds_content(row: dict[str, Any] | None) -> bool:
    """Whether a stored row holds the content a 304 confirms (title, text, fingerprint).

    Not: no row; the row of a fetch that failed before any content was stored;
    an HTML row of a successful (or 304) fetch without a fingerprint, which
    is what an empty row written for a 304 looks like.
    """
    if not row:
        return False
    if row.get("kind") == "failed":
        return bool(
            row.get("simhash")
            or row.get("content_type")
            or row.get("etag")
            or row.get("last_modified")
        )
    status = row.get("status") or 0
    if row.get("kind") == "html" and (200 <= status < 300 or status == 304):
        return bool(row.get("simhash"))
    return True


class NoStoredContent(ValueError):
    """A 304 for a page whose content is not stored: fetch it again, unconditionally."""


def compare(page: Page, previous: dict[str, Any] | None, threshold: int, keep: int) -> None:
    """Fill ``page``'s change fields from ``previous`` (its stored row, or None).

    Raises :class:`NoStoredContent` for a 304 when ``previous`` holds no content.
    """
    if page.kind == "not_modified" and not holds_content(previous):
        raise NoStoredContent(f"{page.url} answered 304 but its content is not stored")
    previous = previous or {}
    history = list(previous.get("visits") or [])
    old = previous.get("simhash")
    page.previous_simhash = old
    # the last WARC capture (kept when this fetch writes none) and the last full one,
    # that this fetch's revisit record would refer to
    page.warc = previous.get("warc")
    page.warc_original = previous.get("warc_original")
    if page.kind == "failed":
        if previous:  # keep what we had; this fetch tells nothing about change
            for name in (
                *_CONTENT,
                "simhash",
                "previous_simhash",
                "distance",
                "changed",
                "revisit_interval",
                "next_visit",
                "revisit_method",
            ):
                if name in previous:
                    setattr(page, name, previous[name])
            page.previous_simhash = previous.get("previous_simhash")
        page.visits = history
        return
    if page.kind == "not_modified":
        for name in _CONTENT:
            if name in previous and (
                name not in ("etag", "last_modified") or not getattr(page, name)
            ):
                setattr(page, name, previous[name])
        page.kind = content_kind(previous)
        page.simhash = old
        page.distance = 0 if old else None
        page.changed = False
    elif page.kind == "html" and 200 <= page.status < 300:
        page.simhash = f"{simhash(signature_text(page.text)):016x}"
        if old:
            page.distance = distance(int(old, 16), int(page.simhash, 16))
            page.changed = page.distance > threshold
    else:  # not HTML, or an error page: compare what the server says about it
        marks = (page.status, page.etag, page.last_modified, page.content_length)
        before = (
            previous.get("status"),
            previous.get("etag"),
            previous.get("last_modified"),
            previous.get("content_length"),
        )
        if previous:
            page.changed = marks != before
    history.append(
        [
            round(page.fetched_at, 3),
            None if page.changed is None else int(page.changed),
            http_time(page.last_modified),
        ]
    )
    page.visits = history[-keep:]
