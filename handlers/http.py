"""Scrapy's HTTP/1.1 download handler, with the address policy at each new connection.

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

Through a proxy (``meta['proxy']``) a worker connects only to the proxy, which the
user chose and which resolves the target itself: those connections are not checked.

Refusals are counted (``security/blocked_address``) and logged once per host; the
request's errback records the page as failed with the reason.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler
from scrapy.http import Response
from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.interfaces import IHostnameResolver, IResolutionReceiver
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from twisted.web.client import HTTPConnectionPool
from zope.interface import implementer

from webcrawl.safety.addresses import AddressPolicy, BlockedAddress
from webcrawl.safety.policy import address_policy

logger = logging.getLogger(__name__)


class _GuardFactory(Factory):
    """Wraps a pool's protocol factory: the connection's peer address is checked
    before the protocol exists (so before anything is sent)."""

    def __init__(self, wrapped: Any, policy: AddressPolicy, host: str, port: int) -> None:
        self.wrapped, self.policy, self.host, self.port = wrapped, policy, host, port

    def buildProtocol(self, addr: Any) -> Protocol | None:
        why = self.policy.check(str(getattr(addr, "host", "")), self.host, self.port)
        if why is not None:
            raise BlockedAddress(f"{self.host}:{self.port}: {why}")
        return self.wrapped.buildProtocol(addr)

    def __getattr__(self, name: str) -> Any:  # doStart, doStop, clientConnectionFailed...
        return getattr(self.wrapped, name)


@implementer(IHostnameResolver)
class _FilteringResolver:
    """A host name resolver that passes on only the addresses the policy allows, and
    remembers why it refused the others."""

    def __init__(self, resolver: Any, policy: AddressPolicy, host: str, port: int) -> None:
        self.resolver, self.policy, self.host, self.port = resolver, policy, host, port
        self.allowed = 0
        self.refused: list[str] = []

    def resolveHostName(self, receiver: Any, hostName: str, *args: Any, **kwargs: Any) -> Any:
        outer = self

        @implementer(IResolutionReceiver)
        class Filter:
            def resolutionBegan(self, resolution: Any) -> None:
                receiver.resolutionBegan(resolution)

            def addressResolved(self, address: Any) -> None:
                why = outer.policy.check(str(address.host), outer.host, outer.port)
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

    def _newConnection(self, key: Any, endpoint: Any) -> Any:
        # key: (scheme, host, port, bind address) for a direct connection (Agent's,
        # plus Scrapy's bind address); (b"http-proxy", ...) or a longer tuple with the
        # proxy's configuration through a proxy
        direct = len(key) == 4 and key[0] in (b"http", b"https")
        if not direct:
            return super()._newConnection(key, endpoint)
        host = key[1].decode("ascii", "replace") if isinstance(key[1], bytes) else str(key[1])
        pool = self

        def quiescent(protocol: Any) -> None:
            pool._putConnection(key, protocol)

        port = int(key[2])
        resolving = _hostname_endpoint(endpoint)
        resolver = None
        if resolving is not None:
            own = resolving._getNameResolverAndMaybeWarn(resolving._reactor)
            resolver = _FilteringResolver(own, self.policy, host, port)
            resolving._getNameResolverAndMaybeWarn = lambda reactor: resolver
        factory = _GuardFactory(self._factory(quiescent, repr(endpoint)), self.policy,
                                host, port)  # fmt: skip

        def refused(failure: Failure) -> Failure:
            if resolver is not None and resolver.refused and not resolver.allowed:
                raise BlockedAddress(f"{host}:{port}: {resolver.refused[0]}")
            return failure

        return endpoint.connect(factory).addErrback(refused)


class GuardedHTTPDownloadHandler(HTTP11DownloadHandler):
    """``DOWNLOAD_HANDLERS`` for http and https: Scrapy's, with the address policy."""

    lazy = False  # made at start: a bad WEBCRAWL_ALLOWED_NETWORKS fails there

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        from twisted.internet import reactor

        self.policy = address_policy(crawler)
        pool = GuardedConnectionPool(reactor, self.policy)
        pool.maxPersistentPerHost = self._pool.maxPersistentPerHost
        pool._factory = self._pool._factory
        self._pool = pool
        self._stats = crawler.stats
        self._logged: set[str] = set()

    async def download_request(self, request: Request) -> Response:
        try:
            return await super().download_request(request)
        except BlockedAddress as exc:
            self._stats.inc_value("security/blocked_address")
            host = str(exc).split(": ", 1)[0]
            if host not in self._logged:
                self._logged.add(host)
                logger.warning("Refused to connect to %s (%s); further refusals for this "
                               "host are counted in security/blocked_address",
                               request.url, exc)  # fmt: skip
            raise
