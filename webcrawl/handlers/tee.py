"""The bytes on the wire of each exchange, for WARC records (:mod:`webcrawl.warc`).

Scrapy hands spiders a decompressed body and normalised headers; an archive needs the
request as sent and the response as received (status line, headers in their order and
case, the body before any transfer or content decoding).  The download handler's
connection pool builds :class:`TeeingProtocol` connections: each keeps a copy of what it
writes and reads for the one request it carries at a time, into a :class:`Capture`.

How a capture meets its request: :class:`~webcrawl.handlers.http.GuardedHTTPDownloadHandler`
hands the pool the request's capture just before Scrapy's agent asks the pool for a
connection, in the same synchronous step (Scrapy builds the agent and asks for the
connection before its first ``await``), so no header, URL match or context variable is
needed.  The connection records from its next ``request()`` until the handler closes the
capture; a keep-alive connection then goes back to the pool untouched (Twisted does not
pipeline, so no later exchange's bytes can land in it).  The handler registers the closed
capture under the Scrapy request (:func:`capture_of`), where the spider's page finds it.

Private Twisted and Scrapy names used here (``_LenientHTTP11ClientProtocol`` and its
factory, ``request()`` writing through ``self.transport``, the pool's retrying wrapper of
a kept-alive connection):
``tests/test_warc_crawl.py`` fails if one changes.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from scrapy.core.downloader.handlers.http11 import (
    _LenientHTTP11ClientFactory,
    _LenientHTTP11ClientProtocol,
)

from webcrawl.warc.capture import Capture


class _TeeTransport:
    """A transport that copies what is written through it into a buffer."""

    def __init__(self, transport: Any, sink: bytearray) -> None:
        self._transport, self._sink = transport, sink

    def write(self, data: bytes) -> None:
        self._sink += data
        self._transport.write(data)

    def writeSequence(self, data: Any) -> None:
        for chunk in data:
            self.write(chunk)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class TeeingProtocol(_LenientHTTP11ClientProtocol):
    """Scrapy's lenient HTTP/1.1 client protocol, recording the exchange of each request
    that was given a capture (``pending``) when the pool handed the connection out."""

    pending: Capture | None = None
    # weak: an idle connection in the pool must not keep its last exchange's bytes alive
    _capture: weakref.ref[Capture] | None = None

    def request(self, request: Any) -> Any:
        capture, self.pending = self.pending, None
        self._capture = None if capture is None else weakref.ref(capture)
        if capture is not None:
            with contextlib.suppress(AttributeError):
                capture.peer = str(self.transport.getPeer().host)
            # the request is written through a tee: Twisted writes it (and hands the
            # parser its transport) within request(), and a body producer keeps what it
            # was given.  Swapped back at once, the connection itself stays untouched.
            # (Not by patching the request's writeTo: a request holding a closure over its
            # own method is a reference cycle a page, for the garbage collector to find.)
            real = self.transport
            self.transport = _TeeTransport(real, capture.sent)
            try:
                return super().request(request)
            finally:
                self.transport = real
        return super().request(request)

    def dataReceived(self, data: bytes) -> None:
        capture = self._capture() if self._capture is not None else None
        if capture is not None and not capture.closed:
            capture.received += data
        super().dataReceived(data)


def hand_capture(protocol: Any, capture: Capture) -> Any:
    """Give the connection the pool hands out for one request that request's capture.

    A kept-alive connection comes wrapped in Twisted's ``_RetryingHTTP11ClientProtocol``,
    which sends the request again on a new connection (``_newConnection``) if the old one
    turns out closed: the capture follows it there, emptied of the failed attempt."""
    inner = getattr(protocol, "_clientProtocol", protocol)
    if isinstance(inner, TeeingProtocol):
        inner.pending = capture
    fresh = getattr(protocol, "_newConnection", None)
    if fresh is not None:

        def again() -> Any:
            capture.sent.clear()
            capture.received.clear()
            return fresh().addCallback(hand_capture, capture)

        protocol._newConnection = again
    return protocol


class TeeingFactory(_LenientHTTP11ClientFactory):
    """Builds :class:`TeeingProtocol` connections (the pool's ``_factory``)."""

    def buildProtocol(self, addr: Any) -> TeeingProtocol:
        return TeeingProtocol(self._quiescentCallback)
