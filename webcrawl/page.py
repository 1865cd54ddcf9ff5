"""The item the ``web`` spider yields for every fetched page, and its store row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from itemadapter import ItemAdapter

from webcrawl.urls.urlkey import url_to_key


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

    Change detection (``pipelines.change``) and revisits (``pipelines.revisit``)
    add: ``simhash`` (16 hex digits) and ``previous_simhash``, ``distance``
    between them, ``changed`` (None on a first visit), ``visits`` (the history
    the revisit policy reads: ``[fetched_at, 1|0|None, last_modified|None]``),
    ``revisit_interval``, ``next_visit`` and ``revisit_method``.

    With ``WEBCRAWL_STORE_CONTENT`` the response body is kept too, as
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
    content: str | None = None  # the raw body in base64, with WEBCRAWL_STORE_CONTENT


def store_row(item: Any) -> dict[str, Any]:
    """The webtable row for an item (a :class:`Page` or any mapping with ``url``)."""
    data = ItemAdapter(item).asdict()
    return {"key": url_to_key(data["url"]), **data}
