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


def resolve(host: str, port: int) -> Deferred[list[str]]:
    """The addresses ``host`` resolves to, by the reactor's resolver (the one the download
    handler's connections use: Scrapy's ``DNS_RESOLVER``); [] when it does not resolve."""
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
            done.callback(addresses)

    reactor.nameResolver.resolveHostName(Receiver(), host, portNumber=port)  # type: ignore[attr-defined]
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


async def bind_seeds(policy: AddressPolicy, urls: Iterable[str], server: Any, key: str) -> None:
    """Bind the hosts of ``urls`` (seeds) in ``policy``: each to the binding the crawl
    already keeps in Redis (the first one, so every worker agrees), else to its IP
    literal's address or to what its name resolves to now, recorded there for the
    others.  ``server`` None: this worker's policy only.  A name that does not resolve
    is left unbound (nothing recorded: a later seeding binds it)."""
    from scrapy.utils.defer import maybe_deferred_to_future

    hosts = url_hosts(urls)
    known: Binding = {}
    if server is not None and hosts:
        try:
            known = read_bindings(server, key)
        except RedisError as exc:
            logger.warning("Could not read the seeds' bound addresses from Redis: %s", exc)
    for host, port in sorted(hosts - known.keys()):
        resolved = []
        if literal_address(host) is None:
            resolved = await maybe_deferred_to_future(resolve(host, port))
            if not resolved:
                logger.warning(
                    "Seed host %s does not resolve now: it is bound to no address (should it "
                    "resolve to a special-use one later, that is refused unless "
                    "WEBCRAWL_ALLOWED_NETWORKS covers it)",
                    host,
                )
                continue
        binding = seed_binding(host, resolved)
        known[(host, port)] = binding
        if server is not None:
            try:
                if not server.hsetnx(key, f"{host}|{port}", json.dumps(binding)):
                    known.update(read_bindings(server, key))  # another worker was first
            except RedisError as exc:
                logger.warning("Could not record seed host %s's address in Redis: %s", host, exc)
    for seed, addresses in known.items():
        if seed in hosts:
            policy.bind(seed, addresses)
