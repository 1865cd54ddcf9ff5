"""Scrapy's HTTP/1.1 download handler, with the address policy at each new connection
and each host's politeness turn taken as the request leaves (:mod:`webcrawl.handlers.politeness`).

Every request a worker sends (pages, redirects, robots.txt, re-probes, revisits,
HEAD pre-checks) goes through the download handler of its scheme, so this is where
the policy of :mod:`webcrawl.safety.addresses` is enforced, twice per new connection:

1. on the addresses the host name resolves to, as the connection's endpoint receives
   them: refused ones are dropped, so no connection is even attempted to them (a
   name with an allowed and a refused address connects to the allowed one);
2. on the address the TCP connection actually reached, when it is established and
   before a byte (TLS handshake included) is written: the ground truth, whatever
   resolved it.

A request whose every address is refused fails with
:class:`~webcrawl.safety.addresses.BlockedAddress`.  Connections are pooled per host
only after they were allowed.

How: Scrapy 2.19 keeps its connection pool in ``HTTP11DownloadHandler._pool``;
Twisted's ``HTTPConnectionPool`` opens connections in ``_newConnection(key,
endpoint)``, and its ``HostnameEndpoint`` gets its resolver from
``_getNameResolverAndMaybeWarn``.  We replace the pool with one whose
``_newConnection`` filters the endpoint's resolver and wraps the protocol factory.
All three are private names (no public hook exists): ``tests/test_addresses_crawl.py``
fails if one changes.

Through a proxy (``meta['proxy']``) a worker connects only to the proxy, which resolves
the target itself: the proxy's own address is checked like any other (a proxy the
environment names, ``http_proxy`` and the like, is the operator's: allowed).  Queue
entries cannot carry a proxy (:mod:`webcrawl.frontier.entry`); a request that records a
refused entry is failed here too, should its middleware be disabled.

Refusals are counted (``security/blocked_address``) and logged once per host; the
request's errback records the page as failed with the reason.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler
from scrapy.exceptions import DownloadCancelledError, DownloadTimeoutError
from scrapy.http import Response
from twisted.internet.defer import fail
from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.interfaces import IHostnameResolver, IResolutionReceiver
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from twisted.web.client import HTTPConnectionPool
from zope.interface import implementer

from webcrawl.frontier.entry import REFUSED_META, RefusedQueueEntry
from webcrawl.handlers.politeness import HostTurns
from webcrawl.handlers.tee import TeeingFactory, hand_capture
from webcrawl.safety.addresses import AddressPolicy, BlockedAddress
from webcrawl.safety.policy import address_policy
from webcrawl.warc.capture import Capture, register
from webcrawl.warc.records import header_end

logger = logging.getLogger(__name__)


class _GuardFactory(Factory):
    """Wraps a pool's protocol factory: the connection's peer address is checked
    before the protocol exists (so before anything is sent)."""

    def __init__(self, wrapped: Any, policy: AddressPolicy, target: Target) -> None:
        self.wrapped, self.policy, self.target = wrapped, policy, target
        self.host, self.port = target.host, target.port

    def buildProtocol(self, addr: Any) -> Protocol | None:
        why = self.target.check(self.policy, str(getattr(addr, "host", "")))
        if why is not None:
            raise BlockedAddress(f"{self.host}:{self.port}: {why}")
        return self.wrapped.buildProtocol(addr)

    def __getattr__(self, name: str) -> Any:  # doStart, doStop, clientConnectionFailed...
        return getattr(self.wrapped, name)


@implementer(IHostnameResolver)
class _FilteringResolver:
    """A host name resolver that passes on only the addresses the policy allows, and
    remembers why it refused the others."""

    def __init__(self, resolver: Any, policy: AddressPolicy, target: Target) -> None:
        self.resolver, self.policy, self.target = resolver, policy, target
        self.allowed = 0
        self.refused: list[str] = []

    def resolveHostName(self, receiver: Any, hostName: str, *args: Any, **kwargs: Any) -> Any:
        outer = self

        @implementer(IResolutionReceiver)
        class Filter:
            def resolutionBegan(self, resolution: Any) -> None:
                receiver.resolutionBegan(resolution)

            def addressResolved(self, address: Any) -> None:
                why = outer.target.check(outer.policy, str(address.host))
                if why is None:
                    outer.allowed += 1
                    receiver.addressResolved(address)
                else:
                    outer.refused.append(why)

            def resolutionComplete(self) -> None:
                receiver.resolutionComplete()

        return self.resolver.resolveHostName(Filter(), hostName, *args, **kwargs)


def _hostname_endpoint(endpoint: Any) -> HostnameEndpoint | None:
    """The HostnameEndpoint of an Agent's endpoint (https: inside its TLS wrapper)."""
    for candidate in (endpoint, getattr(endpoint, "_wrappedEndpoint", None)):
        if isinstance(candidate, HostnameEndpoint):
            return candidate
    return None


class GuardedConnectionPool(HTTPConnectionPool):
    """An HTTPConnectionPool whose new connections pass the address policy."""

    def __init__(self, reactor: Any, policy: AddressPolicy, persistent: bool = True) -> None:
        super().__init__(reactor, persistent=persistent)
        self.policy = policy
        self.next_capture: Capture | None = None  # for the next getConnection (tee.py)

    def getConnection(self, key: Any, endpoint: Any) -> Any:
        capture, self.next_capture = self.next_capture, None
        d = super().getConnection(key, endpoint)
        if capture is not None:
            d.addCallback(hand_capture, capture)
        return d

    def _newConnection(self, key: Any, endpoint: Any) -> Any:
        target = connection_target(key)
        if target is None:  # a kind of connection this module does not know: refused
            return fail(BlockedAddress(f"unknown connection {key[:1]!r}: not checked, refused"))
        host, port = target.host, target.port
        pool = self

        def quiescent(protocol: Any) -> None:
            pool._putConnection(key, protocol)

        resolving = _hostname_endpoint(endpoint)
        resolver = None
        if resolving is not None:
            own = resolving._getNameResolverAndMaybeWarn(resolving._reactor)
            resolver = _FilteringResolver(own, self.policy, target)
            resolving._getNameResolverAndMaybeWarn = lambda reactor: resolver
        factory = _GuardFactory(self._factory(quiescent, repr(endpoint)), self.policy, target)

        def refused(failure: Failure) -> Failure:
            if resolver is not None and resolver.refused and not resolver.allowed:
                raise BlockedAddress(f"{host}:{port}: {resolver.refused[0]}")
            return failure

        return endpoint.connect(factory).addErrback(refused)


class Target(NamedTuple):
    """Where a pool connection goes: ``host:port``, a proxy's (``proxy``) or not."""

    host: str
    port: int
    proxy: bool

    def check(self, policy: AddressPolicy, address: str) -> str | None:
        return policy.check(address, self.host, self.port, proxy=self.proxy)


def connection_target(key: Any) -> Target | None:
    """Where a pool connection of ``key`` connects to, or None for a key of another
    form.  Keys: ``(scheme, host, port, bind address)`` direct (Agent's, plus Scrapy's
    bind address); ``(b"http-proxy", proxy host, proxy port, bind address)`` through an
    http proxy; ``(scheme, host, port, bind address, proxy host, proxy port, proxy
    auth)`` through an https tunnel (the connection goes to the proxy)."""
    if not isinstance(key, tuple) or len(key) not in (4, 7):
        return None
    if key[0] == b"http-proxy" and len(key) == 4:
        host, port, proxy = key[1], key[2], True
    elif key[0] in (b"http", b"https"):
        host, port = (key[1], key[2]) if len(key) == 4 else (key[4], key[5])
        proxy = len(key) == 7
    else:
        return None
    host = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    return Target(host, int(port), proxy)


class GuardedHTTPDownloadHandler(HTTP11DownloadHandler):
    """``DOWNLOAD_HANDLERS`` for http and https: Scrapy's, with the address policy."""

    lazy = False  # made at start: a bad ADDRESSES_ALLOWED_NETWORKS fails there

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        from twisted.internet import reactor

        self.policy = address_policy(crawler)
        pool = GuardedConnectionPool(reactor, self.policy)
        pool.maxPersistentPerHost = self._pool.maxPersistentPerHost
        pool._factory = self._pool._factory
        self.warc = crawler.settings.getbool("WARC_ENABLED")
        if self.warc:  # each exchange's bytes are kept for its WARC records
            pool._factory = TeeingFactory
        self._pool = pool
        self._stats = crawler.stats
        self._logged: set[str] = set()
        self.turns = HostTurns(crawler)

    async def download_request(self, request: Request) -> Response:
        reason = request.meta.get(REFUSED_META)
        if reason is not None:
            raise RefusedQueueEntry(f"queue entry refused: {reason}")
        frontier = self.turns.paced(request)
        holder = None
        if frontier is not None:  # last, after any wait in Scrapy's download slot
            holder = await self.turns.take(frontier, request)
        capture = Capture() if self.warc else None
        if capture is not None:
            capture.proxy = bool(request.meta.get("proxy"))
        # Scrapy's agent asks the pool for a connection before its first await: this
        # capture goes to that connection, and to no other request's (tee.py)
        self._pool.next_capture = capture
        try:
            return await super().download_request(request)
        except (DownloadCancelledError, DownloadTimeoutError) as exc:
            if capture is not None and header_end(bytes(capture.received)) >= 0:
                # the body was cut: by DOWNLOAD_MAXSIZE, or by the download's timeout
                capture.truncated = "time" if isinstance(exc, DownloadTimeoutError) else "length"
            raise
        except BlockedAddress as exc:
            self._stats.inc_value("security/blocked_address")
            host = str(exc).split(": ", 1)[0]
            if host not in self._logged:
                self._logged.add(host)
                logger.warning(
                    "Refused to connect to %s (%s); further refusals for this "
                    "host are counted in security/blocked_address",
                    request.url,
                    exc,
                )
            raise
        finally:
            if capture is not None:
                self._pool.next_capture = None
                capture.close()
                if capture.received:
                    register(request, capture)
            if holder is not None:
                self.turns.release(frontier, request, holder)


def check_handlers(settings: Any) -> None:
    """Fail at start, naming the setting, if http or https is downloaded by a handler
    other than :class:`GuardedHTTPDownloadHandler` (or a subclass): the address policy
    and the politeness shared by every worker are in it, and another handler would
    silently go without both."""
    from scrapy.utils.misc import load_object

    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme in ("http", "https"):
        path = handlers.get(scheme)
        if path is None:
            continue  # not fetched at all
        try:
            handler = load_object(path)
        except (ImportError, NameError, ValueError) as exc:
            raise ValueError(f"DOWNLOAD_HANDLERS[{scheme!r}] = {path!r}: {exc}") from None
        if not (isinstance(handler, type) and issubclass(handler, GuardedHTTPDownloadHandler)):
            raise ValueError(
                f"DOWNLOAD_HANDLERS[{scheme!r}] is {path if isinstance(path, str) else handler} "
                "(set by DOWNLOAD_HANDLERS, DOWNLOAD_HANDLERS_BASE, or Scrapy itself without "
                "a Twisted reactor): webcrawl's address policy and its politeness across "
                "workers are in webcrawl.handlers.http.GuardedHTTPDownloadHandler (subclass "
                "it to send requests another way)"
            )
