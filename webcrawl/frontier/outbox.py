"""What a worker holds for the frontier, and the rule of its step: a page's lease is
acknowledged only once everything the page produced is stored.

New links, revisits within the horizon and hand-backs (nacks) wait in the worker's
memory and leave with its next step; revisits beyond the horizon go to the store
(:class:`~webcrawl.frontier.far_revisits.FarRevisits`).  A lease the engine is done
with is acknowledged in the step *after* the one that stored (and, with
FRONTIER_REDIS_WAIT_REPLICAS, replicated) every link it produced: a lease that
disappears never takes links with it, whatever the moment a worker or a master dies
(on a cluster the shards of one step are written in no set order).  What a shard did
not take is kept for the next step; leases whose step the replicas did not confirm are
left to expire, so their pages are fetched again, and so are those of the pages in
progress then (links they had pushed went with that step; on a cluster a later
acknowledgement on another node does not follow them in the replication stream).

Plain Python over a :class:`~webcrawl.frontier.queue.HostQueue`: the scheduler adapts
it to Scrapy, and the frontier's simulation drives it as it is.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from webcrawl.frontier.far_revisits import FarRevisits, Revisit
from webcrawl.frontier.queue import HostQueue, StepResult, lease_shard

# (fingerprint, host, priority, seconds to wait, data, what the worker's cache knows it by)
Push = tuple[bytes, str, int, float, bytes, Any]


@dataclass
class Sent:
    """One step's outcome, for the caller's stats and logs."""

    result: StepResult
    pushes: list[Push]  # the pushes applied (those of failed or unconfirmed shards left out)
    revisits: list[Revisit]  # the near revisits the step was given
    nacks: list[tuple[str, float]]
    unreplicated: int = 0  # leases left to expire: the replicas did not confirm the step


@dataclass
class Outbox:
    """One worker's pushes, revisits, hand-backs and leases on their way to Redis."""

    queue: HostQueue
    far: FarRevisits
    pushes: list[Push] = field(default_factory=list)
    revisits: list[Revisit] = field(default_factory=list)  # due within the horizon
    nacks: list[tuple[str, float]] = field(default_factory=list)  # (lease, seconds)
    unconfirmed: list[str] = field(default_factory=list)  # done; outlinks not yet stored
    ackable: list[str] = field(default_factory=list)  # done, outlinks stored: acked next
    refused: list[str] = field(default_factory=list)  # leases of entries refused: dropped
    # in progress when a step was not confirmed: left to expire once done
    doomed: set[str] = field(default_factory=set)

    def finished(self, lease: str) -> None:
        """The engine is done with ``lease``'s page (its outlinks are in :attr:`pushes`)."""
        if lease in self.doomed:  # links it pushed may be lost: fetched again
            self.doomed.discard(lease)
            return
        if not self.far.hold(lease):  # else: once its far revisits are stored
            self.unconfirmed.append(lease)

    def nack(self, lease: str, wait: float) -> None:
        """Hand ``lease`` back: its request is queued again in ``wait`` seconds."""
        self.doomed.discard(lease)
        self.nacks.append((lease, wait))

    def step(self, *, pop: bool | int, in_progress: Collection[str] = (), **options: Any) -> Sent:
        """Push what is held, acknowledge what may be, maybe pop (``options``: those of
        :meth:`HostQueue.step`; ``in_progress``: the leases of the pages the engine is
        working on).  Raises what Redis raised, having changed nothing."""
        self.far.store()
        self.unconfirmed += self.far.released()
        batch, revisits, nacks = self.pushes, self.revisits, self.nacks
        if not batch and not revisits:  # nothing of theirs left to store
            self.ackable += self.unconfirmed
            self.unconfirmed = []
        acks = [*self.ackable, *self.refused]
        result = self.queue.step(
            acks=acks, nacks=nacks, pushes=batch, pop=pop, revisits=revisits, **options
        )
        failed = result.failed
        if failed:  # those shards' parts were not applied: kept for the next step
            shard_of = self.queue.keys.shard_of
            self.pushes = [e for e in batch if shard_of(e[1]) in failed]
            self.revisits = [e for e in revisits if shard_of(e[1]) in failed]
            self.nacks = [n for n in nacks if lease_shard(n[0])[0] in failed]
            self.ackable = [a for a in self.ackable if lease_shard(a)[0] in failed]
            self.refused = [a for a in self.refused if lease_shard(a)[0] in failed]
        else:
            self.pushes, self.revisits, self.nacks = [], [], []
            self.ackable, self.refused = [], []
        # only what was stored (and, with WAIT, replicated) counts: a page fetched again
        # after a failover must be able to push its links again
        lost = set(failed) | result.unconfirmed
        applied = [e for e in batch if self.queue.keys.shard_of(e[1]) not in lost]
        unreplicated = 0
        if result.unconfirmed:
            # stored on a master that fewer replicas than FRONTIER_REDIS_WAIT_REPLICAS
            # confirmed: these leases are left to expire, so that if the master dies
            # before its replicas have the links, their pages are fetched again
            doomed = set(in_progress) - self.doomed
            unreplicated, self.unconfirmed = len(self.unconfirmed) + len(doomed), []
            self.doomed |= doomed
        elif not self.pushes and not self.revisits:
            self.ackable += self.unconfirmed
            self.unconfirmed = []
        self.refused += [lease for lease, _ in result.refused]
        return Sent(result, applied, revisits, nacks, unreplicated)

    def pending(self) -> bool:
        """Whether anything held is not in the frontier yet."""
        return bool(
            self.pushes
            or self.revisits
            or self.far.busy()
            or self.nacks
            or self.refused
            or self.unconfirmed
            or self.ackable
        )

    def in_progress(self) -> list[str]:
        """Leases done with but not acknowledged yet (renewed with those in progress)."""
        return [*self.unconfirmed, *self.ackable, *self.far.waiting()]
