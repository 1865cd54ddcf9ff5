"""Which shards each live worker prefers: rendezvous hashing with bounded loads.

A worker pops from the shards it owns first, and from the others' only when its own
have nothing ready, so that each host's pages are mostly fetched by one worker and that
worker's seen cache knows the host's links (BUbiNG's, Nutch's and StormCrawler's
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


def _score(worker: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{shard}\0{worker}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@lru_cache(maxsize=8)
def owners(workers: tuple[str, ...], shards: int) -> tuple[str, ...]:
    """The owner of each shard among the sorted live ``workers`` ("" when there is none)."""
    if not workers:
        return ("",) * shards
    ranked = {
        shard: sorted(workers, key=lambda w, s=shard: _score(w, s), reverse=True)
        for shard in range(shards)
    }
    base, extra = divmod(shards, len(workers))  # each holds base, ``extra`` of them one more
    held = dict.fromkeys(workers, 0)
    out = [""] * shards
    # shards whose favourite is keenest choose first: the order is the same everywhere
    for shard in sorted(range(shards), key=lambda s: (-_score(ranked[s][0], s), s)):
        for worker in ranked[shard]:
            if held[worker] < base or (held[worker] == base and extra > 0):
                extra -= held[worker] == base
                out[shard] = worker
                held[worker] += 1
                break
    return tuple(out)


def owned(worker: str, workers: Sequence[str], shards: int) -> frozenset[int]:
    """The shards ``worker`` owns among the live ``workers`` (itself counted if missing:
    a worker whose first heartbeat is not in yet still owns a share)."""
    live = tuple(sorted({*workers, worker}))
    return frozenset(s for s, w in enumerate(owners(live, shards)) if w == worker)
