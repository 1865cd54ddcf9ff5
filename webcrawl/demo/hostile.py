"""Hostile answers for the demo web's faults (``webcrawl serve-demo --fault``).

Each is what a server on the web can do to a crawler; each must end in a clean
record (or, for robots.txt, in RFC 9309's reading of it):

- ``bomb``: a gzip body that expands to ARG GiB (default 1; 10 is ~10 MB on the
  wire), as concatenated gzip members of 64 MiB of zeros each.
- ``huge``: a 200 of ARG MiB (default 1; 100 for the RFC 9309 case), streamed; at
  ``/robots.txt`` a file whose first line disallows ``/private/``, then comments.
- ``trickle``: a 200 whose body comes one byte every ARG seconds, never ending.
- ``headers``: ARG MiB (default 1) of response headers, in 4 KiB lines.
- ``charset``: ``text/html; charset=x-no-such-charset`` and Latin-1 bytes.
- ``binary``: random bytes labelled ``text/html``.
- ``htmlerror``: a 200 whose body is an HTML error page (e.g. for robots.txt).
- ``loop``: a redirect loop, ``P -> P?loop -> P``.
- ``liar``: a 200 whose ``Content-Length`` claims 1000 bytes more than are sent.
- ``trap``: a crawl trap: every answer links to the next day of a calendar
  (``?day=N+1``, without end), to itself with a new session id (``;jsessionid=``
  and ``?PHPSESSID=``, new in every answer) and one path level deeper with the
  same segments again (``x/y/`` relative: ``.../x/y/x/y/...``).
- ``ssrf``: a redirect to ``http://127.0.0.1:<port>/admin`` (loopback, not a seed's
  address: the address policy must refuse it).
"""

from __future__ import annotations

import functools
import gzip
import random
from typing import Any

KINDS = (
    "bomb",
    "huge",
    "trickle",
    "headers",
    "charset",
    "binary",
    "htmlerror",
    "loop",
    "liar",
    "trap",
    "ssrf",
)
_MEMBER_BYTES = 64 << 20
_CHUNK = 64 << 10


@functools.lru_cache(maxsize=1)
def _bomb_member() -> bytes:
    return gzip.compress(b"\0" * _MEMBER_BYTES, compresslevel=9)  # ~64 KB, 0.4 s once


def bomb_body(gib: float) -> bytes:
    """A gzip body (concatenated members) that expands to ``gib`` GiB of zeros."""
    return _bomb_member() * max(1, round(gib * (1 << 30) / _MEMBER_BYTES))


class _Stream:
    """Writes ``total`` bytes of ``chunk()`` to a request as the client reads them."""

    def __init__(self, request: Any, total: int, chunk: Any) -> None:
        self.request, self.left, self.chunk = request, total, chunk
        request.registerProducer(self, False)
        request.notifyFinish().addErrback(lambda _: self.stopProducing())

    def resumeProducing(self) -> None:
        if self.left <= 0 or self.request._disconnected:
            self.request.unregisterProducer()
            if not self.request._disconnected:
                self.request.finish()
            return
        data = self.chunk()[: self.left]
        self.left -= len(data)
        self.request.write(data)

    def stopProducing(self) -> None:
        self.left = 0


def answer(request: Any, kind: str, arg: float, path: str) -> Any:  # noqa: PLR0911
    """Answer ``request`` the hostile way ``kind``; bytes or NOT_DONE_YET."""
    from twisted.web.server import NOT_DONE_YET  # late, like the reactor below

    robots = path == "/robots.txt"
    if kind == "bomb":
        body = bomb_body(arg)
        request.setHeader("Content-Type", "text/plain" if robots else "text/html")
        request.setHeader("Content-Encoding", "gzip")
        request.setHeader("Content-Length", str(len(body)))
        return body
    if kind == "huge":
        total = int(arg * (1 << 20))
        request.setHeader("Content-Type", "text/plain" if robots else "text/html")
        request.setHeader("Content-Length", str(total))
        head = b"User-agent: *\nDisallow: /private/\n" if robots else b"<html><body>"
        filler = (b"# " + b"x" * 61 + b"\n") * (_CHUNK // 64)
        first = [head + filler[len(head) :]]
        _Stream(request, total, lambda: first.pop() if first else filler)
        return NOT_DONE_YET
    if kind == "trickle":
        _trickle(request, arg)
        return NOT_DONE_YET
    if kind == "headers":
        line = "v" * 4000
        for i in range(max(1, int(arg * (1 << 20) / 4000))):
            request.setHeader(f"X-Filler-{i}", line)
        request.setHeader("Content-Type", "text/html")
        return b"<html><body><p>Headers of a megabyte.</p></body></html>"
    if kind == "charset":
        request.setHeader("Content-Type", "text/html; charset=x-no-such-charset")
        return (
            "<html><head><title>Caf\xe9 cr\xe8me</title></head><body><p>na\xefve "
            "\xe0 la carte</p><a href='/'>home</a></body></html>"
        ).encode("latin-1")
    if kind == "binary":
        request.setHeader("Content-Type", "text/html")
        return random.Random(path).randbytes(20_000)
    if kind == "htmlerror":
        request.setHeader("Content-Type", "text/html")
        return (
            b"<!DOCTYPE html><html><head><title>Error</title></head><body><h1>Internal "
            b"error</h1><p>Disallow: this is prose, not a rule</p></body></html>"
        )
    if kind == "loop":
        uri = request.uri.decode("latin-1")
        target = uri[: -len("?loop")] if uri.endswith("?loop") else uri + "?loop"
        request.setResponseCode(302)
        request.setHeader("Location", target)
        return b""
    if kind == "liar":
        _liar(request)
        return NOT_DONE_YET
    if kind == "trap":
        return _trap(request)
    if kind == "ssrf":
        request.setResponseCode(302)
        request.setHeader("Location", f"http://127.0.0.1:{request.getHost().port}/admin")
        return b""
    raise ValueError(f"unknown hostile kind {kind!r}")


def _trickle(request: Any, every: float) -> None:
    """Send the headers and one byte, then one more byte every ``every`` seconds."""
    from twisted.internet import reactor  # late: importing it installs the default reactor

    request.setHeader("Content-Type", "text/html")
    request.write(b"<")

    def drip() -> None:
        if not request._disconnected and not request.finished:
            request.write(b"x")
            reactor.callLater(every, drip)

    reactor.callLater(every, drip)


def _liar(request: Any) -> None:
    """Promise 1000 bytes more than are sent, then close the connection."""
    from twisted.internet import reactor

    body = b"<html><body><p>Shorter than it says.</p></body></html>"
    request.setHeader("Content-Type", "text/html")
    request.setHeader("Content-Length", str(len(body) + 1000))
    request.write(body)
    reactor.callLater(0.05, request.channel.transport.loseConnection)


def _trap(request: Any) -> bytes:
    uri = request.uri.decode("latin-1")
    path, _, query = uri.partition("?")
    path = path.split(";")[0]
    day = 0
    for part in query.split("&"):
        if part.startswith("day="):
            day = int(part[4:]) if part[4:].isdigit() else 0
    session = random.getrandbits(64)
    leaf = path.rsplit("/", 1)[-1]  # relative links stay under the page's own path
    links = [
        f"{leaf}?day={day + 1}",
        f"{leaf};jsessionid={session:x}",
        f"{leaf}?PHPSESSID={session:x}",
        f"{leaf}/x/y/" if leaf else "x/y/",
    ]
    request.setHeader("Content-Type", "text/html")
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return (
        f"<html><head><title>Day {day}</title></head><body><p>{anchors}</p></body></html>"
    ).encode()
