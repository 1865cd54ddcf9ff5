"""The crawl's address policy, one per crawler, built from its settings, and the seeds'
bindings: the download handler enforces the policy; the spider binds its seeds' hosts
(:func:`bind_seeds`) before it yields them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from urllib.request import getproxies

from redis.exceptions import RedisError
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

from webcrawl.safety.addresses import (
    AddressPolicy,
    host_port,
    literal_address,
    parse_networks,
    seed_binding,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

Binding = dict[tuple[str, int], list[str]]


def address_policy(crawler: Crawler) -> AddressPolicy:
    """The crawler's policy (made on first use from ``WEBCRAWL_ALLOWED_NETWORKS``; a bad
    network fails the crawl at start with the setting's name).  The proxies the
    environment names (``http_proxy``...) are the operator's: trusted."""
    policy = getattr(crawler, "_webcrawl_address_policy", None)
    if policy is None:
        allowed = parse_networks(crawler.settings.getlist("WEBCRAWL_ALLOWED_NETWORKS"))
        policy = AddressPolicy(allowed)
        policy.trust(url_hosts(v for k, v in getproxies().items() if k != "no"))
        crawler._webcrawl_address_policy = policy  # type: ignore[attr-defined]
    return policy


def url_hosts(urls: Iterable[str]) -> set[tuple[str, int]]:
    """``(host, port)`` of each URL, as :class:`AddressPolicy` compares them."""
    hosts = set()
    for url in urls:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            continue
        if parts.hostname:
            hosts.add(host_port(parts.hostname, port, parts.scheme))
    return hosts


def resolve(host: str, port: int, timeout: float = 60.0) -> Deferred[list[str]]:
    """The addresses ``host`` resolves to, by the reactor's resolver (the one the download
    handler's connections use: Scrapy's ``DNS_RESOLVER``); [] when it does not resolve
    within ``timeout`` seconds."""
    from twisted.internet import reactor

    done: Deferred[list[str]] = Deferred()
    addresses: list[str] = []

    @implementer(IResolutionReceiver)
    class Receiver:
        def resolutionBegan(self, resolution: Any) -> None:
            pass

        def addressResolved(self, address: Any) -> None:
            addresses.append(str(address.host))

        def resolutionComplete(self) -> None:
            if not done.called:  # (not timed out)
                done.callback(addresses)

    reactor.nameResolver.resolveHostName(Receiver(), host, portNumber=port)  # type: ignore[attr-defined]
    done.addTimeout(timeout, reactor)
    done.addErrback(lambda _: [])  # no answer in time: as one that does not resolve
    return done


def read_bindings(server: Any, key: str) -> Binding:
    """The seeds' bindings the crawl keeps in Redis (``host|port`` -> JSON addresses)."""
    bindings: Binding = {}
    for field, value in server.hgetall(key).items():
        host, _, port = field.decode("utf-8", "replace").rpartition("|")
        try:
            addresses = json.loads(value)
        except ValueError:
            continue
        if port.isdigit() and isinstance(addresses, list):
            bindings[(host, int(port))] = [str(a) for a in addresses]
    return bindings


def _field(host: str, port: int) -> str:
    return f"{host}|{port}"


def _recorded(server: Any, key: str, hosts: list[tuple[str, int]]) -> Binding:
    """The bindings Redis keeps of ``hosts`` (one HMGET)."""
    found: Binding = {}
    for seed, value in zip(hosts, server.hmget(key, [_field(*h) for h in hosts]), strict=True):
        try:
            addresses = json.loads(value) if value is not None else None
        except ValueError:
            continue
        if isinstance(addresses, list):
            found[seed] = [str(a) for a in addresses]
    return found


async def bind_seeds(
    policy: AddressPolicy, urls: Iterable[str], server: Any, key: str, parallel: int = 32
) -> None:
    """Bind the hosts of ``urls`` (seeds) in ``policy``: each to the binding the crawl
    already keeps in Redis (the first one, so every worker agrees), else to its IP
    literal's address or to what its name resolves to now (``parallel`` lookups at a
    time), recorded there for the others.  ``server`` None: this worker's policy only.
    A name that does not resolve is left unbound (nothing recorded: a later seeding
    binds it)."""
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet.defer import DeferredSemaphore, gatherResults

    hosts = sorted(url_hosts(urls))
    known: Binding = {}
    if server is not None and hosts:
        try:
            known = _recorded(server, key, hosts)
        except RedisError as exc:
            logger.warning("Could not read the seeds' bound addresses from Redis: %s", exc)
    new = [h for h in hosts if h not in known]
    named = [h for h in new if literal_address(h[0]) is None]
    limit = DeferredSemaphore(parallel)
    answers = await maybe_deferred_to_future(
        gatherResults([limit.run(resolve, host, port) for host, port in named])
    )
    resolved = dict(zip(named, answers, strict=True))
    for host, port in new:
        if (host, port) in resolved and not resolved[(host, port)]:
            logger.warning(
                "Seed host %s does not resolve now: it is bound to no address (should it "
                "resolve to a special-use one later, that is refused unless "
                "WEBCRAWL_ALLOWED_NETWORKS covers it)",
                host,
            )
            continue
        known[(host, port)] = seed_binding(host, resolved.get((host, port), []))
        if server is None:
            continue
        try:
            if not server.hsetnx(key, _field(host, port), json.dumps(known[(host, port)])):
                known.update(_recorded(server, key, [(host, port)]))  # another worker was first
        except RedisError as exc:
            logger.warning("Could not record seed host %s's address in Redis: %s", host, exc)
    for seed, addresses in known.items():
        policy.bind(seed, addresses)
