"""The raw bytes of one exchange, kept for its WARC records, and where a page finds them.

:mod:`webcrawl.handlers.tee` fills a :class:`Capture` as the bytes pass; the handler
registers it under its Scrapy request; :func:`webcrawl.page.page_from_response` finds it
through ``response.request``.  Plain Python: importing it imports neither Scrapy nor
Twisted.
"""

from __future__ import annotations

import time
import weakref
from typing import Any


class Capture:
    """One exchange's raw bytes: ``sent`` (request line, headers, body), ``received``
    (the response as it arrived), the peer address, and whether the body was cut."""

    __slots__ = (
        "__weakref__",
        "archived",
        "closed",
        "peer",
        "proxy",
        "received",
        "sent",
        "started",
        "truncated",
    )

    def __init__(self) -> None:
        self.sent = bytearray()
        self.received = bytearray()
        self.peer = ""
        self.proxy = False  # sent through a proxy: the peer is the proxy
        self.started = time.time()
        self.truncated = ""  # WARC-Truncated's reason ("length") when the body was cut
        self.closed = False
        self.archived = False  # its records are written (a redirect's, by middlewares/warc.py)

    def close(self) -> None:
        self.closed = True


_captures: weakref.WeakKeyDictionary[Any, Capture] = weakref.WeakKeyDictionary()


def register(request: Any, capture: Capture) -> None:
    """Remember ``capture`` as the exchange of the Scrapy ``request`` (for as long as the
    request lives)."""
    _captures[request] = capture


def capture_of(request: Any) -> Capture | None:
    """The closed capture of the Scrapy ``request``'s download, if it was recorded."""
    if request is None:
        return None
    return _captures.get(request)
