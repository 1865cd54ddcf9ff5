"""The crawl's shared frontier in Redis: per-host queues, politeness, leases, in shards.

A host lives in one shard (:mod:`~webcrawl.frontier.keys`); each shard has,
under its own hash tag:

- ``hq:<host>``: a sorted set per host, by request priority then arrival.
- ``ready``: hosts that have queued requests, scored by the time they may be
  fetched from next.  ``next``: per host, the earliest time of its next pop
  (last pop + its delay), kept while the host's queue is empty too.
- ``delay``: per-host delay overrides (seconds); the default is the caller's.
  ``delay_hold``: per host, until when a back-off delay may not be lowered.
- ``leases`` / ``leased``: popped requests, by deadline, and their data.
  A request is leased, not deleted, until the worker acknowledges it; a
  lease whose deadline passes (a killed worker) goes back to its host queue.
  A lease id is ``<shard>:<n>``.
- ``delayed``: requests that may not be fetched before a time (re-queued
  failures with back-off), moved into their host queue when due.
- ``revisits`` / ``revisit_req``: pages scheduled for a revisit, one entry
  per URL (a new schedule replaces the old), moved into their host queue
  when due, bypassing the dupefilter.  A move is part of a step, so no two
  workers take the same revisit.
- ``seen`` (or ``bloom``): the fingerprints of the shard's hosts' URLs.
- The cold tier (``FRONTIER_HOT_PER_HOST``): what is over a host's limit or the
  shard's budget waits in the store's ``frontier`` table (:mod:`~webcrawl.frontier.cold`).
  ``cold`` / ``cold_n``: per host and in all, how many; ``spill``: requests on their
  way there, claimed by a worker until a deadline; ``refill_wait`` / ``refilling`` /
  ``refill``: hosts waiting for, and holding, a refill lease (``token|room|stored``);
  ``reserved``: budget places promised to refills; ``moved:<host>``: the store rows
  a refill put in the queue but has not deleted yet (none is put there twice).

What a worker does per page is one round trip per Redis node: :meth:`HostQueue.step`
runs one Lua script on each shard it touches (in one pipeline per node) that
acknowledges finished leases, pushes new requests (dupefilter check included),
and, in one shard, requeues expired leases and due delayed requests and pops the
next requests from the hosts whose turn it is.  With many links in a step it
first asks each shard which of their fingerprints it has (a plain set lookup, one
more round trip), so that a duplicate's request is never sent to a script.
Within a shard hosts take turns by ready time, so a host with 100 000 queued
URLs does not hold up one with 10, and one host is never handed out twice
within its delay, whichever workers ask; across shards a worker pops from the
shards that have work in turn, from a map of when each shard has work that
every answer updates (and a look at every shard, one cheap script each, at most
once a second).  Nothing on the per-page path is crawl-wide.  The scripts are in
:mod:`~webcrawl.frontier.scripts`.

Every shared time is Redis's clock (``TIME`` in the scripts); workers pass
durations, so their own clocks may be off.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import redis
from scrapy import Request, Spider
from scrapy.http.request import _find_method as request_to_name  # the slow, general path
from scrapy.utils.request import request_from_dict

from webcrawl.frontier import scripts, serialize
from webcrawl.frontier.cold import (
    clear_cold,
    cold_key,
    host_prefix,
    parse_cold_key,
    parse_revisit_key,
    revisit_key,
    revisit_prefix,
)
from webcrawl.frontier.keys import CrawlKeys, ShardKeys
from webcrawl.frontier.shards import Call, Lua, ShardRouter
from webcrawl.store.base import Store, StoreError

logger = logging.getLogger(__name__)

# What a plain Request's constructor gives an argument left out: its queue entry
# leaves these out (workers of every version read it the same way)
_DEFAULTS = {"callback": None, "errback": None, "headers": {}, "body": b"", "cookies": {},
             "meta": {}, "encoding": "utf-8", "flags": [], "cb_kwargs": {},
             "dont_filter": False, "method": "GET", "priority": 0}  # fmt: skip
_KEEP = object()


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL."""
    return "/".join(url.split("/", 3)[:3])


def _own_origin_path(url: str, headers: dict) -> str | None:
    """The path of the request's Referer when it is its only header and of the URL's
    own origin (a link within a site: the usual case), else None."""
    if len(headers) != 1:
        return None
    values = headers.get(b"Referer")
    if not values or len(values) != 1:
        return None
    referer, origin = values[0].decode("latin-1"), _origin(url)
    if referer.startswith(origin + "/") or referer == origin:
        return referer[len(origin) :]
    return None


# Request classes a queue entry may name (``_class``); others are refused before
# anything is imported (FRONTIER_REQUEST_CLASSES adds a project's own).
DEFAULT_REQUEST_CLASSES = (
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
    "scrapy.http.request.rpc.XmlRpcRequest",
)

# Whether to ask which of a step's fingerprints Redis already has before the step
# (one more round trip): when this many of its pushes are expected to be duplicates
# (from the share of duplicates in recent steps).  A known duplicate then costs Redis
# a set lookup (SMISMEMBER, or BITFIELD_RO for the Bloom filter) instead of the step
# script reading its whole serialised request.
PRECHECK_DUPLICATES = 8

# Spilled requests a worker takes to the store at once (and the spill set's size from
# which a step that only pushes takes them); refill leases one step hands out per shard.
SPILL_BATCH = 500
REFILLS_PER_STEP = 4

# A priority outside this range is clamped so the score keeps FIFO order
# exact in a double (|priority| * 1e12 + seq < 2**53).
MAX_PRIORITY = 8000


@dataclass
class StepResult:
    popped: list[tuple[Request, str]] = field(default_factory=list)  # (request, lease)
    next_ready: float | None = None  # when nothing was popped: seconds until a shard has work
    added: int = 0
    known: int = 0  # pushes found duplicates before the step (not sent to its script)
    requeued: int = 0
    pushed: int = 0
    revisited: int = 0  # due revisits moved into the host queues
    over_budget: int = 0  # new URLs dropped: their host took FRONTIER_MAX_PAGES_PER_HOST
    refused: list[tuple[str, str]] = field(default_factory=list)  # (lease, why): unreadable
    # shards whose call failed (node down, failing over, slot migrating): what the step
    # had for them was not applied, the caller keeps it and sends it again
    failed: dict[int, Exception] = field(default_factory=dict)
    # shards whose pushes a master applied but fewer than FRONTIER_REDIS_WAIT_REPLICAS
    # replicas confirmed
    unconfirmed: set[int] = field(default_factory=set)
    calls: int = 0  # shard calls made (script runs)

    @property
    def request(self) -> Request | None:
        """The first request popped, if any."""
        return self.popped[0][0] if self.popped else None

    @property
    def lease(self) -> str | None:
        return self.popped[0][1] if self.popped else None


@dataclass
class TierStats:
    """What a worker's queue moved between Redis and the store (the cold tier)."""

    spilled: int = 0  # requests stored
    refilled: int = 0  # requests moved up into their host queues
    refills: int = 0  # refill leases completed
    recovered: int = 0  # rows a dead worker's refill left in the store, deleted
    store_seconds: float = 0.0  # time in store calls
    spill_seconds: float = 0.0  # time in spills (store and Redis)
    refill_seconds: float = 0.0  # time in refills (store and Redis)
    errors: int = 0  # spills or refills left to expire (store or Redis error)


class RefusedEntry(ValueError):
    """A queue entry this worker will not turn into a request (unreadable, or a class
    that is not allowed)."""


def _now_arg(now: float | None) -> str:
    """The scripts' "now": Redis's clock, unless a test simulates time."""
    return "" if now is None else repr(float(now))


def _seen_key(k: ShardKeys, seen_mode: str) -> str:
    """The shard's dupefilter: its set of fingerprints, or its Bloom filter."""
    return k.bloom if seen_mode == "bloom" else k.seen


def _known(fps: list[bytes], reply: list[int], seen_mode: str) -> set[bytes]:
    """The fingerprints a pre-check's ``reply`` (SMISMEMBER's, or BITFIELD_RO's: a bit
    per offset) says the dupefilter has."""
    if seen_mode != "bloom":
        return {fp for fp, hit in zip(fps, reply, strict=True) if hit}
    known, at = set(), 0
    for fp in fps:
        n = fp.count(b",") + 1
        if all(reply[at : at + n]):
            known.add(fp)
        at += n
    return known


def lease_shard(lease: str) -> tuple[int, str]:
    """``(shard, id)`` of a lease (``<shard>:<id>``)."""
    shard, _, ident = lease.partition(":")
    return int(shard), ident


@dataclass
class _ShardWork:
    acks: list[str] = field(default_factory=list)
    nacks: list[tuple[str, float]] = field(default_factory=list)
    pushes: list[tuple] = field(default_factory=list)  # see HostQueue.step
    revisits: list[tuple[str, str, int, float, bytes]] = field(default_factory=list)


class HostQueue:
    """Per-host queues in shards, with cluster-wide politeness and leased pops.

    One instance per worker: it remembers when each shard may next have work
    (from every answer, and from a look at all shards at most every
    ``refresh`` seconds), and pops from the shards that have it in turn.
    """

    def __init__(
        self,
        server: redis.Redis | redis.RedisCluster,
        spider: Spider,
        keys: CrawlKeys,
        request_classes: Iterable[str] = DEFAULT_REQUEST_CLASSES,
        *,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
        refresh: float = 1.0,
        store: Store | None = None,
        hot_per_host: int = 0,
        hot_budget: int = 0,
        max_pages_per_host: int = 0,
    ) -> None:
        if hot_per_host < 0 or hot_budget < 0 or max_pages_per_host < 0:
            raise ValueError("hot_per_host, hot_budget and max_pages_per_host must be >= 0")
        if hot_per_host and store is None:
            raise ValueError("a frontier with a cold tier (hot_per_host > 0) needs a store")
        if hot_budget and not hot_per_host:
            raise ValueError("a budget (FRONTIER_HOT_BUDGET) needs FRONTIER_HOT_PER_HOST > 0")
        self.server = server
        self.spider = spider
        self.keys = keys
        self.request_classes = frozenset(request_classes)
        agent = getattr(spider, "settings", None) and spider.settings.get("USER_AGENT")
        self._own_agent: bytes | None = agent.encode() if agent else None
        self.router = ShardRouter(server, keys, wait_replicas, wait_timeout)
        # crawl-wide keys: one slot, redis-py's way
        self._idle = server.register_script(scripts.IDLE)
        self.refresh = refresh
        # per shard: when it may next have work (the clock of :meth:`_clock`); inf:
        # nothing as far as we know (another worker's push is found by the next look)
        self._due = [0.0] * keys.shards
        self._looked = float("-inf")
        self._cursor = random.randrange(keys.shards)  # workers start on different shards
        self._dup_share = 0.5  # of recent steps' fingerprinted pushes: duplicates
        self._precheck = True  # False: the server lacks SMISMEMBER (Redis < 6.2)
        self.store = store
        self.hot_per_host = hot_per_host
        # the budget of a shard: hosts spread evenly over the shards
        self.shard_budget = -(-hot_budget // keys.shards) if hot_budget else 0
        self.tier_stats = TierStats()
        self.max_pages_per_host = max_pages_per_host  # 0: no limit

    # -- encoding ------------------------------------------------------------

    def encode(self, request: Request) -> bytes:
        """JSON bytes of ``request.to_dict(spider=...)``, without its per-call cost, and
        small: a plain Request's entry leaves out what its constructor would give anyway
        (``_DEFAULTS``), and a Referer of the URL's own origin is kept as its path
        (``_ref``).  A typical link's entry is then its URL, its depth and that path.

        ``Request.to_dict`` finds a callback's name by scanning every method
        of the spider with ``inspect.getmembers`` for each request (~180 us,
        a quarter of a page's CPU time here).  We resolve names once per
        function and build the same dict.
        """
        headers = dict(request.headers)
        if self._own_agent is not None and headers.get(b"User-Agent") == [self._own_agent]:
            # Set by this worker's UserAgentMiddleware, and copied into redirects:
            # the worker that fetches the request sets its own.
            del headers[b"User-Agent"]
        d = {
            "url": request.url,
            "callback": self._method_name(request.callback),
            "errback": self._method_name(request.errback),
            "headers": headers,
        }
        for attr in request.attributes:
            d.setdefault(attr, getattr(request, attr))
        if type(request) is not Request:  # another constructor: its own defaults
            d["_class"] = type(request).__module__ + "." + type(request).__name__
            return serialize.dumps(d)
        ref = _own_origin_path(request.url, headers)
        if ref is not None:
            d["_ref"], d["headers"] = ref, {}
        return serialize.dumps({k: v for k, v in d.items()
                                if k == "url" or _DEFAULTS.get(k, _KEEP) != v})  # fmt: skip

    def _method_name(self, func: object) -> object:
        if not callable(func):
            return func  # None, or already a name
        underlying = getattr(func, "__func__", None)
        name = getattr(func, "__name__", None)
        if underlying is not None and name is not None:
            own = getattr(self.spider, name, None)
            if getattr(own, "__func__", None) is underlying:
                return name
        return request_to_name(self.spider, func)

    def decode(self, member: bytes) -> Request:
        """The request in a queue member (``<seq>|<json>``).

        Raises :class:`RefusedEntry` for an entry that is not a request dict, or
        that names a request class (``_class``) outside ``request_classes``: on a
        shared Redis whoever can write the queue would otherwise choose what every
        worker imports.  The name is checked before anything is imported.
        """
        try:
            d = serialize.loads(member.split(b"|", 1)[1])
        except (IndexError, ValueError, UnicodeDecodeError) as exc:
            raise RefusedEntry(f"not a serialised request: {exc}") from None
        if not isinstance(d, dict) or not isinstance(d.get("url"), str):
            raise RefusedEntry("not a serialised request")
        ref = d.pop("_ref", None)
        if isinstance(ref, str) and "headers" not in d:
            d["headers"] = {b"Referer": [(_origin(d["url"]) + ref).encode("latin-1")]}
        name = d.get("_class")
        if name is not None and name not in self.request_classes:
            raise RefusedEntry(
                f"request class {name!r} is not in FRONTIER_REQUEST_CLASSES"
                if isinstance(name, str) else "bad request class"
            )  # fmt: skip
        try:
            request = request_from_dict(d, spider=self.spider)
        except Exception as exc:  # a bad callback name, bad field types...
            raise RefusedEntry(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(request, Request):
            raise RefusedEntry(f"{type(request).__name__} is not a scrapy Request")
        return request

    # -- operations ----------------------------------------------------------

    @staticmethod
    def _clock(now: float | None) -> float:
        return time.monotonic() if now is None else now

    def _shard_keys(self, shard: int, seen_mode: str) -> list[str]:
        k = self.keys.shard(shard)
        return [k.ready, k.next, k.delay, k.leases, k.leased, _seen_key(k, seen_mode), k.seq,
                k.queued,
                k.host_queue_prefix, k.delayed, k.lease_seq, k.overflow_prefix,
                k.revisits, k.revisit_requests, k.cold, k.cold_total, k.spill, k.spilling,
                k.refill_wait, k.refilling, k.refill, k.reserved, k.moved_prefix,
                k.host_pages, k.over_budget]  # fmt: skip

    def look(self, *, now: float | None = None) -> list[float]:
        """Ask every shard when it has work (one round trip per node); returns and
        remembers seconds from now per shard (inf: none)."""
        calls = []
        for shard in range(self.keys.shards):
            k = self.keys.shard(shard)
            calls.append(Call(shard, scripts.PEEK, [k.ready, k.leases, k.delayed, k.revisits,
                                                 k.spill, k.refilling, k.refill_wait, k.queued,
                                                 k.reserved],
                              [_now_arg(now), self.shard_budget]))  # fmt: skip
        self.router.run(calls)
        clock = self._clock(now)
        self._looked = clock
        waits = []
        for call in calls:
            if call.error is not None:
                wait = 0.0  # unknown: try it
            else:
                wait = float(call.result)
                wait = float("inf") if wait < 0 else wait
            self._due[call.shard] = clock + wait
            waits.append(wait)
        if all(c.error is not None for c in calls):
            raise calls[0].error
        return waits

    def _pop_order(self, clock: float) -> list[int]:
        """Shards that may have work now, in turn from the cursor."""
        n = self.keys.shards
        order = [(self._cursor + i) % n for i in range(n)]
        return [s for s in order if self._due[s] <= clock]

    def step(
        self,
        *,
        worker_id: str = "",
        acks: Sequence[str] = (),
        nacks: Sequence[tuple[str, float]] = (),
        pushes: Sequence[tuple] = (),
        revisits: Sequence[tuple[str, str, int, float, bytes]] = (),
        pop: bool | int = True,
        default_delay: float = 0.0,
        lease_timeout: float = 60.0,
        requeue_limit: int = 20,
        slack: float = 0.0,
        seen_mode: str = "set",
        now: float | None = None,
    ) -> StepResult:
        """Ack leases, hand back ``nacks`` ``(lease, seconds)`` (their requests go back
        to their host queues after that long), push ``(fingerprint, host, priority,
        seconds to wait, data)`` (what follows those in a tuple is the caller's, and
        ignored), schedule ``revisits`` ``(url key, host, priority, seconds until due,
        data)``, and in one shard, the next in turn that has work,
        move expired leases and due delayed requests and revisits into the host
        queues and pop ``pop`` requests (True: one) from its ready hosts.

        Each shard touched is one script call; the calls go in one pipeline per
        Redis node.  Times are Redis's clock (``now`` simulates it, for tests).
        An empty fingerprint bypasses the dupefilter (``dont_filter``); with
        ``seen_mode`` "bloom" a fingerprint is its comma-separated bit offsets in
        the shard's Bloom filter.  A host's delay (``default_delay`` unless set
        per host) is stretched by ``slack`` seconds, when it is not 0, for the
        jitter between a request leaving a worker and reaching the server.
        With a cold tier (``hot_per_host``), what is over a host's limit or the
        budget goes to the store, and comes back as the host's queue drains
        (:meth:`_spill`, :meth:`_refill`, after the step's calls).  Popped entries
        that cannot be read are refused: listed in ``refused``, for the caller to
        acknowledge (drop).

        A shard whose call fails is listed in ``failed`` and nothing of its part
        was applied; if every call fails, the first error is raised.
        """
        del worker_id  # kept for callers; busy marks are crawl-wide (WorkerRegistry)
        work = self._group(acks, nacks, pushes, revisits)
        want = int(pop)
        result = StepResult(pushed=len(pushes))
        filtered = sum(1 for p in pushes if p[0])
        if self._precheck and filtered * self._dup_share >= PRECHECK_DUPLICATES:
            result.known = self._drop_known(work, seen_mode)
        clock = self._clock(now)
        if want and (clock - self._looked >= self.refresh or clock < self._looked):
            self.look(now=now)  # now and then, so that no shard with work is left out
            clock = self._clock(now)
        tried: set[int] = set()
        while True:
            pop_shard = None
            if want:
                order = [s for s in self._pop_order(self._clock(now)) if s not in tried]
                pop_shard = order[0] if order else None
            if pop_shard is not None:
                work.setdefault(pop_shard, _ShardWork())
                tried.add(pop_shard)
                self._cursor = (pop_shard + 1) % self.keys.shards
            if not work:
                break
            self._run(work, pop_shard, want, result, now=now, default_delay=default_delay,
                      lease_timeout=lease_timeout, requeue_limit=requeue_limit, slack=slack,
                      seen_mode=seen_mode)  # fmt: skip
            work = {}
            # the shard in turn had nothing after all (another worker took it): the next
            if result.popped or pop_shard is None or len(tried) >= 4:
                break
        if result.calls and len(result.failed) == result.calls:
            raise next(iter(result.failed.values()))  # nothing was applied
        if filtered and not result.failed:
            dups = len(pushes) - result.added  # only fingerprinted pushes can be duplicates
            self._dup_share += 0.2 * (min(1.0, dups / filtered) - self._dup_share)
        if want and not result.popped:
            result.next_ready = self._next_ready(now)
        return result

    def _group(
        self, acks: Sequence[str], nacks: Sequence[tuple[str, float]], pushes: Sequence[tuple],
        revisits: Sequence[tuple],
    ) -> dict[int, _ShardWork]:  # fmt: skip
        """What a step has for each shard."""
        work: dict[int, _ShardWork] = {}
        for lease in acks:
            shard, ident = lease_shard(lease)
            work.setdefault(shard, _ShardWork()).acks.append(ident)
        for lease, wait in nacks:
            shard, ident = lease_shard(lease)
            work.setdefault(shard, _ShardWork()).nacks.append((ident, wait))
        for entry in pushes:
            work.setdefault(self.keys.shard_of(entry[1]), _ShardWork()).pushes.append(entry)
        for entry in revisits:
            work.setdefault(self.keys.shard_of(entry[1]), _ShardWork()).revisits.append(entry)
        return work

    def _drop_known(self, work: dict[int, _ShardWork], seen_mode: str) -> int:
        """Drop from ``work`` the pushes whose fingerprints their shard's dupefilter has
        (one command per shard, one round trip per node); returns how many.

        Only a hint: the step script checks every fingerprint again, so a shard whose
        check failed, or another worker's push meanwhile, changes nothing."""
        calls = []
        for shard, w in work.items():
            fps = [p[0] for p in w.pushes if p[0]]
            if not fps:
                continue
            key = _seen_key(self.keys.shard(shard), seen_mode)
            if seen_mode == "bloom":  # known: every bit of it set
                args = [a for fp in fps for off in fp.split(b",") for a in (b"GET", b"u1", off)]
                calls.append(Call(shard, "BITFIELD_RO", [key], args))
            else:
                calls.append(Call(shard, "SMISMEMBER", [key], fps))
        self.router.run(calls)
        dropped = 0
        for call in calls:
            if call.error is not None:
                if "unknown command" in str(call.error).lower():
                    self._precheck = False
                    logger.warning("This Redis lacks %s (Redis 6.2 has it): duplicates are "
                                   "found by the step script alone", call.script)  # fmt: skip
                continue
            w = work[call.shard]
            known = _known([p[0] for p in w.pushes if p[0]], call.result, seen_mode)
            if known:
                keep = [p for p in w.pushes if not p[0] or p[0] not in known]
                dropped += len(w.pushes) - len(keep)
                w.pushes = keep
        for shard in [s for s, w in work.items() if not (w.acks or w.nacks or w.pushes
                                                         or w.revisits)]:  # fmt: skip
            del work[shard]
        return dropped

    def _next_ready(self, now: float | None) -> float:
        """Seconds until a shard has work, as far as this worker knows."""
        clock = self._clock(now)
        soonest = min(due - clock for due in self._due)
        if soonest == float("inf"):  # no shard has work we know of: look again soon
            soonest = self._looked + self.refresh - clock
        return max(0.0, soonest)

    def _run(self, work: dict[int, _ShardWork], pop_shard: int | None, want: int,
             result: StepResult, *, now: float | None, default_delay: float,
             lease_timeout: float, requeue_limit: int, slack: float,
             seen_mode: str) -> None:  # fmt: skip
        calls = []
        for shard, w in work.items():
            args: list[object] = [_now_arg(now), default_delay, lease_timeout,
                                  want if shard == pop_shard else 0, requeue_limit, slack,
                                  seen_mode, self.hot_per_host, self.shard_budget, SPILL_BATCH,
                                  REFILLS_PER_STEP, self.max_pages_per_host,
                                  len(w.acks), *w.acks,
                                  len(w.nacks)]  # fmt: skip
            for lease, wait in w.nacks:
                args += [lease, max(0.0, float(wait))]
            by_host: dict[str, list[object]] = {}
            for fingerprint, host, priority, wait, data, *_ in w.pushes:
                by_host.setdefault(host, []).extend((
                    fingerprint, max(-MAX_PRIORITY, min(MAX_PRIORITY, priority)),
                    max(0.0, float(wait)), data))  # fmt: skip
            args += [len(w.pushes), len(by_host)]
            for host, entries in by_host.items():
                args += [host, len(entries) // 4, *entries]
            args.append(len(w.revisits))
            for key, host, priority, due, data in w.revisits:
                args += [key, host, max(-MAX_PRIORITY, min(MAX_PRIORITY, priority)),
                         repr(float(due)), data]  # fmt: skip
            calls.append(Call(shard, scripts.STEP, self._shard_keys(shard, seen_mode), args,
                              confirm=bool(w.pushes or w.revisits)))  # fmt: skip
        self.router.run(calls)
        result.calls += len(calls)
        clock = self._clock(now)
        for call in calls:
            if call.error is not None:
                result.failed[call.shard] = call.error
                self._due[call.shard] = clock  # try it again soon
                continue
            if not call.confirmed:
                result.unconfirmed.add(call.shard)
            added, requeued, revisited, next_work, grants, spills, over, *popped = call.result
            result.added += int(added)
            result.over_budget += int(over)
            result.requeued += int(requeued)
            result.revisited += int(revisited)
            if next_work:
                wait = float(next_work)
                self._due[call.shard] = clock + (float("inf") if wait < 0 else wait)
            elif int(added):  # pushed to, not asked: it may have work now
                self._due[call.shard] = min(self._due[call.shard], clock)
            for i in range(0, len(popped), 2):
                lease = f"{call.shard}:{popped[i + 1].decode()}"
                try:
                    result.popped.append((self.decode(popped[i]), lease))
                except RefusedEntry as exc:
                    result.refused.append((lease, str(exc)))
            self._move(call.shard, spills, grants, now=now)

    def _move(self, shard: int, spills: list[bytes], grants: list, *, now: float | None) -> None:
        """What a step call handed this worker to move between the tiers."""
        stats, started = self.tier_stats, time.perf_counter()
        if spills:
            self._spill(shard, spills, now=now)
        moved = time.perf_counter()
        for host, token, room, stale in grants or ():
            self._refill(shard, host.decode(), token.decode(), int(room),
                         [k.decode() for k in stale], now=now)  # fmt: skip
        stats.spill_seconds += moved - started
        stats.refill_seconds += time.perf_counter() - moved

    def _spill(self, shard: int, entries: list[bytes], *, now: float | None) -> None:
        """Store claimed spill entries (``host\\nscore\\n<seq>|data``) in the cold tier, then
        take them out of the spill set.  Storing again is harmless (same row, same key):
        if this worker dies in between, the claim expires and another stores them."""
        crawl = self.keys.crawl
        rows = []
        for entry in entries:
            host, score, member = entry.split(b"\n", 2)
            seq, data = member.split(b"|", 1)
            priority = round((int(seq) - float(score)) / 1e12)
            rows.append((cold_key(crawl, shard, host.decode(), priority, int(seq)), data))
        k = self.keys.shard(shard)
        started = time.perf_counter()
        try:
            self.store.frontier_put(rows)
            self.tier_stats.store_seconds += time.perf_counter() - started
            self._single(shard, scripts.SPILLED,
                         [k.spill, k.spilling, k.cold, k.refill_wait, k.host_queue_prefix],
                         [_now_arg(now), self.hot_per_host, *entries])  # fmt: skip
        except (StoreError, redis.RedisError) as exc:
            self.tier_stats.errors += 1
            logger.warning("Could not move %d requests to the store (retried when their "
                           "claim expires): %s", len(entries), exc)  # fmt: skip
            return
        self.tier_stats.spilled += len(rows)

    def _refill(self, shard: int, host: str, token: str, room: int, stale: list[str], *,
                now: float | None) -> None:  # fmt: skip
        """Move up to ``room`` of ``host``'s next requests from the store into its queue,
        under the refill lease ``token``.

        Exactly once, whatever the moment a worker dies: the rows go into the queue
        in one script that also records their keys in the host's moved set (and skips
        keys already there); only then are they deleted from the store, and only then
        is the moved set cleared, with the lease.  A dead worker's lease expires and
        the next refill of the host first deletes the rows its moved set names
        (``stale``)."""
        k = self.keys.shard(shard)
        started = time.perf_counter()
        try:
            if stale:
                logger.info("Refill of %s: deleting from the store %d rows that a refill "
                            "whose worker died had moved up", host, len(stale))  # fmt: skip
                self.store.frontier_delete(stale)
                self.tier_stats.recovered += len(stale)
            rows = self.store.frontier_scan(host_prefix(self.keys.crawl, shard, host), room)
            self.tier_stats.store_seconds += time.perf_counter() - started
            args: list[object] = [_now_arg(now), host, token, self.hot_per_host,
                                  "1" if len(rows) < room else "0"]  # fmt: skip
            for key, data in rows:
                priority, seq = parse_cold_key(key)[3:]
                args += [key, repr(float(-priority * 10**12 + seq)), b"%d|%s" % (seq, data)]
            moved = int(self._single(shard, scripts.REFILL,
                                     [k.ready, k.next, k.queued, k.reserved, k.cold,
                                      k.cold_total, k.refill_wait, k.host_queue_prefix, k.refill,
                                      k.moved_prefix], args))  # fmt: skip
            if moved < 0:
                logger.warning("Refill of %s: the lease expired (another worker has it)", host)
                return
            started = time.perf_counter()
            if rows:
                self.store.frontier_delete([key for key, _ in rows])
            self.tier_stats.store_seconds += time.perf_counter() - started
            self._single(shard, scripts.REFILLED,
                         [k.refill, k.refilling, k.moved_prefix, k.cold, k.refill_wait,
                          k.host_queue_prefix],
                         [_now_arg(now), host, token, self.hot_per_host])  # fmt: skip
        except (StoreError, redis.RedisError) as exc:
            self.tier_stats.errors += 1
            logger.warning("Could not refill %s from the store (retried when the lease "
                           "expires): %s", host, exc)  # fmt: skip
            return
        self.tier_stats.refilled += moved
        self.tier_stats.refills += 1

    def put_far_revisits(self, revisits: Sequence[tuple[str, str, int, float, bytes]]) -> None:
        """Revisits ``(url key, host, priority, due as Unix time, data)`` due beyond the
        horizon: into the store, until :meth:`move_revisits_up` brings them to Redis."""
        rows = [(revisit_key(self.keys.crawl, due, key),
                 b"%s\n%d\n%s" % (host.encode(), priority, data))
                for key, host, priority, due, data in revisits]  # fmt: skip
        self.store.frontier_put(rows)

    def move_revisits_up(self, horizon: float, *, now: float, batch: int = 500) -> int:
        """Move the revisits the store holds that fall due within ``horizon`` seconds of
        ``now`` (Unix time) into the revisit schedule in Redis; returns how many.

        One worker at a time (a lease in Redis).  Each batch goes to Redis first (a
        revisit is one entry per URL: sending it again changes nothing), then leaves
        the store; a worker that dies between the two leaves rows that the next one
        sends again."""
        k = self.keys
        lease = max(30.0, 10.0 * batch / 1000)
        if not self.server.set(k.revisit_mover, "1", nx=True, px=int(lease * 1000)):
            return 0
        moved = 0
        try:
            while True:
                rows = self.store.frontier_scan(revisit_prefix(k.crawl), batch)
                due_rows = [
                    (key, v) for key, v in rows if parse_revisit_key(key)[0] <= now + horizon
                ]
                if not due_rows:
                    return moved
                revisits = []
                for key, value in due_rows:
                    due, url_key = parse_revisit_key(key)
                    host, priority, data = value.split(b"\n", 2)
                    revisits.append((url_key, host.decode(), int(priority), max(0.0, due - now),
                                     data))  # fmt: skip
                result = self.step(revisits=revisits, pop=False)
                if result.failed:
                    raise next(iter(result.failed.values()))
                self.store.frontier_delete([key for key, _ in due_rows])
                moved += len(due_rows)
                if len(due_rows) < batch:
                    return moved
        finally:
            self.server.delete(k.revisit_mover)

    def _single(self, shard: int, script: Lua, keys: list[str], args: list[object]) -> object:
        (call,) = self.router.run([Call(shard, script, keys, args)])
        if call.error is not None:
            raise call.error
        return call.result

    def renew(self, leases: Sequence[str], timeout: float, *, now: float | None = None) -> None:
        """Leases still in progress (only those that exist) run ``timeout`` seconds more
        (0: they expire now, and their requests go back at the next step)."""
        by_shard: dict[int, list[str]] = {}
        for lease in leases:
            shard, ident = lease_shard(lease)
            by_shard.setdefault(shard, []).append(ident)
        calls = [Call(shard, scripts.RENEW, [self.keys.shard(shard).leases],
                      [_now_arg(now), timeout, *ids])
                 for shard, ids in by_shard.items()]  # fmt: skip
        for call in self.router.run(calls):
            if call.error is not None:
                raise call.error

    def counts(self, *, now: float | None = None) -> tuple[int, int, int]:
        """Over all shards: (queued, including delayed; revisits due now; leases)."""
        calls = []
        for shard in range(self.keys.shards):
            k = self.keys.shard(shard)
            calls.append(Call(shard, scripts.COUNT, [k.queued, k.delayed, k.revisits, k.leases,
                                                  k.cold_total],
                              [_now_arg(now)]))  # fmt: skip
        totals = [0, 0, 0]
        for call in self.router.run(calls):
            if call.error is not None:
                raise call.error
            for i, value in enumerate(call.result):
                totals[i] += int(value)
        return totals[0], totals[1], totals[2]

    def __len__(self) -> int:
        """Requests queued (ready or waiting for their host's turn, or delayed)."""
        return self.counts()[0]

    def idle_check(self, worker_id: str, *, now: float | None = None) -> tuple[int, int, int, int]:
        """Mark ``worker_id`` idle; return (queued, submitted seeds, busy live workers, leases).

        Queued counts revisits that are due now; revisits due later do not keep
        a (non-continuous) crawl open.  The crawl-wide part is read first: a
        worker that is busy there has its work in a shard (a lease, or pushes it
        made before its leases were acknowledged) until it is idle again.
        """
        k = self.keys
        submitted, busy = self._idle(keys=[k.busy, k.start], args=[worker_id, k.worker_prefix])
        queued, due, leases = self.counts(now=now)
        return queued + due, int(submitted), int(busy), leases

    def has_work(self, *, now: float | None = None) -> bool:
        """Whether a step would find work now: a ready host, an expired lease, a due
        delayed request or revisit in some shard, or a submitted seed."""
        if self.server.llen(self.keys.start):
            return True
        return any(wait <= 0 for wait in self.look(now=now))

    def acquire(
        self, host: str, *, default_delay: float, slack: float = 0.0, now: float | None = None
    ) -> float:
        """Take ``host``'s turn to send a request now: 0.0, or the seconds to wait first.

        The hard politeness check, made as the request leaves the worker: a
        request can wait after its pop (for robots.txt, for a busy reactor),
        and the delay counts between sends, whichever workers send them.
        """
        shard = self.keys.shard_of(host)
        k = self.keys.shard(shard)
        wait = self._single(shard, scripts.ACQUIRE, [k.next, k.delay, k.ready],
                            [host, _now_arg(now), default_delay, slack, "take"])  # fmt: skip
        return float(wait)

    def mark_sent(
        self, host: str, *, default_delay: float, slack: float = 0.0, now: float | None = None
    ) -> None:
        """A request to ``host`` really leaves (or its answer came in) now: its next turn
        is no sooner than now + delay (a busy worker can send well after it took its turn)."""
        shard = self.keys.shard_of(host)
        k = self.keys.shard(shard)
        self._single(shard, scripts.ACQUIRE, [k.next, k.delay, k.ready],
                     [host, _now_arg(now), default_delay, slack, "mark"])  # fmt: skip

    def set_delay(
        self,
        host: str,
        delay: float,
        *,
        hold: float = 0.0,
        not_before: float = 0.0,
        now: float | None = None,
    ) -> float:
        """Set ``host``'s delay for every worker; return the delay in force.

        ``hold`` > 0 makes it a back-off: for that many seconds no write lowers the
        delay below it (another worker's healthy answers included).  ``not_before``
        > 0: the host's next turn is at least that many seconds from now.
        """
        shard = self.keys.shard_of(host)
        k = self.keys.shard(shard)
        value = self._single(shard, scripts.SET_DELAY, [k.delay, k.next, k.ready, k.delay_hold],
                             [host, delay, hold, not_before, _now_arg(now)])  # fmt: skip
        return float(value)

    def close(self) -> None:
        """Release what the queue holds besides the Redis client (the router's threads)."""
        self.router.close()

    def clear(self) -> None:
        """Delete every shard's queues, leases, delays and revisits (not the dupefilter)."""
        for k in self.keys.all_shards():
            hosts = [h.decode() for h in self.server.zrange(k.ready, 0, -1)]
            hosts += [h.decode() for h in self.server.hkeys(k.cold)]
            hosts += [h.decode() for h in self.server.zrange(k.refilling, 0, -1)]
            names = [k.host_queue(h) for h in hosts] + [k.overflow_prefix + h for h in hosts]
            names += [k.moved_prefix + h for h in hosts]
            names += [k.ready, k.next, k.leases, k.leased, k.seq, k.queued, k.delayed,
                      k.lease_seq, k.revisits, k.revisit_requests, k.cold, k.cold_total, k.spill,
                      k.spilling, k.refill_wait, k.refilling, k.refill, k.reserved]  # fmt: skip
            self.server.delete(*names)
        if self.store is not None:
            clear_cold(self.store, self.keys.crawl)
