"""Simulated workers of one crawl and the ground truth they are checked against.

A :class:`SimWorker` is what a crawl worker does with the frontier (the real
:class:`~webcrawl.frontier.queue.HostQueue` over a real Redis and a real store),
every outside call passing its :class:`~support.gates.Gate`.  :class:`Frontier`
reads every place a URL can be in, straight from Redis and the store, for the
invariants.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import redis
from scrapy import Request, Spider

from support.gates import Crash, GatedCluster, GatedRedis, GatedStore, Process, Replica
from webcrawl.frontier.cold import crawl_prefix, parse_cold_key, parse_revisit_key
from webcrawl.frontier.far_revisits import FarRevisits
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.outbox import Outbox
from webcrawl.frontier.queue import HostQueue, lease_shard
from webcrawl.store.base import StoreError

LEASE = 10.0  # lease timeout (and spill claims, refill leases, turn holds), seconds
DELAY = 2.0  # the hosts' politeness delay, at send time
HORIZON = 50.0  # revisits due later than this wait in the store


class SimSpider(Spider):
    name = "sim"


def url_key(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest()[:20]


def host_of(url: str) -> str:
    return url.split("/")[2]


@dataclass
class Held:
    url: str
    lease: str
    revisit: bool


class SimWorker:
    """One worker: its memory (the scheduler's :class:`~webcrawl.frontier.outbox.Outbox`,
    its far revisits, the pages it is fetching) over a HostQueue.

    The rules are the outbox's, as the scheduler uses it: pushes are held per shard
    until a batch, a wait, a call to that shard or a flush sends them, revisits leave
    with the next step; a finished page's lease is acknowledged only in the step after
    the one that stored its outlinks; revisits beyond the horizon go to the
    store in batches and at heartbeats.  The spills and refills a step hands out run
    in that step's thread (the scheduler's mover thread runs them in order, after it).
    """

    def __init__(
        self,
        name: str,
        client: redis.Redis,
        store: Any,
        keys: CrawlKeys,
        model: Any,
        *,
        hot_per_host: int,
        budget: int,
        replica: Replica | None = None,
        shard_batch: int = 1,
        shard_wait: float = 0.0,
        max_pages_per_host: int = 0,
    ) -> None:
        self.name = name
        self.process = Process(name)
        self.gate, self.mover = self.process.gates
        self.moves: deque[Callable[[], None]] = deque()  # handed to the mover thread
        self.revisit_move: Future[None] | None = None
        self.model = model
        self.queue = HostQueue(
            (GatedCluster if isinstance(client, redis.RedisCluster) else GatedRedis)(
                client, self.process, replica
            ),
            SimSpider(),
            keys,
            mover=self.moves.append,
            store=GatedStore(store, self.process),
            hot_per_host=hot_per_host,
            hot_budget=budget,
            max_pages_per_host=max_pages_per_host,
            wait_replicas=1 if replica else 0,  # FRONTIER_REDIS_WAIT_REPLICAS
            wait_timeout=0.001,
        )
        self.held: dict[str, Held] = {}  # lease -> what this worker is fetching
        self.sending: dict[str, tuple[str, str]] = {}  # lease -> (host, holder) in flight
        self.turns = 0
        self.queue.id_prefix = f"{name}."  # (a random one in a worker) the same each run
        self.far = FarRevisits(self.queue.put_far_revisits, self.submit)
        self.outbox = Outbox(self.queue, self.far, shard_batch, shard_wait)  # the scheduler's
        # a move runs at the time the mover runs it (in a worker: on Redis's clock)
        move = self.queue.tiers.move

        def at_model_time(shard: int, spills: list, grants: list, *, now: object) -> None:
            move(shard, spills, grants, now=self.model.now)

        self.queue.tiers.move = at_model_time
        self.finished: list[str] = []  # leases done with, not yet in a step
        # the outbox's rule, checked at each step (no Redis read): an ack leaves only once
        # every link of its page was applied, and confirmed, in an earlier step
        self.owed: dict[str, set[bytes]] = {}  # lease -> its page's links not stored yet
        step = self.queue.step

        def checked(**options: Any) -> Any:
            result = step(**options)
            for lease in options.get("acks", ()):
                if lease_shard(lease)[0] not in result.failed:
                    owed = self.owed.pop(lease, set())
                    assert not owed, f"{lease} acknowledged before its links {owed} were stored"
            lost = set(result.failed) | result.unconfirmed
            shard_of = self.queue.keys.shard_of
            stored = {p[0] for p in options.get("pushes", ()) if shard_of(p[1]) not in lost}
            for links in self.owed.values():
                links.difference_update(stored)
            return result

        self.queue.step = checked  # type: ignore[method-assign]

    # -- the scheduler's rules -------------------------------------------------

    def submit(self, func: Callable[[], None]) -> Future[None]:
        """Scheduler._submit: ``func`` runs on the mover thread, after those before it."""
        future: Future[None] = Future()

        def run() -> None:
            try:
                func()
            except Crash:
                raise
            except BaseException as exc:  # read by whoever waits for the future
                future.set_exception(exc)
            else:
                future.set_result(None)

        self.moves.append(run)
        return future

    def move(self) -> None:
        """The mover thread runs the next move it was handed (errors logged, as the
        scheduler's ``_guarded`` does)."""
        with contextlib.suppress(redis.RedisError, StoreError):
            self.moves.popleft()()

    def entry(self, url: str, *, revisit: bool = False) -> tuple:
        data = self.queue.encode(Request(url, meta={"rv": 1} if revisit else {}))
        # a URL's priority, one of three (its hash's): a host's queue holds several, and
        # its members and scores go through the spills, refills and requeues of each
        priority = -(hashlib.sha1(url.encode()).digest()[0] % 3)
        return (url.encode(), host_of(url), priority, 0.0, data, None)

    def step(self, pop: int = 0, *, flush: bool = False) -> Any:
        """Scheduler._step: the pages done with go to the outbox, which steps."""
        for lease in self.finished:
            self.outbox.finished(lease, now=self.model.now)
        self.finished = []
        try:
            sent = self.outbox.step(
                pop=pop,
                flush=flush,
                in_progress=list(self.held),
                lease_timeout=LEASE,
                now=self.model.now,
            )
            result = sent.result
        except redis.RedisError:
            return None
        for request, lease in result.popped:
            revisit = bool(request.meta.get("rv"))
            self.model.handed_out(self, request.url, lease, revisit)
            self.held[lease] = Held(request.url, lease, revisit)
        return result

    # -- operations (each runs on the worker's thread) ---------------------------

    def push(self, urls: list[str]) -> None:
        self.outbox.pushes += [self.entry(u) for u in urls]
        self.step()

    def fetch(self, n: int, send: bool = False) -> None:
        """Scheduler.next_request: a pop; when it finds nothing, the links held leave."""
        result = self.step(pop=n)
        if result is not None and not result.popped and self.outbox.held():
            self.step(flush=True)
        if send and result is not None:
            for _, lease in result.popped:
                self.send(lease)

    def finish(self, lease: str, links: list[str], revisit_in: float | None) -> None:
        """The page of ``lease`` is done: its links join the buffer, its revisit the
        schedule (memory only: they leave with the next step)."""
        if lease in self.sending:
            self.answer(lease)
        held = self.held.pop(lease)
        self.finished.append(lease)
        self.outbox.pushes += [self.entry(u) for u in links]
        self.owed[lease] = {url.encode() for url in links}
        self.model.finished(self, held, revisit_in)
        if revisit_in is None:
            return
        _, host, _, _, data, _ = self.entry(held.url, revisit=True)
        key = url_key(held.url)
        if revisit_in > HORIZON:
            self.far.add((key, host, 0, self.model.now + revisit_in, data))
            if len(self.far.pending) >= 2:
                self.far.store()
        else:
            self.outbox.revisits.append((key, host, 0, revisit_in, data))

    def send(self, lease: str, host: str | None = None) -> None:
        """The download handler takes the host's turn, and holds it (the request leaves;
        if Redis fails, this one stays unsent).  A ``host`` of its own: a request from no
        pop (a robots.txt fetch, a failed path's re-probe, a revisit's HEAD)."""
        host = host or host_of(self.held[lease].url)
        self.turns += 1
        holder, now = f"{self.name}/{self.turns}", self.model.now
        try:
            wait = self.queue.turns.acquire(
                host, default_delay=DELAY, holder=holder, hold=LEASE, now=now
            )
        except redis.RedisError:
            return
        self.model.turn_asked(host, wait)
        if wait == 0:
            self.model.took_turn(self, host, holder, now)
            self.sending[lease] = (host, holder)

    def answer(self, lease: str) -> None:
        """The answer came in: the turn goes back (a failure is logged, as the download
        handler does: the hold expires)."""
        host, holder = self.sending.pop(lease)
        self.model.answering(host, holder)
        now = self.model.now
        with contextlib.suppress(redis.RedisError):
            self.queue.turns.release(host, default_delay=DELAY, holder=holder, now=now)
            self.model.answered(host, now)

    def nack(self, lease: str, wait: float) -> None:
        if lease in self.sending:
            self.answer(lease)
        self.held.pop(lease)
        self.outbox.nack(lease, wait)

    def heartbeat(self) -> None:
        """Scheduler._beat: leases renewed, then far revisits handed to the store and the
        revisits coming near moved up, both on the mover thread."""
        leases = [*self.held, *self.finished, *self.outbox.in_progress()]
        holds, now = list(self.sending.values()), self.model.now
        self.queue.renew(leases, LEASE, holds=holds, now=now)
        self.model.renewed(holds, now)
        if self.outbox.ripe(now):  # Scheduler._poll: links that waited long enough leave
            self.step()
        self.far.store()
        if self.revisit_move is None or self.revisit_move.done():
            self.revisit_move = self.submit(
                lambda: self.queue.move_revisits_up(HORIZON, now=self.model.now)
            )

    def idle(self) -> Any:
        """Scheduler._on_idle: flush, then ask whether the crawl is done."""
        for _ in range(3):
            if self.step(flush=True) is None:
                return None
            if not self.pending():
                break
        return self.queue.idle_check(self.name, now=self.model.now)

    def pending(self) -> bool:
        return bool(self.finished) or self.outbox.pending()


def _num(value: bytes | None) -> int:
    return int(value or 0)


def _entry_url(member: bytes) -> tuple[str, bool]:
    """URL of a queue member ``<seq>|<json>``, and whether it is a revisit."""
    d = json.loads(member.split(b"|", 1)[1])
    return d["url"], bool(d.get("meta", {}).get("rv"))


@dataclass
class Places:
    """Where every URL of the crawl is, read from Redis and the store."""

    hot: list[tuple[str, bool]] = field(default_factory=list)  # (url, revisit)
    delayed: list[tuple[str, bool]] = field(default_factory=list)
    leased: dict[str, tuple[str, bool]] = field(default_factory=dict)  # lease -> ...
    spill: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))  # host->seqs
    spill_urls: set[str] = field(default_factory=set)
    spilled_revisits: set[str] = field(default_factory=set)  # revisits in the spill set or
    # the store's tier (a revisit of a host with requests there follows them)
    cold: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    moved: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    revisits_redis: set[str] = field(default_factory=set)  # URL keys
    revisits_store: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    host_pages: dict[str, int] = field(default_factory=dict)  # FRONTIER_MAX_PAGES_PER_HOST
    counters: dict[str, int] = field(default_factory=dict)
    cold_count: dict[str, int] = field(default_factory=dict)  # host -> the `cold` hash
    spilling: dict[str, int] = field(default_factory=dict)
    claims: set[tuple[int, str]] = field(default_factory=set)  # (shard, claim) in progress
    # or completed: rows of any other claim (dead, or lost) are garbage
    cold_revisits: dict[str, set[int]] = field(default_factory=dict)  # host -> seqs
    refill_rooms: int = 0
    refill_leases: int = 0

    def queued_urls(self) -> set[str]:
        """URLs (not revisits) in a place from which they will be fetched."""
        urls = {u for u, rv in self.hot + self.delayed if not rv}
        urls |= {u for u, rv in self.leased.values() if not rv}
        urls |= self.spill_urls
        for host, rows in self.cold.items():
            revisits = self.cold_revisits.get(host, set())
            urls |= {u for seq, u in rows.items() if seq not in self.moved[host] | revisits}
        return urls


def read_places(client: redis.Redis, store: Any, keys: CrawlKeys) -> Places:  # noqa: PLR0912
    p = Places()
    totals = defaultdict(int)
    for k in keys.all_shards():
        for name in client.scan_iter(match=k.host_queue_prefix + "*"):
            p.hot += [_entry_url(m) for m in client.zrange(name, 0, -1)]
        for entry in client.zrange(k.delayed, 0, -1):
            p.delayed.append(_entry_url(entry.split(b"\n", 2)[2]))
        for lease, entry in client.hgetall(k.leased).items():
            p.leased[f"{k.shard}:{lease.decode()}"] = _entry_url(entry.split(b"\n", 2)[2])
        for entry in client.zrange(k.spill, 0, -1):
            if entry.startswith(b"junk-"):  # (the junk rule's: no request, no host)
                continue
            host, _, member = entry.split(b"\n", 2)
            p.spill[host.decode()].add(int(member.split(b"|", 1)[0]))
            url, revisit = _entry_url(member)
            (p.spilled_revisits if revisit else p.spill_urls).add(url)
        for name in client.scan_iter(match=k.moved_prefix + "*"):
            host = name.decode()[len(k.moved_prefix) :]
            p.moved[host] |= {parse_cold_key(m.decode())[4] for m in client.smembers(name)}
        p.claims |= {(k.shard, c.decode()) for c in client.smembers(k.spill_live)}
        p.claims |= {(k.shard, c.decode()) for c in client.hkeys(k.spill_done)}
        p.revisits_redis |= {key.decode() for key in client.hkeys(k.revisit_requests)}
        p.seen |= {fp.decode() for fp in client.smembers(k.seen)}
        p.host_pages |= {h.decode(): int(n) for h, n in client.hgetall(k.host_pages).items()}
        for name, key in (
            ("queued", k.queued),
            ("cold_total", k.cold_total),
            ("reserved", k.reserved),
        ):
            totals[name] += _num(client.get(key))
            p.counters[f"{name}:{k.shard}"] = _num(client.get(key))
        for host, n in client.hgetall(k.cold).items():
            p.cold_count[host.decode()] = int(n)
        for host, n in client.hgetall(k.spilling).items():
            p.spilling[host.decode()] = int(n)
        for lease in client.hvals(k.refill):
            p.refill_rooms += int(lease.split(b"|")[1])
            p.refill_leases += 1
    p.counters.update(totals)
    for key, value in store.frontier_scan(crawl_prefix(keys.crawl), 10**6):
        if "junk-" in key:  # (the junk rule's: no request)
            continue
        if "/~r/" in key:
            p.revisits_store.add(parse_revisit_key(key)[1])
        else:
            _, shard, host, _, seq, claim = parse_cold_key(key)
            if (shard, claim) not in p.claims and seq not in p.moved[host]:
                continue  # garbage: a (late) write of a dead or lost claim, never refilled
            d = json.loads(value)
            if d.get("meta", {}).get("rv"):
                p.spilled_revisits.add(d["url"])
                p.cold_revisits.setdefault(host, set()).add(seq)
            p.cold[host][seq] = d["url"]
    return p
