"""The item the ``web`` spider yields for every fetched page, and its store row.

A project's own spider stores its pages the same way: ``yield page_from_response(response)``
(with the add-on on, the change, revisit and store pipelines take it from there).
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter

from webcrawl import extract
from webcrawl.links import page_links
from webcrawl.urls.urlkey import url_to_key
from webcrawl.warc.capture import Capture, capture_of

if TYPE_CHECKING:
    from scrapy.http import Response

_HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass
class Page:
    """One fetch of one URL.  itemadapter-compatible (a dataclass).

    ``url`` is the URL as scheduled (the first of a redirect chain),
    ``final_url`` where the content came from.  ``fetched_at`` is Unix time
    (s).  ``content_length`` is the Content-Length header when the server
    sent one, else the body's size in bytes.  Non-HTML pages (``kind`` other
    than "html") have no title, text or outlinks: they are recorded, not parsed.
    A URL that could not be fetched at all (DNS, connection, timeout, after its
    retries) is recorded with ``kind`` "failed", ``status`` 0 and ``error``.
    A 304 answer to a revisit has ``kind`` "not_modified" (the change pipeline
    fills in the stored content).

    Change detection (``webcrawl.pipelines.change``) and revisits (``webcrawl.pipelines.revisit``)
    add: ``simhash`` (16 hex digits) and ``previous_simhash``, ``distance``
    between them, ``changed`` (None on a first visit), ``visits`` (the history
    the revisit policy reads: ``[fetched_at, 1|0|None, last_modified|None]``),
    ``revisit_interval``, ``next_visit`` and ``revisit_method``.

    With ``WARC_ENABLED`` the WARC pipeline adds ``warc`` (where this fetch's response or
    revisit record is) and ``warc_original`` (the last full capture, that revisits refer
    to); the exchange's raw bytes ride along outside the fields (:func:`wire_of`), so
    that no row or feed holds them.

    A page a sitemap asked for has ``sitemap`` (the entry's ``lastmod``, ``changefreq``,
    ``priority``, and ``claim`` when the fetch tests a claimed change:
    :mod:`webcrawl.sitemaps.trust`).

    With ``STORE_CONTENT`` the response body is kept too, as
    ``content`` (base64, so that feed exports and SQLite's JSON rows hold it;
    HBase stores the raw bytes, in Nutch's ``f:cnt``).
    """

    url: str
    final_url: str
    status: int
    fetched_at: float
    depth: int = 0
    kind: str = "html"
    content_type: str = ""
    title: str = ""
    text: str = ""
    outlinks: list[str] = field(default_factory=list)
    etag: str | None = None
    last_modified: str | None = None
    content_length: int | None = None
    redirects: list[str] = field(default_factory=list)  # URLs that redirected here, in order
    error: str = ""  # kind "failed": why (after RETRY_TIMES retries)
    simhash: str | None = None
    previous_simhash: str | None = None
    distance: int | None = None
    changed: bool | None = None
    visits: list[list] = field(default_factory=list)
    revisit_interval: float | None = None
    next_visit: float | None = None
    revisit_method: str = ""
    content: str | None = None  # the raw body in base64, with STORE_CONTENT
    warc: dict[str, Any] | None = None  # with WARC_ENABLED: file, offset, length, type, date
    warc_original: dict[str, Any] | None = None  # last full capture: target, date, digest
    # what a sitemap said when it asked for this fetch: lastmod (Unix time), changefreq,
    # priority; claim: True when the fetch tests its lastmod's claim of a change;
    # trusted: its host was trusted then
    sitemap: dict[str, Any] | None = None


def page_from_response(
    response: Response, *, keep_content: bool = False, deny_extensions: tuple[str, ...] = ()
) -> Page:
    """The :class:`Page` of a response: its headers, and for a 2xx HTML page its title,
    visible text and links (``outlinks``, canonical, minus ``deny_extensions`` such as
    ``".png"``).  A 304 is a ``not_modified`` page; ``keep_content`` keeps the body."""
    from scrapy.http import TextResponse
    from scrapy.utils.response import get_base_url

    redirects = [str(u) for u in response.meta.get("redirect_urls", [])]
    content_type = (_header(response, "Content-Type") or "").split(";")[0].strip().lower()
    length = _header(response, "Content-Length")
    page = Page(
        url=redirects[0] if redirects else response.url,
        final_url=response.url,
        status=response.status,
        fetched_at=time.time(),
        depth=int(response.meta.get("depth", 0)),
        kind="html",
        content_type=content_type,
        etag=_header(response, "ETag"),
        last_modified=_header(response, "Last-Modified"),
        content_length=int(length) if length and length.isdigit() else len(response.body),
        redirects=redirects,
    )
    attach_wire(page, capture_of(getattr(response, "request", None)))
    page.sitemap = sitemap_of(response.meta)
    if response.status == 304:  # a revisit's stored version is current: no parse
        page.kind = "not_modified"
        return page
    if keep_content:
        page.content = base64.b64encode(response.body).decode("ascii")
    is_html = isinstance(response, TextResponse) and (
        content_type in _HTML_TYPES or (not content_type and b"<html" in response.body[:1024])
    )
    if not is_html or not 200 <= response.status < 300:
        page.kind = "html" if is_html else "other"
        return page
    page.title = extract.title(response.selector)
    page.text = extract.visible_text(response.selector)
    page.outlinks = list(
        page_links(
            response.selector.root,
            response.url,
            get_base_url(response),
            response.encoding,
            deny_extensions=deny_extensions,
        )
    )
    return page


def attach_wire(page: Page, capture: Capture | None) -> None:
    """Give ``page`` the raw exchange it came from (for its WARC records)."""
    if capture is not None:
        page.__dict__["_wire"] = capture


_SITEMAP_META = (
    ("sitemap_lastmod", "lastmod"),
    ("sitemap_changefreq", "changefreq"),
    ("sitemap_priority", "priority"),
    ("sitemap_claim", "claim"),
    ("sitemap_trusted", "trusted"),
)


def sitemap_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """What a sitemap said of a request (its ``sitemap_*`` meta), or None."""
    said = {name: meta[key] for key, name in _SITEMAP_META if meta.get(key) is not None}
    return said or None


# the fields of a row that page_of_row reads (Store.get_fields: not the page's text)
REVISIT_FIELDS = (
    "final_url",
    "status",
    "fetched_at",
    "depth",
    "etag",
    "last_modified",
    "content_length",
)


def page_of_row(row: dict[str, Any], url: str) -> Page:
    """The page a store row recorded (what a revisit request needs of it; a field of
    the wrong type is taken as missing)."""

    def text(name: str) -> str | None:
        value = row.get(name)
        return value if isinstance(value, str) else None

    def number(name: str, kind: type) -> Any:
        value = row.get(name)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return kind(value) if ok else kind(0)

    length = row.get("content_length")
    return Page(
        url=url,
        final_url=text("final_url") or url,
        status=number("status", int),
        fetched_at=number("fetched_at", float),
        depth=number("depth", int),
        etag=text("etag"),
        last_modified=text("last_modified"),
        content_length=length if isinstance(length, int) else None,
    )


def wire_of(page: Any) -> Capture | None:
    """The raw exchange a page came from, if the download handler recorded it."""
    return getattr(page, "__dict__", {}).get("_wire")


def _header(response: Response, name: str) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value is not None else None


def store_row(item: Any) -> dict[str, Any]:
    """The webtable row for an item (a :class:`Page` or any mapping with ``url``)."""
    data = ItemAdapter(item).asdict()
    return {"key": url_to_key(data["url"]), **data}
