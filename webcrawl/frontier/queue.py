"""The crawl's frontier in Redis: per-host queues in shards, with politeness turns shared
by every worker and leased pops.  A worker's step is one Lua script per shard it touches
(``lua/step.lua``), in one pipeline per Redis node; the entry codec, the tiers and the
turns are in :mod:`.entry`, :mod:`.tiers` and :mod:`.turns`.
"""

from __future__ import annotations

import itertools
import logging
import random
import secrets
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import redis
from scrapy import Request, Spider

from webcrawl.frontier import members, scripts
from webcrawl.frontier.cold import clear_cold
from webcrawl.frontier.entry import EntryCodec, EntryRules, RefusedEntry
from webcrawl.frontier.inspection import shard_counts
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.scripts import now_arg, seen_key
from webcrawl.frontier.shards import Call, ShardRouter
from webcrawl.frontier.tiers import REFILLS_PER_STEP, SPILL_BATCH, Tiers, TierStats
from webcrawl.frontier.turns import Turns
from webcrawl.store.base import Store

logger = logging.getLogger(__name__)

# Whether to ask which of a step's fingerprints Redis already has before the step
# (one more round trip): when this many of its pushes are expected to be duplicates
# (from the share of duplicates in recent steps).  A known duplicate then costs Redis
# a set lookup (SMISMEMBER, or BITFIELD_RO for the Bloom filter) instead of the step
# script reading its whole serialised request.
PRECHECK_DUPLICATES = 8

# Seconds: a shard another worker owns whose due work its owner has not popped for this
# long is popped by this one too, whatever its own shards have (its owner may be dead or
# draining: see HostQueue._pop_order), once per this long while it stays so; and how
# long a round of a busy worker's looks at the others' shards takes (see LOOKERS).
HELP_AFTER = 5.0

# Workers that ask each shard per round of looks, on average: a worker asks its own
# shards at every look (each ``refresh`` second) and the others' in slices that go round
# them once a round (HELP_AFTER seconds while its own shards keep it busy, ``refresh``
# when not), the round stretched by workers / LOOKERS past this many workers.  So with
# up to LOOKERS workers each asks every shard each round, and with more the fleet's
# looks cost about LOOKERS PEEKs per shard and round, not one per worker: help for a
# dead owner's shard and the discovery of others' work by an underloaded worker still
# come from several workers each round (HostQueue._to_ask).
LOOKERS = 8

# A priority outside this range is clamped (Scrapy's are small integers; the cold
# tier's keys hold up to 10**10: cold.py).
MAX_PRIORITY = 8000


def _clamped(priority: int) -> int:
    return max(-MAX_PRIORITY, min(MAX_PRIORITY, int(priority)))


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
    refused: list[tuple[str, RefusedEntry]] = field(default_factory=list)  # (lease, why)
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


def _by_host_and_group(pushes: Sequence[tuple]) -> list[object]:
    """The step script's pushes: how many call numbers they take, how many hosts, every
    push's fingerprint (in the order of the pushes below: the script looks them all up
    in one command), then per host (in the order of its first push) the host and how
    many groups, and per group (a run of its pushes with the same priority, wait and call
    number) its score, the wait, how many, which of the call's numbers (0, 1, ...; only
    when they take more than one), then per push its ``members.indexed`` data: its place
    among the pushes of its number (``PUSHES_PER_CALL`` a number), which orders a host's
    requests of one score."""
    limit = members.PUSHES_PER_CALL
    runs: dict[str, list[list]] = {}
    for at, (fingerprint, host, priority, wait, data, *_) in enumerate(pushes):
        part, index = divmod(at, limit)
        group = (_clamped(priority), max(0.0, float(wait)), part)
        of_host = runs.setdefault(host, [])
        if not of_host or of_host[-1][0] != group:
            of_host.append([group, []])
        of_host[-1][1].append((fingerprint, members.indexed(index + 1, data)))
    numbers = -(-len(pushes) // limit)
    fingerprints: list[object] = []
    groups: list[object] = []
    for host, of_host in runs.items():
        groups += [host, len(of_host)]
        for (priority, wait, part), items in of_host:
            groups += [members.score(priority), wait, len(items)]
            if numbers > 1:
                groups.append(part)
            for fingerprint, data in items:
                fingerprints.append(fingerprint)
                groups.append(data)
    return [numbers, len(runs), *fingerprints, *groups]


class HostQueue:
    """Per-host queues in shards, with cluster-wide politeness and leased pops.

    One instance per worker: it remembers when each shard may next have work
    (from every answer, and from a look at all shards at most every
    ``refresh`` seconds), and pops from the shards that have it in turn.  Within a
    shard hosts take turns by ready time, so a host with 100 000 queued URLs does not
    hold up one with 10.  Every shared time is Redis's clock: workers pass durations.
    """

    def __init__(
        self,
        server: redis.Redis | redis.RedisCluster,
        spider: Spider,
        keys: CrawlKeys,
        rules: EntryRules | None = None,
        *,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
        refresh: float = 1.0,
        store: Store | None = None,
        hot_per_host: int = 0,
        hot_budget: int = 0,
        max_pages_per_host: int = 0,
        mover: Callable[[Callable[[], None]], None] | None = None,
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
        self.entries = EntryCodec(spider, rules)
        self.router = ShardRouter(server, keys, wait_replicas, wait_timeout)
        # crawl-wide keys: one slot, redis-py's way
        self._idle = server.register_script(scripts.IDLE.source)
        self.refresh = refresh
        # per shard: when it may next have work (the clock of :meth:`_clock`); inf:
        # nothing as far as we know (another worker's push is found by the next look)
        self._due = [0.0] * keys.shards
        self._looked = float("-inf")  # when this worker last looked (_look_if_due)
        self._counted = float("-inf")  # when crawl_done last counted the shards
        self._asked = [float("-inf")] * keys.shards  # ... when it last asked each shard
        self._tried = [float("-inf")] * keys.shards  # ... when it last popped each
        self._unreachable: set[int] = set()  # shards whose last call failed
        self._cursor = random.randrange(keys.shards)  # workers start on different shards
        # where the round of looks at the others' shards stands, and the part of a shard
        # it owes the round (looks come at uneven times)
        self._ring = random.randrange(keys.shards)
        self._owed = 0.0
        # the shards this worker owns (webcrawl/frontier/ownership.py): popped first;
        # and how many workers pop the crawl (they share the looks: LOOKERS)
        self._owned: frozenset[int] = frozenset()
        self._workers = 1
        # shards whose due work had waited HELP_AFTER seconds for their owner's pop when
        # last asked (asked again each HELP_AFTER until they have not); of them, those not
        # popped by this worker since
        self._helping: set[int] = set()
        self._neglected: set[int] = set()
        self._dup_share = 0.5  # of recent steps' fingerprinted pushes: duplicates
        self._precheck = True  # False: the server lacks SMISMEMBER (Redis < 6.2)
        self.store = store
        self.hot_per_host = hot_per_host
        # the budget of a shard: hosts spread evenly over the shards
        self.shard_budget = -(-hot_budget // keys.shards) if hot_budget else 0
        self.max_pages_per_host = max_pages_per_host  # 0: no limit
        self.tiers = Tiers(server, self.router, keys, store, hot_per_host)
        # runs the spills and refills a step hands this worker (store I/O): a thread of
        # the caller's (the scheduler's, off the reactor), or here and now
        self.mover = mover
        # this worker's lease ids, spill claims and refill leases are its own, even after
        # a failover that loses some increments of the counter they are numbered by (a
        # stale id must never name another worker's lease): 64 random bits
        self.id_prefix = secrets.token_hex(8) + "."
        # ... and so is each step's part of them: a failover (or a restart) that loses
        # increments makes the counter repeat numbers this worker already used
        self._steps = itertools.count(1)
        self.turns = Turns(self.router, keys)

    @property
    def tier_stats(self) -> TierStats:
        """What this worker moved between Redis and the store."""
        return self.tiers.stats

    # -- entries (entry.py) --------------------------------------------------

    def encode(self, request: Request) -> bytes:
        """The queue entry of ``request`` (:meth:`EntryCodec.encode`)."""
        return self.entries.encode(request)

    def decode(self, member: bytes) -> Request:
        """The request in a queue member (:meth:`EntryCodec.decode`); raises
        :class:`RefusedEntry` for one this worker will not read."""
        return self.entries.decode(member)

    # -- operations ----------------------------------------------------------

    @staticmethod
    def _clock(now: float | None) -> float:
        return time.monotonic() if now is None else now

    def look(
        self, *, now: float | None = None, shards: Collection[int] | None = None
    ) -> list[float]:
        """Ask every shard (or those of ``shards``) when it has work (one round trip per
        node); returns and remembers seconds from now per shard asked (inf: none), and
        which of them have had work due for ``HELP_AFTER`` seconds that their owner has
        not popped."""
        args = [now_arg(now), self.shard_budget]
        asked = range(self.keys.shards) if shards is None else sorted(shards)
        calls = [scripts.PEEK.call(self.keys.shard(s), args) for s in asked]
        self.router.run(calls)
        clock = self._clock(now)
        if shards is None:  # (the round of looks starts again: _to_ask)
            self._looked, self._owed = clock, 0.0
        waits = []
        for call in calls:
            self._asked[call.shard] = clock
            self._helping.discard(call.shard)
            self._neglected.discard(call.shard)
            if call.error is not None:
                wait = 0.0  # unknown: try it
                self._unreachable.add(call.shard)
            else:
                wait, waited = (float(x) for x in call.result)
                wait = float("inf") if wait < 0 else wait
                self._unreachable.discard(call.shard)
                if waited >= HELP_AFTER and call.shard not in self._owned:
                    self._helping.add(call.shard)
                    self._neglected.add(call.shard)
            self._due[call.shard] = clock + wait
            waits.append(wait)
        if shards is None and all(c.error is not None for c in calls):
            raise calls[0].error  # (its own shards' node down: the step tries the others)
        return waits

    def prefer(self, shards: frozenset[int], workers: int = 1) -> None:
        """Pop from ``shards`` first, and from the others when none of these has work,
        or when one of them has had work due for ``HELP_AFTER`` seconds that its owner
        has not popped: a preference, not a lock (any worker may pop any shard).
        ``workers``: how many pop the crawl (they share the looks at each shard)."""
        self._owned = shards
        self._workers = max(1, workers)

    def _pop_order(self, clock: float) -> list[int]:
        """Shards that may have work now, in turn from the cursor: the preferred first,
        but for others' whose due work their owner had not popped for ``HELP_AFTER``
        seconds at the last look (an owner that died or drains for its shutdown gets
        help before the registry moves its shards), which go before all but its own
        shards whose work it has known due and not tried for ``HELP_AFTER / 2`` seconds
        (a worker that helps before those makes its own look neglected to the others,
        and helping each other, the workers would go on popping only each other's
        shards).  An owner that keeps popping its shard gets none, however much work it
        has: every worker is as busy with its own, and a helper's pages are pages whose
        links its seen cache does not know."""
        n = self.keys.shards
        order = [(self._cursor + i) % n for i in range(n)]
        due = [s for s in order if self._due[s] <= clock]
        owned = self._owned
        if not owned:
            return due
        neglected = self._neglected
        tried, due_at = self._tried, self._due
        overdue = {
            s for s in due if s in owned and clock - max(due_at[s], tried[s]) >= HELP_AFTER / 2
        }
        return (
            [s for s in due if s in overdue]
            + [s for s in due if s in neglected and s not in owned]
            + [s for s in due if s in owned and s not in overdue]
            + [s for s in due if s not in neglected and s not in owned]
        )

    def step(
        self,
        *,
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
        strict: bool = False,
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
        (:class:`~webcrawl.frontier.tiers.Tiers`, after the step's calls).  Popped entries
        that cannot be read are refused: listed in ``refused``, for the caller to
        acknowledge (drop).

        A shard whose call fails is listed in ``failed`` and nothing of its part
        was applied; if every call fails, the first error is raised.  A shard whose
        pushes or revisits fewer replicas than FRONTIER_REDIS_WAIT_REPLICAS confirmed
        is listed in ``unconfirmed`` (``strict``: all of them, connected now or not,
        for a caller that deletes the store's copy next).
        """
        work = self._group(acks, nacks, pushes, revisits)
        want = int(pop)
        result = StepResult(pushed=len(pushes))
        filtered = sum(1 for p in pushes if p[0])
        if self._precheck and filtered * self._dup_share >= PRECHECK_DUPLICATES:
            result.known = self._drop_known(work, seen_mode)
        clock = self._clock(now)
        if want and self._look_if_due(clock, now):
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
                self._tried[pop_shard] = self._clock(now)
                self._neglected.discard(pop_shard)  # popped now
                self._cursor = (pop_shard + 1) % self.keys.shards
            if not work:
                break
            self._run(
                work,
                pop_shard,
                want,
                result,
                now=now,
                default_delay=default_delay,
                lease_timeout=lease_timeout,
                requeue_limit=requeue_limit,
                slack=slack,
                seen_mode=seen_mode,
                strict=strict,
            )
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

    def _own_busy(self, clock: float) -> bool:
        """Whether one of this worker's own shards has work within ``refresh`` seconds
        (one that did not answer its last call does not count)."""
        soon = clock + self.refresh
        return any(self._due[s] <= soon and s not in self._unreachable for s in self._owned)

    def _look_if_due(self, clock: float, now: float | None) -> bool:
        """Look each ``refresh`` seconds, at the shards :meth:`_to_ask` names, so that no
        shard with work is left out.  A look costs each shard asked a PEEK (~8 us of Redis
        CPU and as much of the worker's): a hundred workers over 128 shards asking all of
        them every second would take a tenth of a Redis core.  Whether it looked."""
        if self._looked <= clock < self._looked + self.refresh:
            return False
        self.look(now=now, shards=self._to_ask(clock))
        self._looked = clock
        return True

    def _to_ask(self, clock: float) -> list[int] | None:
        """The shards a look asks (None: all): its own, but those it knows to have work
        now (its steps pop them, and learn from their answers), and while they keep it
        busy each at most every ``HELP_AFTER / 2`` seconds (what its own pushes add is
        known without asking; another worker's push there is found before its due work
        has waited long enough to look neglected to the others); the others' whose due
        work had waited ``HELP_AFTER`` seconds for their owner when last asked, that long
        ago (help then goes on while their owner is dead or draining, a step each
        ``HELP_AFTER``); and the next slice of the round over the others' shards, sized
        so that the round takes ``HELP_AFTER`` seconds while its own shards keep this
        worker busy (``refresh`` when not) times workers / ``LOOKERS`` past ``LOOKERS``
        workers.  A worker finds new work in another's shard that much later at most
        (the shard's owner pops it meanwhile)."""
        n = self.keys.shards
        owned = self._owned
        busy = self._own_busy(clock)
        base = HELP_AFTER if busy else self.refresh
        span = base * max(1.0, self._workers / LOOKERS)  # seconds a round takes
        if not self._looked <= clock < self._looked + span:
            return None  # (the first look; a round's time since the last; a clock gone back)
        helping = self._helping
        ring = n - len(owned | helping)  # the others' shards that it is not helping
        self._owed += ring * (clock - self._looked) / span
        take = min(ring, int(self._owed))
        self._owed -= take
        # its own shards but those it knows to have work now (a step pops them, and its
        # answer says when they have more); while busy, each every HELP_AFTER / 2
        every = HELP_AFTER / 2 if busy else 0.0
        ask = {s for s in owned if self._due[s] > clock and self._asked[s] + every <= clock}
        ask.update(s for s in helping if self._asked[s] + HELP_AFTER <= clock)
        shard = self._ring
        while take:
            if shard not in owned and shard not in helping:
                ask.add(shard)
                take -= 1
            shard = (shard + 1) % n
        self._ring = shard
        return None if len(ask) == n else sorted(ask)

    def _group(
        self,
        acks: Sequence[str],
        nacks: Sequence[tuple[str, float]],
        pushes: Sequence[tuple],
        revisits: Sequence[tuple],
    ) -> dict[int, _ShardWork]:
        """What a step has for each shard."""
        work: dict[int, _ShardWork] = {}
        for lease in acks:
            shard, ident = lease_shard(lease)
            work.setdefault(shard, _ShardWork()).acks.append(ident)
        for lease, wait in nacks:
            shard, ident = lease_shard(lease)
            work.setdefault(shard, _ShardWork()).nacks.append((ident, wait))
        sent: set[bytes] = set()
        for entry in pushes:
            if fp := entry[0]:  # a step's first push of a fingerprint only (step.lua)
                fp = fp.encode() if isinstance(fp, str) else bytes(fp)  # (one to Redis)
                if fp in sent:
                    continue
                sent.add(fp)
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
            key = seen_key(self.keys.shard(shard), seen_mode)
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
                    logger.warning(
                        "This Redis lacks %s (Redis 6.2 has it): duplicates are "
                        "found by the step script alone",
                        call.script,
                    )
                continue
            w = work[call.shard]
            known = _known([p[0] for p in w.pushes if p[0]], call.result, seen_mode)
            if known:
                keep = [p for p in w.pushes if not p[0] or p[0] not in known]
                dropped += len(w.pushes) - len(keep)
                w.pushes = keep
        for shard in [
            s for s, w in work.items() if not (w.acks or w.nacks or w.pushes or w.revisits)
        ]:
            del work[shard]
        return dropped

    def _next_ready(self, now: float | None) -> float:
        """Seconds until a shard has work, as far as this worker knows."""
        clock = self._clock(now)
        soonest = min(self._due)
        if soonest == float("inf") or self._owned or self._workers > LOOKERS:
            # the next look may find work (when looks ask only some of the others'
            # shards, in one it has not asked since: see _to_ask)
            soonest = min(soonest, self._looked + self.refresh)
        return max(0.0, soonest - clock)

    def _run(
        self,
        work: dict[int, _ShardWork],
        pop_shard: int | None,
        want: int,
        result: StepResult,
        *,
        now: float | None,
        default_delay: float,
        lease_timeout: float,
        requeue_limit: int,
        slack: float,
        seen_mode: str,
        strict: bool,
    ) -> None:
        calls = []
        for shard, w in work.items():
            args: list[object] = [
                now_arg(now),
                default_delay,
                lease_timeout,
                want if shard == pop_shard else 0,
                int(requeue_limit),  # (LIMIT takes it and SPILL_BATCH as they come)
                slack,
                seen_mode,
                self.hot_per_host,
                self.shard_budget,
                int(SPILL_BATCH),
                REFILLS_PER_STEP,
                self.max_pages_per_host,
                f"{self.id_prefix}{next(self._steps)}.",
                1 if not self._owned or shard in self._owned else 0,
                len(w.acks),
                *w.acks,
                len(w.nacks),
            ]
            for lease, wait in w.nacks:
                args += [lease, max(0.0, float(wait))]
            args += [len(w.pushes), *_by_host_and_group(w.pushes)]
            args.append(len(w.revisits))
            for key, host, priority, due, data in w.revisits:
                args += [
                    key,
                    host,
                    _clamped(priority),
                    repr(float(due)),
                    data,
                ]
            calls.append(
                scripts.STEP.call(
                    self.keys.shard(shard),
                    args,
                    seen_mode=seen_mode,
                    confirm=bool(w.pushes or w.revisits),
                    strict=strict,
                )
            )
        self.router.run(calls)
        result.calls += len(calls)
        clock = self._clock(now)
        for call in calls:
            if call.error is not None:
                result.failed[call.shard] = call.error
                self._due[call.shard] = clock  # try it again soon
                self._unreachable.add(call.shard)
                continue
            self._unreachable.discard(call.shard)
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
                    result.refused.append((lease, exc))
            self._move(call.shard, spills, grants, now)

    def _move(self, shard: int, spills: list, grants: list, now: float | None) -> None:
        if not spills and not grants:
            return

        def move() -> None:
            self.tiers.move(shard, spills, grants, now=now)
            # a refill may have given the shard work: the next step looks at it
            self._due[shard] = min(self._due[shard], self._clock(now))

        if self.mover is None:
            move()
        else:
            self.mover(move)

    # -- the cold tier (tiers.py) ---------------------------------------------

    def put_far_revisits(self, revisits: Sequence[tuple[str, str, int, float, bytes]]) -> None:
        """Revisits ``(url key, host, priority, due as Unix time, data)`` due beyond the
        horizon: into the store, until :meth:`move_revisits_up` brings them to Redis."""
        self.tiers.put_far_revisits(revisits)

    def move_revisits_up(
        self, horizon: float, *, now: float | None = None, batch: int = 500
    ) -> int:
        """Move the revisits the store holds that fall due within ``horizon`` seconds
        into the revisit schedule in Redis; returns how many (``now``: a test's clock,
        for Redis's too
        (:meth:`Tiers.move_revisits_up`)."""

        def schedule(revisits: list[tuple[str, str, int, float, bytes]]) -> bool:
            result = self.step(revisits=revisits, pop=False, now=now, strict=True)
            if result.failed:
                raise next(iter(result.failed.values()))
            return not result.unconfirmed

        return self.tiers.move_revisits_up(horizon, schedule, now=now, batch=batch)

    def renew(
        self,
        leases: Sequence[str],
        timeout: float,
        *,
        holds: Sequence[tuple[str, str]] = (),
        now: float | None = None,
    ) -> None:
        """Leases still in progress (only those that exist) run ``timeout`` seconds more
        (0: they expire now, and their requests go back at the next step, which pops
        their shards); so do the turns held, ``(host, holder)``, whose requests are
        still in flight."""
        by_shard: dict[int, tuple[list[str], list[str]]] = {}
        for lease in leases:
            shard, ident = lease_shard(lease)
            by_shard.setdefault(shard, ([], []))[0].append(ident)
        for host, holder in holds:
            shard = self.keys.shard_for(host).shard
            by_shard.setdefault(shard, ([], []))[1].extend((host, holder))
        calls = [
            scripts.RENEW.call(
                self.keys.shard(shard), [now_arg(now), timeout, len(ids), *ids, *pairs]
            )
            for shard, (ids, pairs) in by_shard.items()
        ]
        for call in self.router.run(calls):
            if call.error is not None:
                raise call.error
        if timeout <= 0:
            clock = self._clock(now)
            for shard, (ids, _) in by_shard.items():
                if ids:
                    self._due[shard] = min(self._due[shard], clock)

    def counts(self, *, now: float | None = None) -> tuple[int, int, int]:
        """Over all shards: (queued: host queues, delayed and the cold tier; revisits due
        now; leases)."""
        counts = shard_counts(self.router, self.keys, now)
        return (
            sum(hot + cold for hot, cold, _, _ in counts),
            sum(due for _, _, due, _ in counts),
            sum(leases for _, _, _, leases in counts),
        )

    def __len__(self) -> int:
        """Requests queued (ready or waiting for their host's turn, or delayed)."""
        return self.counts()[0]

    def idle_check(
        self, worker_id: str, *, now: float | None = None
    ) -> tuple[int | None, int, int, int | None]:
        """Mark ``worker_id`` idle; return (queued, submitted seeds, busy live workers,
        leases).

        Queued counts revisits that are due now; revisits due later do not keep
        a (non-continuous) crawl open.  The crawl-wide part is read first: a
        worker that is busy there has its work in a shard (a lease, or pushes it
        made before its leases were acknowledged) until it is idle again.  So while
        another worker is busy the shards are not counted (queued and leases are None):
        an idle worker checks each time Scrapy finds it with nothing to do, and counting
        every shard costs Redis a call a shard.
        """
        submitted, busy = self._mark_idle(worker_id)
        if busy:
            return None, submitted, busy, None
        queued, due, leases = self.counts(now=now)
        return queued + due, submitted, busy, leases

    def crawl_done(self, worker_id: str, *, now: float | None = None) -> bool:
        """Mark ``worker_id`` idle; whether the crawl has no work left anywhere (what
        :meth:`idle_check` counts is all 0).  The shards are counted only when no other
        worker is busy and no seed waits: an idle worker that polls while others crawl
        reads the crawl-wide keys, not every shard.  Nor more than once per
        ``HELP_AFTER`` seconds: when they had work, it is queued for later or a dead
        worker's leases wait to expire, which the looks find; when they had none and the
        worker did not close, something else keeps it open (a final re-probe), which
        wakes it when it ends.  When the last busy worker finishes, the shards are
        counted at once."""
        if any(self._mark_idle(worker_id)):
            self._counted = float("-inf")
            return False
        clock = self._clock(now)
        if self._counted <= clock < self._counted + HELP_AFTER:
            return False
        self._counted = clock
        return not any(self.counts(now=now))

    def _mark_idle(self, worker_id: str) -> tuple[int, int]:
        """The crawl-wide half of an idle check: (submitted seeds, busy live workers)."""
        k = self.keys
        submitted, busy = self._idle(
            keys=scripts.IDLE.keys_for(k), args=[worker_id, k.worker_prefix]
        )
        return int(submitted), int(busy)

    def has_work(
        self, *, now: float | None = None, seeds: bool = True, within: float = 0.0
    ) -> bool:
        """Whether a step may find work now (or ``within`` seconds), as far as this worker
        knows (a ready host, an expired lease, a due delayed request or revisit in some
        shard), looking when a look is due (:meth:`_to_ask`: an idle worker that polls
        asks no more than one that steps); or, with ``seeds``, whether a seed was
        submitted."""
        if seeds and self.server.llen(self.keys.start):
            return True
        clock = self._clock(now)
        if self._look_if_due(clock, now):
            clock = self._clock(now)
        return min(self._due) <= clock + within

    # -- politeness turns (turns.py) ------------------------------------------

    def set_delay(
        self,
        host: str,
        delay: float,
        *,
        hold: float = 0.0,
        not_before: float = 0.0,
        now: float | None = None,
    ) -> float:
        """Set ``host``'s delay for every worker; return the delay in force
        (:meth:`Turns.set_delay`)."""
        return self.turns.set_delay(host, delay, hold=hold, not_before=not_before, now=now)

    def close(self) -> None:
        """Release what the queue holds besides the Redis client (the router's threads)."""
        self.router.close()

    def clear(self) -> None:
        """Delete every shard's queues, leases, delays and revisits (not the dupefilter)."""
        for k in self.keys.all_shards():
            hosts = [h.decode() for h in self.server.zrange(k.ready, 0, -1)]
            hosts += [h.decode() for h in self.server.hkeys(k.cold)]
            hosts += [h.decode() for h in self.server.zrange(k.refilling, 0, -1)]
            names = [k.host_queue(h) for h in hosts] + [k.moved_prefix + h for h in hosts]
            names += [
                k.ready,
                k.next,
                k.turn_holds,
                k.leases,
                k.leased,
                k.seq,
                k.queued,
                k.delayed,
                k.lease_seq,
                k.popped,
                k.revisits,
                k.revisit_requests,
                k.cold,
                k.cold_total,
                k.spill,
                k.spilling,
                k.spill_claim,
                k.spill_live,
                k.spill_done,
                k.refill_wait,
                k.refilling,
                k.refill,
                k.reserved,
                k.replicated,
            ]
            self.server.delete(*names)
        if self.store is not None:
            clear_cold(self.store, self.keys.crawl)
