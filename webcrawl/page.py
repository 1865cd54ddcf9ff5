"""The item the ``web`` spider yields for every fetched page, and its store row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from itemadapter import ItemAdapter

from webcrawl.urlkey import url_to_key


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
    error: str = ""  # kind "failed": why (after FRONTIER_RETRY_TIMES retries)


def store_row(item: Any) -> dict[str, Any]:
    """The webtable row for an item (a :class:`Page` or any mapping with ``url``)."""
    data = ItemAdapter(item).asdict()
    return {"key": url_to_key(data["url"]), **data}
