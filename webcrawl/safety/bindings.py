"""The seeds' bindings: each seed's host and port, bound to the addresses it had when
the crawl was seeded (:func:`~webcrawl.safety.addresses.seed_binding`), kept in the
crawl's Redis sealed (:mod:`webcrawl.safety.seal`) so that every worker agrees and
whoever writes Redis cannot widen the address policy.  Adapters: Redis, and the
reactor's resolver (the one the download handler's connections use).
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterable
from typing import Any

from redis.exceptions import RedisError
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

from webcrawl.safety.addresses import AddressPolicy, literal_address, seed_binding
from webcrawl.safety.policy import url_hosts
from webcrawl.safety.seal import Seal

logger = logging.getLogger(__name__)

Binding = dict[tuple[str, int], list[str]]


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


def _field(host: str, port: int) -> str:
    return f"{host}|{port}"


def sealed_binding(seal: Seal, key: str, field: str, addresses: list[str]) -> str:
    """A binding as Redis keeps it (JSON, sealed: :mod:`webcrawl.safety.seal`)."""
    signed = seal.sign("binding", key, field, "\n".join(addresses))
    return json.dumps({"addresses": addresses, "seal": signed})


def open_binding(seal: Seal, key: str, field: str, raw: bytes | str) -> list[str] | None:
    """The addresses of a binding read from Redis, or None when it is not one this worker
    can trust (unreadable, or its seal does not verify)."""
    try:
        value = json.loads(raw)
        addresses, signed = value["addresses"], value["seal"]
    except Exception:  # anything in Redis: garbage, nesting too deep, not a dict
        return None
    if not (isinstance(signed, str) and isinstance(addresses, list)):
        return None
    if not all(isinstance(a, str) for a in addresses):
        return None
    return addresses if seal.verify(signed, "binding", key, field, "\n".join(addresses)) else None


class SeedBindings:
    """The seeds' bindings the crawl keeps in Redis (hash ``key``), sealed with ``seal``:
    only those this worker can trust are read, a record that does not verify is never
    replaced (said once), and a worker that cannot seal (a shared Redis without
    ``WEBCRAWL_SECRET``) writes none."""

    def __init__(self, server: Any, key: str, seal: Seal) -> None:
        self.server, self.key, self.seal = server, key, seal
        self._said = False

    def all(self) -> Binding:
        """Every trusted binding."""
        bindings: Binding = {}
        untrusted = 0
        for raw_field, value in self.server.hgetall(self.key).items():
            field = raw_field.decode("utf-8", "replace")
            host, _, port = field.rpartition("|")
            addresses = open_binding(self.seal, self.key, field, value)
            if port.isdigit() and addresses is not None:
                bindings[(host, int(port))] = addresses
            else:
                untrusted += 1
        self._untrusted(untrusted)
        return bindings

    def recorded(self, hosts: list[tuple[str, int]]) -> tuple[Binding, set[tuple[str, int]]]:
        """The trusted bindings of ``hosts`` (one HMGET), and the hosts Redis keeps a
        record for that does not verify."""
        found: Binding = {}
        other = set()
        values = self.server.hmget(self.key, [_field(*h) for h in hosts])
        for seed, value in zip(hosts, values, strict=True):
            if value is None:
                continue
            addresses = open_binding(self.seal, self.key, _field(*seed), value)
            if addresses is None:
                other.add(seed)
            else:
                found[seed] = addresses
        self._untrusted(len(other))
        return found, other

    def share(self, seed: tuple[str, int], addresses: list[str]) -> list[str]:
        """Record a seed's binding unless a record is there first (a trusted one is the
        binding to use), and return the binding to use."""
        if not self.seal.trusted:
            return addresses  # unsealed, no other worker would trust it
        field = _field(*seed)
        try:
            if self.server.hsetnx(
                self.key, field, sealed_binding(self.seal, self.key, field, addresses)
            ):
                return addresses
            theirs = open_binding(
                self.seal, self.key, field, self.server.hget(self.key, field) or b""
            )
        except RedisError as exc:
            logger.warning("Could not record seed host %s's address in Redis: %s", seed[0], exc)
            return addresses
        if theirs is None:
            self._untrusted(1)
        return addresses if theirs is None else theirs

    def _untrusted(self, count: int) -> None:
        if count and not self._said:
            self._said = True
            logger.warning(
                "%d seed bindings in Redis (%s) do not verify (another WEBCRAWL_SECRET, none, "
                "or forged): left alone, and their hosts are allowed no special-use address "
                "here unless this worker was given them as seeds",
                count,
                self.key,
            )


def record_bindings(
    bindings: SeedBindings, urls: Iterable[str]
) -> tuple[Binding, set[tuple[str, int]]]:
    """Bind the hosts of ``urls`` now, off any reactor (``webcrawl submit``): each name by
    the system's resolver; recorded sealed unless a binding is there first.  Returns the
    bindings, and the hosts whose record in Redis does not verify (left alone)."""
    hosts = sorted(url_hosts(urls))
    known, untrusted = bindings.recorded(hosts)
    for host, port in hosts:
        if (host, port) in known or (host, port) in untrusted:
            continue
        resolved: list[str] = []
        if literal_address(host) is None:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError):
                continue  # unbound: nothing recorded
            resolved = [str(info[4][0]) for info in infos]
        known[(host, port)] = bindings.share((host, port), seed_binding(host, resolved))
    return known, untrusted


async def bind_seeds(
    policy: AddressPolicy, urls: Iterable[str], bindings: SeedBindings | None, parallel: int = 32
) -> None:
    """Bind the hosts of ``urls`` (seeds this worker was given) in ``policy``: each to the
    binding the crawl already keeps in Redis when it can be trusted (the first one, so
    every worker agrees), else to its IP literal's address or to what its name resolves
    to now (``parallel`` lookups at a time), recorded sealed for the others unless a
    record that does not verify is there (left alone: this worker alone uses its own).
    ``bindings`` None: this worker's policy only.  A name that does not resolve is left
    unbound (nothing recorded: a later seeding binds it)."""
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet.defer import DeferredSemaphore, gatherResults

    hosts = sorted(url_hosts(urls))
    known: Binding = {}
    untrusted: set[tuple[str, int]] = set()
    if bindings is not None and hosts:
        try:
            known, untrusted = bindings.recorded(hosts)
        except RedisError as exc:
            logger.warning("Could not read the seeds' bound addresses from Redis: %s", exc)
    new = [h for h in hosts if h not in known]
    named = [h for h in new if literal_address(h[0]) is None]
    if len(named) > 1000:
        logger.info("Resolving the names of %d seed hosts to bind them", len(named))
    limit = DeferredSemaphore(parallel)
    answers = await maybe_deferred_to_future(
        gatherResults([limit.run(resolve, host, port) for host, port in named])
    )
    resolved = dict(zip(named, answers, strict=True))
    for seed in new:
        if seed in resolved and not resolved[seed]:
            logger.warning(
                "Seed host %s does not resolve now: it is bound to no address (should it "
                "resolve to a special-use one later, that is refused unless "
                "ADDRESSES_ALLOWED_NETWORKS covers it)",
                seed[0],
            )
            continue
        known[seed] = seed_binding(seed[0], resolved.get(seed, []))
        if bindings is not None and seed not in untrusted:  # (one that does not verify stays)
            known[seed] = bindings.share(seed, known[seed])
    for seed, addresses in known.items():
        policy.bind(seed, addresses)
