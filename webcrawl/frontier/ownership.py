"""Which shards each live worker prefers: rendezvous hashing with bounded loads.

A worker pops from the shards it owns first, and from the others' when its own have
nothing ready or when one's due work has waited a few seconds for its owner
(``HostQueue._pop_order``),
so that each host's pages are mostly fetched by one worker and that worker's seen cache
knows the host's links (BUbiNG's, Nutch's and StormCrawler's
partitioning by host).  Ownership is a preference, never a lock: any worker may pop any
shard, and the atomic steps keep the protocol safe whoever pops.

Every worker computes the same owners from the same sorted list of live worker ids
(the registry, :class:`~webcrawl.frontier.workers.WorkerRegistry`): each shard ranks the
workers by a hash of (worker, shard) and goes to the best-ranked one that holds fewer
than its even share (``shards // workers``, or one more for ``shards % workers`` of
them), the shards taken in order of their own best score.  Without the cap, 16 shards
over 4 workers give one worker 7 and another 1 as often as not; with it, each holds 4.
A worker that joins or leaves moves about ``shards / workers`` shards, as plain
rendezvous hashing does; the caps move a few more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache


@lru_cache(maxsize=256)
def _scores(worker: str, shards: int) -> tuple[int, ...]:
    """``worker``'s score for each shard (kept: a new view scores only its new workers;
    at most 256 workers' scores, 37 MB at 4 096 shards)."""
    return tuple(
        int.from_bytes(hashlib.blake2b(f"{shard}\0{worker}".encode(), digest_size=8).digest())
        for shard in range(shards)
    )


@lru_cache(maxsize=8)
def owners(workers: tuple[str, ...], shards: int) -> tuple[str, ...]:
    """The owner of each shard among the sorted live ``workers`` ("" when there is none).

    At a change of the registry, 100 workers and 4 096 shards (``MAX_SHARDS``) take
    0.2 s (a new worker's scores 10 ms), 16 shards 0.3 ms."""
    if not workers:
        return ("",) * shards
    columns = [_scores(worker, shards) for worker in workers]
    rows = [[column[shard] for column in columns] for shard in range(shards)]
    best = [max(range(len(workers)), key=row.__getitem__) for row in rows]
    base, extra = divmod(shards, len(workers))  # each holds base, ``extra`` of them one more
    held = [0] * len(workers)
    out = [""] * shards
    # shards whose favourite is keenest choose first: the order is the same everywhere
    for shard in sorted(range(shards), key=lambda s: (-rows[s][best[s]], s)):
        row = rows[shard]
        candidates = [best[shard]]
        if not _free(held[best[shard]], base, extra):  # its favourite is full: the next
            candidates = sorted(range(len(workers)), key=lambda i: (-row[i], i))
        for i in candidates:
            if _free(held[i], base, extra):
                extra -= held[i] == base
                held[i] += 1
                out[shard] = workers[i]
                break
    return tuple(out)


def _free(held: int, base: int, extra: int) -> bool:
    return held < base or (held == base and extra > 0)


def owned(worker: str, workers: Sequence[str], shards: int) -> frozenset[int]:
    """The shards ``worker`` owns among the live ``workers`` (itself counted if missing:
    a worker whose first heartbeat is not in yet still owns a share)."""
    live = tuple(sorted({*workers, worker}))
    return frozenset(s for s, w in enumerate(owners(live, shards)) if w == worker)
