"""What a worker holds for the frontier, and the rule of its step: a page's lease is
acknowledged only once everything the page produced is stored.

New links wait in the worker's memory, per shard, until the shard has a batch of them
(``shard_batch``), the oldest has waited ``shard_wait`` seconds, the step calls the
shard anyway (an acknowledgement, a hand-back, a revisit) or the worker finds nothing
to pop (its links may be what the crawl waits for): a shard call costs Redis about as
much as storing ten new URLs, so links leave in batches, not a few per shard on every
step.  Revisits within the horizon and hand-backs (nacks) leave with the next step;
revisits beyond the horizon go to the store
(:class:`~webcrawl.frontier.far_revisits.FarRevisits`).  A lease the engine is done
with is acknowledged in the step *after* the one that stored (and, with
FRONTIER_REDIS_WAIT_REPLICAS, replicated) every link held when it was done (each link
held is numbered; a lease waits for the number of the last one held then): a lease
that disappears never takes links with it, whatever the moment a worker or a master
dies (on a cluster the shards of one step are written in no set order).  What a shard did
not take is kept for the next step; leases whose step the replicas did not confirm are
left to expire, so their pages are fetched again, and so are those of the pages in
progress then (links they had pushed went with that step; on a cluster a later
acknowledgement on another node does not follow them in the replication stream).

Plain Python over a :class:`~webcrawl.frontier.queue.HostQueue`: the scheduler adapts
it to Scrapy, and the frontier's simulation drives it as it is.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass, field
from operator import itemgetter
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
    acked: int = 0  # leases acknowledged (or dropped, refused), their shards' calls applied
    merged: int = 0  # links dropped since the last step: the same request was held already


@dataclass
class Outbox:
    """One worker's pushes, revisits, hand-backs and leases on their way to Redis.

    Callers append new links to :attr:`pushes` and revisits to :attr:`revisits`; a
    step numbers them and holds the links by shard (:meth:`held` counts them all)."""

    queue: HostQueue
    far: FarRevisits
    shard_batch: int = 1  # a shard's links leave once it holds this many (1: every step)
    shard_wait: float = 0.0  # ... or once the oldest has waited this long (seconds)
    pushes: list[Push] = field(default_factory=list)  # new: not numbered nor held yet
    revisits: list[Revisit] = field(default_factory=list)  # due within the horizon
    nacks: list[tuple[str, float]] = field(default_factory=list)  # (lease, seconds)
    # done; the links held then (up to the number) not yet all stored; in number order (a
    # lease comes with the count of links numbered so far: when the engine is done with
    # it, or when its far revisits are stored; the count only grows)
    unconfirmed: list[tuple[str, int]] = field(default_factory=list)
    ackable: list[str] = field(default_factory=list)  # done, outlinks stored: acked next
    refused: list[str] = field(default_factory=list)  # leases of entries refused: dropped
    # in progress when a step was not confirmed: left to expire once done
    doomed: set[str] = field(default_factory=set)
    # per shard, its links in the order they came: (number, the caller's clock then, push)
    _held: dict[int, list[tuple[int, float, Push]]] = field(default_factory=dict)
    _held_fps: set[bytes] = field(default_factory=set)  # their fingerprints
    _held_keys: set[Any] = field(default_factory=set)  # and what the seen cache knows them by
    _merged: int = 0  # links dropped since the last step: held already
    _revisit_numbers: list[int] = field(default_factory=list)  # of revisits, in order
    _count: int = 0  # links and revisits numbered so far
    _starved: bool = False  # the last pop found nothing: the next step sends every link

    def _number(self, clock: float) -> int:
        """Number and hold the new links and revisits; the number of the last one.  A link
        whose request is held already is dropped (its page's lease waits for the one
        held, numbered before): held links are not in the seen cache yet."""
        shard_of = self.queue.keys.shard_of
        held_fps = self._held_fps
        for push in self.pushes:
            fp = push[0]
            if fp:  # (b"": dont_filter)
                if fp in held_fps:
                    self._merged += 1
                    continue
                held_fps.add(fp)
            if push[5] is not None:
                self._held_keys.add(push[5])
            self._count += 1
            self._held.setdefault(shard_of(push[1]), []).append((self._count, clock, push))
        self.pushes = []
        for _ in range(len(self.revisits) - len(self._revisit_numbers)):
            self._count += 1
            self._revisit_numbers.append(self._count)
        return self._count

    def _lowest(self) -> float:
        """The number of the oldest link or revisit not stored yet (inf: none)."""
        firsts = [items[0][0] for items in self._held.values() if items]
        return min(firsts + self._revisit_numbers[:1], default=float("inf"))

    def _release(self) -> None:
        """Leases whose links (and revisits) are all stored are acknowledged next."""
        # the leases numbered below the lowest, a prefix: a step scans no more than it
        # releases (thousands wait while links are held for FRONTIER_SHARD_WAIT)
        done = bisect_left(self.unconfirmed, self._lowest(), key=itemgetter(1))
        self.ackable += [lease for lease, _ in self.unconfirmed[:done]]
        del self.unconfirmed[:done]

    def finished(self, lease: str, *, now: float | None = None) -> None:
        """The engine is done with ``lease``'s page (its outlinks are in :attr:`pushes`
        or held; ``now``: the caller's clock, as :meth:`step`'s)."""
        if lease in self.doomed:  # links it pushed may be lost: fetched again
            self.doomed.discard(lease)
            return
        last = self._number(HostQueue._clock(now))
        if not self.far.hold(lease):  # else: once its far revisits are stored
            self.unconfirmed.append((lease, last))

    def _far_released(self) -> list[str]:
        """Leases whose far revisits are stored now, but for the doomed (their links
        went with a step the replicas did not confirm): those are left to expire."""
        released = []
        for lease in self.far.released():
            if lease in self.doomed:
                self.doomed.discard(lease)
            else:
                released.append(lease)
        return released

    def nack(self, lease: str, wait: float) -> None:
        """Hand ``lease`` back: its request is queued again in ``wait`` seconds."""
        self.doomed.discard(lease)
        self.nacks.append((lease, wait))

    def holds(self, key: Any) -> bool:
        """Whether a link held (numbered, not sent yet) is known by ``key`` in the
        worker's seen cache: the same request again is dropped."""
        return key in self._held_keys

    def held(self) -> int:
        """Links not sent yet (new or held)."""
        return len(self.pushes) + sum(map(len, self._held.values()))

    def ripe(self, now: float | None = None) -> bool:
        """Whether a shard's links are due to leave (a batch of them, or waited long
        enough): the caller steps."""
        clock = HostQueue._clock(now)
        self._number(clock)
        return any(self._due(items, clock) for items in self._held.values())

    def _due(self, items: list[tuple[int, float, Push]], clock: float) -> bool:
        return bool(items) and (
            len(items) >= self.shard_batch or clock - items[0][1] >= self.shard_wait
        )

    def step(
        self,
        *,
        pop: bool | int,
        in_progress: Collection[str] = (),
        flush: bool = False,
        **options: Any,
    ) -> Sent:
        """Push the links due to leave (``flush``: all of them), the revisits and
        hand-backs, acknowledge what may be, maybe pop (``options``: those of
        :meth:`HostQueue.step`; ``in_progress``: the leases of the pages the engine is
        working on).  Raises what Redis raised, having changed nothing."""
        clock = HostQueue._clock(options.get("now"))
        self.far.store()
        released = self._far_released()
        last = self._number(clock)
        self.unconfirmed += [(lease, last) for lease in released]
        self._release()
        revisits, nacks = self.revisits, self.nacks
        acks = [*self.ackable, *self.refused]
        flush = flush or self._starved or self.shard_batch <= 1
        if not flush:  # the shards the step calls anyway take their links along
            called = {lease_shard(lease)[0] for lease in acks}
            called.update(lease_shard(lease)[0] for lease, _ in nacks)
            shard_of = self.queue.keys.shard_of
            called.update(shard_of(r[1]) for r in revisits)
        sending = [
            shard
            for shard, items in self._held.items()
            if items and (flush or shard in called or self._due(items, clock))
        ]
        batch = [push for shard in sending for _, _, push in self._held[shard]]
        result = self.queue.step(
            acks=acks, nacks=nacks, pushes=batch, pop=pop, revisits=revisits, **options
        )
        if pop:
            self._starved = not result.popped
        failed = result.failed
        shard_of = self.queue.keys.shard_of
        for shard in sending:  # a failed shard's part was not applied: kept for the next
            if shard not in failed:
                sent = [push for _, _, push in self._held.pop(shard)]
                self._held_fps.difference_update(push[0] for push in sent)
                self._held_keys.difference_update(push[5] for push in sent)
        if failed:
            numbered = zip(revisits, self._revisit_numbers, strict=True)
            kept = [(r, n) for r, n in numbered if shard_of(r[1]) in failed]
            self.revisits = [r for r, _ in kept]
            self._revisit_numbers = [n for _, n in kept]
            self.nacks = [n for n in nacks if lease_shard(n[0])[0] in failed]
            self.ackable = [a for a in self.ackable if lease_shard(a)[0] in failed]
            self.refused = [a for a in self.refused if lease_shard(a)[0] in failed]
        else:
            self.revisits, self._revisit_numbers, self.nacks = [], [], []
            self.ackable, self.refused = [], []
        # only what was stored (and, with WAIT, replicated) counts: a page fetched again
        # after a failover must be able to push its links again
        lost = set(failed) | result.unconfirmed
        applied = [e for e in batch if shard_of(e[1]) not in lost]
        unreplicated = 0
        if result.unconfirmed:
            # stored on a master that fewer replicas than FRONTIER_REDIS_WAIT_REPLICAS
            # confirmed: these leases are left to expire, so that if the master dies
            # before its replicas have the links, their pages are fetched again
            # (and those waiting for their far revisits: done, their links held or sent)
            doomed = (set(in_progress) | set(self.far.waiting())) - self.doomed
            unreplicated, self.unconfirmed = len(self.unconfirmed) + len(doomed), []
            self.doomed |= doomed
        else:
            self._release()
        self.refused += [lease for lease, _ in result.refused]
        acked = sum(1 for lease in acks if lease_shard(lease)[0] not in failed)
        merged, self._merged = self._merged, 0
        return Sent(result, applied, revisits, nacks, unreplicated, acked, merged)

    def pending(self) -> bool:
        """Whether anything held is not in the frontier yet."""
        return bool(
            self.held()
            or self.revisits
            or self.far.busy()
            or self.nacks
            or self.refused
            or self.unconfirmed
            or self.ackable
        )

    def in_progress(self) -> list[str]:
        """Leases done with but not acknowledged yet (renewed with those in progress)."""
        return [*(lease for lease, _ in self.unconfirmed), *self.ackable, *self.far.waiting()]
