"""The outbox's acknowledgement rule, model-checked alone: a queue that records what
each step applied (no Redis), any sequence of pages with links to any shard, near
revisits and far ones (to a store that may fail), steps whose shards fail or are not
confirmed.  A lease's ack is applied only
in a step after every link and revisit of its page was applied and confirmed (or in
the same call, on the same shard: atomic).  The frontier's simulation covers the rest
with a real Redis; this finds a wrong release rule in seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from webcrawl.frontier.far_revisits import FarRevisits
from webcrawl.frontier.outbox import Outbox
from webcrawl.frontier.queue import lease_shard
from webcrawl.store.base import StoreError

SHARDS = 3


class Keys:
    shards = SHARDS

    @staticmethod
    def shard_of(host: str) -> int:
        return int(host[1:])  # hosts are h0, h1, h2


@dataclass
class Result:
    failed: dict = field(default_factory=dict)
    unconfirmed: set = field(default_factory=set)
    refused: list = field(default_factory=list)
    popped: list = field(default_factory=list)
    added: int = 0
    over_budget: int = 0


class RecordingQueue:
    """HostQueue.step's contract: a failed shard applies nothing of its part; an
    unconfirmed one applies it, its replicas unsure."""

    keys = Keys()

    def __init__(self) -> None:
        self.calls = 0
        self.fail: set[int] = set()
        self.unconfirm: set[int] = set()
        self.stored: dict[str, tuple[int, int]] = {}  # item -> (call, shard), confirmed
        self.pages: dict[str, list[str]] = {}  # lease -> its items
        self.early: list[tuple[str, str]] = []  # (lease, item not stored before its ack)

    def step(self, *, acks=(), nacks=(), pushes=(), revisits=(), pop=0, **_) -> Result:
        self.calls += 1
        result = Result()
        written = {Keys.shard_of(item[1]) for item in [*pushes, *revisits]}
        touched = written | {lease_shard(a)[0] for a in acks}
        touched |= {lease_shard(n[0])[0] for n in nacks}
        result.failed = {s: ConnectionError("down") for s in touched & self.fail}
        result.unconfirmed = (written & self.unconfirm) - self.fail
        for item in [*pushes, *revisits]:
            shard = Keys.shard_of(item[1])
            if shard not in self.fail and shard not in self.unconfirm:
                self.stored.setdefault(item[0], (self.calls, shard))
        for lease in acks:
            shard = lease_shard(lease)[0]
            if shard in self.fail:
                continue
            for item in self.pages.get(lease, ()):
                call, at = self.stored.get(item, (float("inf"), -1))
                if not (call < self.calls or (call == self.calls and at == shard)):
                    self.early.append((lease, item))
        return result


shard = st.integers(0, SHARDS - 1)
page = st.tuples(
    st.just("page"),
    shard,
    st.lists(shard, max_size=3),
    st.booleans(),  # a near revisit
    st.booleans(),  # a far one (to the store)
)
step = st.tuples(
    st.just("step"),
    st.sets(shard, max_size=1),  # failing
    st.sets(shard, max_size=1),  # not confirmed
    st.booleans(),  # flush
    st.floats(0, 3),  # seconds since the last
    st.booleans(),  # the store refuses far revisits
)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.lists(st.one_of(page, step), max_size=40))
def test_a_lease_is_acknowledged_only_after_its_pages_links_are_stored(batch, ops):
    queue = RecordingQueue()
    store_down = [False]

    def put(rows):  # far revisits, stored before the queue's next call (or refused)
        if store_down[0]:
            raise StoreError("down")
        for row in rows:
            queue.stored.setdefault(row[0], (queue.calls, -1))

    outbox = Outbox(queue, FarRevisits(put), shard_batch=batch, shard_wait=2.0)
    now, ids = 0.0, 0
    for op in ops:
        if op[0] == "page":
            _, lease_shard_, links, revisit, far = op
            ids += 1
            lease, items = f"{lease_shard_}:p{ids}", []
            for s in links:
                ids += 1
                items.append(f"i{ids}")
                outbox.pushes.append((items[-1], f"h{s}", 0, 0.0, b"", None))
            if revisit:
                ids += 1
                items.append(f"r{ids}")
                outbox.revisits.append((items[-1], f"h{lease_shard_}", 0, 1.0, b""))
            if far:
                ids += 1
                items.append(f"f{ids}")
                outbox.far.add((items[-1], f"h{lease_shard_}", 0, 1e6, b""))
            queue.pages[lease] = items
            outbox.finished(lease, now=now)
        else:
            _, failing, unconfirmed, flush, dt, store_down[0] = op
            now += dt
            queue.fail, queue.unconfirm = failing, unconfirmed
            outbox.step(pop=0, flush=flush, now=now)
        # in number order: a step releases a prefix of them (Outbox._release)
        numbers = [number for _, number in outbox.unconfirmed]
        assert numbers == sorted(numbers), numbers
    queue.fail, queue.unconfirm, store_down[0] = set(), set(), False
    for _ in range(4):
        outbox.step(pop=0, flush=True, now=now)
    assert not queue.early, queue.early[:3]
    assert not outbox.pending()
