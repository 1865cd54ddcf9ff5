"""The two tiers: requests over a host's or a shard's limit move from Redis to the
store's frontier table (spills) and back as the host's queue drains (refills); revisits
due beyond the horizon wait in the store too."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from webcrawl.frontier import members, scripts
from webcrawl.frontier.cold import (
    check_host,
    cold_key,
    host_prefix,
    parse_cold_key,
    parse_revisit_key,
    revisit_key,
    revisit_prefix,
)
from webcrawl.frontier.keys import CrawlKeys, ShardKeys
from webcrawl.frontier.lock import RedisLock
from webcrawl.frontier.scripts import now_arg
from webcrawl.frontier.shards import ShardRouter
from webcrawl.store.base import Store, StoreError

logger = logging.getLogger(__name__)

# Spilled requests a worker takes to the store at once (and the spill set's size from
# which a step that only pushes takes them); refill leases one step hands out per shard.
SPILL_BATCH = 500
REFILLS_PER_STEP = 4


def _unreadable_key(key: str) -> ValueError | None:
    """Why ``key`` is not a cold key (None: it is one)."""
    try:
        parse_cold_key(key)
    except ValueError as exc:
        return exc
    return None


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
    unreadable: int = 0  # spill entries and store rows no worker can read, dropped
    outages: int = 0  # times moves began to fail (logged once each, until one succeeds)


class Tiers:
    """A worker's moves between the shards in Redis and the store (one per HostQueue)."""

    def __init__(
        self,
        server: redis.Redis | redis.RedisCluster,
        router: ShardRouter,
        keys: CrawlKeys,
        store: Store | None,
        hot_per_host: int,
    ) -> None:
        self.server = server
        self.router = router
        self.keys = keys
        self.store = store
        self.hot_per_host = hot_per_host
        self.stats = TierStats()
        self._failing = False  # an outage is going on (logged once)

    def _failed(self, what: str, exc: Exception | str) -> None:
        """A move failed: counted each time, logged once per outage (it is retried when
        its claim or lease expires, by this worker or another)."""
        self.stats.errors += 1
        if self._failing:
            logger.debug("Could not %s: %s", what, exc)
            return
        self._failing = True
        self.stats.outages += 1
        logger.warning(
            "Could not %s: %s (retried when its claim or lease expires; further "
            "failures are not logged until a move succeeds)",
            what,
            exc,
        )

    def _unreadable(self, what: str, bad: Sequence[tuple[bytes | str, Exception]]) -> None:
        """Records no worker can read (a spill entry in Redis, a row in the store): each
        would fail its whole move again at every try, and stall what moves with it, so
        they are dropped, logged and counted (``frontier/tier_unreadable``)."""
        self.stats.unreadable += len(bad)
        record, exc = bad[0]
        logger.error(
            "Dropped %d unreadable %s (corrupted, or not written by a worker), e.g. %.200r: %s",
            len(bad),
            what,
            record,
            exc,
        )

    def _succeeded(self) -> None:
        if self._failing:
            self._failing = False
            logger.info("Moves between Redis and the store work again")

    def move(self, shard: int, spills: list[bytes], grants: list, *, now: float | None) -> None:
        """What a step call handed this worker to move between the tiers."""
        stats, started = self.stats, time.perf_counter()
        if spills:  # [claim token, entries]
            self.spill(shard, spills[0].decode(), spills[1], now=now)
        moved = time.perf_counter()
        for host, token, room, stale in grants or ():
            self.refill(
                shard,
                host.decode(errors="surrogateescape"),  # (checked by refill)
                token.decode(),
                int(room),
                [k.decode(errors="surrogateescape") for k in stale],
                now=now,
            )
        stats.spill_seconds += moved - started
        stats.refill_seconds += time.perf_counter() - moved

    def spill(self, shard: int, claim: str, entries: list[bytes], *, now: float | None) -> None:
        """Store spill entries (``host\\nscore\\nmember``: members.py) claimed under the token
        ``claim`` in the cold tier, then take them out of the spill set (if the claim is
        still ours).  The claim is checked first (CLAIMED), and confirmed by the replicas:
        rows of a claim a failover lost would be counted and refilled by nobody.  If this
        worker dies or stalls after the check, the claim expires and another worker's
        claim takes the entries: ours is dead, and rows written under it, whenever they
        land, are never refilled (REFILL skips them; the refill deletes them)."""
        crawl = self.keys.crawl
        rows, read, unreadable = [], [], []
        for entry in entries:
            try:
                host, score, member = entry.split(b"\n", 2)
                seq, data = members.split(member)
                priority = members.priority_of(score)
                key = cold_key(crawl, shard, host.decode(), priority, seq, claim=claim)
            except (ValueError, OverflowError) as exc:  # (UnicodeDecodeError is one)
                unreadable.append((entry, exc))
            else:
                rows.append((key, data))
                read.append(entry)
        k = self.keys.shard(shard)
        if not self._claim_holds(k, claim, entries, now=now):
            return
        started = time.perf_counter()
        try:
            if rows:
                self.store.frontier_put(rows)
            self.stats.store_seconds += time.perf_counter() - started
            args = [now_arg(now), self.hot_per_host, claim, len(unreadable), *read]
            done = scripts.SPILLED.run(self.router, k, [*args, *(e for e, _ in unreadable)])
        except (StoreError, redis.RedisError) as exc:
            self._failed(f"move {len(entries)} requests to the store", exc)
            return
        self._succeeded()
        self.stats.spilled += len(rows)
        if unreadable and done:  # they left the spill set with the rest, stored nowhere
            self._unreadable(f"spill entries of shard {shard}", unreadable)

    def _claim_holds(
        self, k: ShardKeys, claim: str, entries: list[bytes], *, now: float | None
    ) -> bool:
        """Whether spill ``claim`` is still live, as FRONTIER_REDIS_WAIT_REPLICAS replicas
        have it (CLAIMED): rows of a claim a failover lost would be counted and refilled
        by nobody.  Without replicas to wait for, no failover can lose it, and the check
        is skipped (a row of a dead claim is garbage anyway: spill_done)."""
        if self.router.wait_replicas <= 0:
            return True
        what = f"move {len(entries)} requests to the store"
        try:
            args = [now_arg(now), claim, entries[0]]
            live, confirmed = scripts.CLAIMED.run_confirmed(self.router, k, args)
        except redis.RedisError as exc:
            self._failed(what, exc)
            return False
        if not live:  # expired (and maybe taken again), or lost in a failover
            logger.info(
                "Spill claim %s (%d requests) is not live any more: it expired, or a "
                "failover lost it; another claim stores them",
                claim,
                len(entries),
            )
            return False
        if not confirmed:  # a failover could still lose it: it expires and is taken again
            why = "its claim was not confirmed by the replicas (FRONTIER_REDIS_WAIT_REPLICAS)"
            self._failed(what, why)
            return False
        return True

    def refill(
        self, shard: int, host: str, token: str, room: int, stale: list[str], *, now: float | None
    ) -> None:
        """Move up to ``room`` of ``host``'s next requests from the store into its queue,
        under the refill lease ``token``.

        Exactly once, whatever the moment a worker dies: the rows go into the queue
        in one script that also records their keys in the host's moved set (and skips
        keys already there); only then, once Redis's replicas have that
        (FRONTIER_REDIS_WAIT_REPLICAS), are they deleted from the store, and only then
        is the moved set cleared, with the lease.  A dead worker's lease expires and
        the next refill of the host deletes the rows its moved set names (``stale``),
        after its own move is confirmed (which confirms the dead one's too).  Rows of a
        spill claim not completed yet (they may be stored again under another claim)
        stay in the store, for a later refill."""
        k = self.keys.shard(shard)
        name = host.encode(errors="surrogateescape")  # the host as Redis has it
        prefix = None
        try:
            prefix = host_prefix(self.keys.crawl, shard, host)
        except ValueError as exc:  # (a corrupted count in Redis)
            # a host no request has: nothing to read, and the refill tells Redis so (its
            # cold count is taken off, the lease given back: not granted again for ever)
            self._unreadable(f"refill lease of shard {shard}", [(host, exc)])
        checked = [(key, _unreadable_key(key)) for key in stale]  # (a moved set's keys)
        unreadable = [(key, why) for key, why in checked if why]
        stale = [key for key, why in checked if not why]
        started = time.perf_counter()
        try:
            rows = [] if prefix is None else self.store.frontier_scan(prefix, room)
            self.stats.store_seconds += time.perf_counter() - started
            args: list[object] = [
                now_arg(now),
                name,
                token,
                self.hot_per_host,
                "1" if len(rows) < room else "0",
            ]
            for key, data in rows:  # (unreadable ones are deleted with the rows moved)
                try:
                    priority, seq = parse_cold_key(key)[3:5]
                except ValueError as exc:
                    unreadable.append((key, exc))
                    continue
                args += [key, members.score(priority), members.member(seq, data)]
            result, confirmed = scripts.REFILL.run_confirmed(self.router, k, args)
            moved, keep = int(result[0]), {key.decode() for key in result[1:]}
            if moved == -1:
                logger.warning("Refill of %s: the lease expired (another worker has it)", host)
                return
            if not confirmed:
                # a failover now could lose the move: the rows stay in the store (and in
                # the moved set), for the next refill of the host to delete or move again
                logger.warning(
                    "Refill of %s: its move was not confirmed by the replicas "
                    "(FRONTIER_REDIS_WAIT_REPLICAS); the rows stay in the store "
                    "until the lease expires",
                    host,
                )
                self.stats.errors += 1
                return
            done = ({key for key, _ in rows} - keep) | set(stale)
            started = time.perf_counter()
            if stale:
                logger.info(
                    "Refill of %s: deleting from the store %d rows that a refill "
                    "whose worker died had moved up",
                    host,
                    len(stale),
                )
                self.stats.recovered += len(stale)
            if done:
                self.store.frontier_delete(sorted(done))
            self.stats.store_seconds += time.perf_counter() - started
            if unreadable:
                self._unreadable(f"rows of {host} in the store", unreadable)
            # moved nothing for claims in progress: ask again only if one of them is done
            again = (
                ["0", *{key.rpartition("/")[2] for key in keep}] if moved == 0 and keep else ["1"]
            )
            scripts.REFILLED.run(
                self.router, k, [now_arg(now), name, token, self.hot_per_host, *again]
            )
        except (StoreError, redis.RedisError) as exc:
            self._failed(f"refill {host} from the store", exc)
            return
        self._succeeded()
        self.stats.refilled += moved
        self.stats.refills += 1

    def put_far_revisits(self, revisits: Sequence[tuple[str, str, int, float, bytes]]) -> None:
        """Revisits ``(url key, host, priority, due as Unix time, data)`` due beyond the
        horizon: into the store, until :meth:`move_revisits_up` brings them to Redis."""
        rows = [
            (
                revisit_key(self.keys.crawl, due, key),
                b"%s\n%d\n%s" % (host.encode(), priority, data),
            )
            for key, host, priority, due, data in revisits
        ]
        self.store.frontier_put(rows)

    def move_revisits_up(
        self,
        horizon: float,
        schedule: Callable[[list[tuple[str, str, int, float, bytes]]], bool],
        *,
        now: float | None,
        batch: int = 500,
    ) -> int:
        """Move the revisits the store holds that fall due within ``horizon`` seconds of
        now (``now``: a test's clock, else this worker's Unix time and Redis's clock) into
        the revisit schedule in Redis (``schedule``: a step that
        raises if it failed, and says whether the replicas confirmed it); returns how many.

        One worker at a time (a :class:`RedisLock`, released by its holder only).  Each
        batch goes to Redis first (a revisit is one entry per URL: sending it again
        changes nothing), then leaves the store, once Redis's replicas have it; a
        worker that dies between the two leaves rows that the next one sends again."""
        k = self.keys
        lock = RedisLock(self.server, k.revisit_mover, max(30.0, 10.0 * batch / 1000))
        if not lock.acquire(now=now):
            return 0
        moved = 0
        try:
            while True:
                clock = time.time() if now is None else now
                rows = self.store.frontier_scan(revisit_prefix(k.crawl), batch)
                due_rows, revisits, unreadable = [], [], []
                for key, value in rows:
                    try:
                        due, url_key = parse_revisit_key(key)
                        host, priority, data = value.split(b"\n", 2)
                        host_key, prio = check_host(host.decode()), int(priority)
                    except ValueError as exc:  # (UnicodeDecodeError is one)
                        unreadable.append((key, exc))
                        continue
                    if due <= clock + horizon:
                        due_rows.append((key, value))
                        revisits.append((url_key, host_key, prio, max(0.0, due - clock), data))
                if unreadable:  # each would fail every move after: none would move again
                    self.store.frontier_delete([key for key, _ in unreadable])
                    self._unreadable("revisit rows in the store", unreadable)
                if not due_rows:
                    if unreadable and len(rows) == batch and lock.extend(now=now):
                        continue  # the rows after them
                    return moved
                if not schedule(revisits):
                    logger.warning(
                        "Revisits moved to Redis were not confirmed by its replicas "
                        "(FRONTIER_REDIS_WAIT_REPLICAS): they stay in the store "
                        "until the next move"
                    )
                    return moved
                self.store.frontier_delete([key for key, _ in due_rows])
                if not lock.extend(now=now):
                    return moved + len(due_rows)  # another worker moves the rest
                moved += len(due_rows)
                if len(due_rows) + len(unreadable) < batch:
                    return moved
        finally:
            lock.release(now=now)
