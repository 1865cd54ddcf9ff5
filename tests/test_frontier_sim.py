"""The frontier's protocol, checked by simulation (Hypothesis stateful testing).

Several simulated workers (:mod:`support.frontier_sim`) share one crawl on a real Redis
and a real SQLite store, with tiny hot tiers so that every request goes through spills
and refills.  Hypothesis chooses what each worker does next, which of them makes its
next call to Redis or the store, whether that call fails (before or after the server
did it) or the worker dies there (kill -9), and when time moves on past leases,
claims and locks.  After every rule the invariants below hold; at the end, with no
more pushes and time running on, the crawl drains to nothing.

``WEBCRAWL_SIM_EXAMPLES`` (default 20) sets how many examples run, and
``WEBCRAWL_SIM_STEPS`` (default 100) the rules per example: thousands in the long
mode, e.g. ``WEBCRAWL_SIM_EXAMPLES=5000 pytest tests/test_frontier_sim.py``.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from support.frontier_sim import (
    DELAY,
    LEASE,
    SimWorker,
    read_places,
    url_key,
)
from support.gates import CRASH, FAIL_AFTER, FAIL_BEFORE, GO, Replica

from webcrawl.frontier.cold import host_prefix, revisit_prefix
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.lock import RedisLock
from webcrawl.frontier.ownership import owned
from webcrawl.frontier.shards import ShardRouter
from webcrawl.store.base import StoreError
from webcrawl.store.sqlite import SQLiteStore

# end to end in all but name: several workers' whole protocol, thousands of steps (16 s)
pytestmark = pytest.mark.e2e

SKIP = set(os.environ.get("WEBCRAWL_SIM_SKIP", "").split(","))
EXAMPLES = int(os.environ.get("WEBCRAWL_SIM_EXAMPLES", "20"))
STEPS = int(os.environ.get("WEBCRAWL_SIM_STEPS", "100"))
CLUSTER = os.environ.get("WEBCRAWL_SIM_CLUSTER") == "1"
WORKERS = 3
HOSTS = ["a", "b", "c", "d"]
# FRONTIER_MAX_PAGES_PER_HOST: long examples take a host past it
MAX_PAGES = 15
# 6: past a turn hold's first deadline but not a renewed one's; 31: past the revisit
# mover's lock (30 s)
TICKS = [0.5, 3.0, 6.0, LEASE + 1, 31.0, 200.0]
HOLDING = [
    {"shard_batch": 3, "shard_wait": 4.0},
    {"shard_batch": 1, "shard_wait": 0.0},
    {"shard_batch": 1000, "shard_wait": 2 * LEASE},
]


class FrontierMachine(RuleBasedStateMachine):
    client = None  # set by the test: a real Redis
    tmp = None

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()
        self.client.script_flush()  # every example loads its scripts: the same calls
        FrontierMachine.runs += 1
        self.store = SQLiteStore(self.tmp / f"sim{self.runs}.sqlite3")
        self.keys = CrawlKeys("sim", 2)
        self.replica = Replica(self.client)
        self.now = 1000.0
        self.n_urls = 0
        self.n_junk = 0  # records no worker wrote (the junk rule)
        self.workers: list[SimWorker] = []
        self.dead: list[SimWorker] = []
        self.stores: list[SQLiteStore] = [self.store]
        # ground truth
        self.finished_urls: set[str] = set()
        self.holders: dict[str, list[tuple[SimWorker, str]]] = {}  # url -> (worker, lease)
        self.obligations: list[tuple[str, str, SimWorker]] = []  # (url, lease, worker)
        self.revisit_fetched: Counter[str] = Counter()
        self.history: list[str] = []
        # host -> {holder: its hold's deadline}: requests in flight (turns taken, not given
        # back), and the last answer that gave a host's turn back
        self.in_flight: dict[str, dict[str, float]] = {}
        self.last_answer: dict[str, float] = {}
        self.taker: dict[str, str] = {}  # host -> the holder of its turn in Redis, as RENEW
        # sees it (an expired hold is renewed if no one took the turn since)

    runs = 0

    # -- workers ---------------------------------------------------------------

    def new_worker(self, index: int | None = None) -> SimWorker:
        store = SQLiteStore(self.store.path)  # a process of its own: its own connection
        self.stores.append(store)
        name = f"w{len(self.workers) + len(self.dead)}"
        worker = SimWorker(
            name,
            self.client,
            store,
            self.keys,
            self,
            hot_per_host=2,
            budget=6,
            replica=self.replica,
            max_pages_per_host=MAX_PAGES,
            # the outbox's holding (Outbox.shard_batch, shard_wait): none, a few links
            # or seconds, links held past a lease's timeout
            **HOLDING[(len(self.workers) + len(self.dead)) % len(HOLDING)],
        )
        if index is None:
            self.workers.append(worker)
        else:
            self.workers[index] = worker
        return worker

    def handed_out(self, worker: SimWorker, url: str, lease: str, revisit: bool) -> None:
        if revisit:
            self.revisit_fetched[url] += 1
            return
        live = [
            (w, lease2)
            for w, lease2 in self.holders.get(url, ())
            if w in self.workers and lease2 in w.held and self._lease_live(lease2)
        ]
        assert not live, (
            f"{url} handed out to {worker.name} ({lease}) while {live[0][0].name} "
            f"holds it under a live lease {live[0][1]}"
        )
        self.holders.setdefault(url, []).append((worker, lease))

    def _lease_live(self, lease: str) -> bool:
        shard, ident = lease.split(":")
        score = self.client.zscore(self.keys.shard(int(shard)).leases, ident)
        return score is not None and score > self.now

    def finished(self, worker: SimWorker, held, revisit_in: float | None) -> None:
        self.finished_urls.add(held.url)
        # a page whose lease expired meanwhile is fetched again (whoever finishes that
        # fetch schedules its revisit): only a live lease's revisit is owed
        if revisit_in is not None and self._lease_live(held.lease):
            self.obligations.append((held.url, held.lease, worker))

    def turn_asked(self, host: str, wait: float) -> None:
        """(How often a turn was taken, or refused while a request to the host was in
        flight: the stats say whether the examples exercise politeness.)"""
        held = any(d > self.now for d in self.in_flight.get(host, {}).values())
        STATS["turn " + ("taken" if wait == 0 else "held" if held else "early")] += 1

    def took_turn(self, worker: SimWorker, host: str, holder: str, now: float) -> None:
        """Politeness: a host has one request in flight at a time, whichever worker's, and
        sees at least its delay between an answer and the next request."""
        live = {h: d for h, d in self.in_flight.get(host, {}).items() if d > now}
        assert not live, f"{holder} sends to {host} at {now} while {live} are in flight"
        answered = self.last_answer.get(host)
        assert answered is None or now >= answered + DELAY, (
            f"{holder} sends to {host} at {now}, {now - answered} s after an answer"
        )
        self.in_flight.setdefault(host, {})[holder] = now + LEASE
        self.taker[host] = holder

    def answering(self, host: str, holder: str) -> None:
        """From the release's first call on, the hold may be gone (the model only relies
        on holds it knows to be there)."""
        self.in_flight.get(host, {}).pop(holder, None)
        if self.taker.get(host) == holder:
            del self.taker[host]

    def answered(self, host: str, now: float) -> None:
        self.last_answer[host] = max(now, self.last_answer.get(host, now))

    def renewed(self, holds: list[tuple[str, str]], now: float) -> None:
        for host, holder in holds:
            if self.taker.get(host) == holder and holder in self.in_flight.get(host, {}):
                self.in_flight[host][holder] = now + LEASE

    def fresh_urls(self, host: str, n: int) -> list[str]:
        urls = [f"http://{host}/{self.n_urls + i}" for i in range(n)]
        self.n_urls += n
        return urls

    def idle_workers(self) -> list[int]:
        return [i for i, w in enumerate(self.workers) if not w.gate.busy]

    @initialize()
    def start(self) -> None:
        for _ in range(WORKERS):
            self.new_worker()

    # -- what workers do -------------------------------------------------------

    def _start(self, worker: SimWorker, what: str, task) -> None:
        self.history.append(f"{worker.name} starts {what}")
        worker.gate.start(task)

    def _idle_worker(self, data) -> SimWorker:
        return data.draw(st.sampled_from([w for w in self.workers if not w.gate.busy]))

    def _holder(self, data) -> SimWorker:
        return data.draw(st.sampled_from([w for w in self.workers if not w.gate.busy and w.held]))

    def any_idle(self) -> bool:
        return any(not w.gate.busy for w in self.workers)

    def any_holder(self) -> bool:
        return any(not w.gate.busy and w.held for w in self.workers)

    def any_waiting(self) -> bool:
        return any(g.waiting is not None for w in self.workers for g in w.process.gates)

    def any_move(self) -> bool:
        return any(w.moves and not w.mover.busy for w in self.workers)

    @precondition(any_idle)
    @rule(data=st.data(), host=st.sampled_from(HOSTS), n=st.integers(1, 6), dups=st.integers(0, 2))
    def push(self, data, host, n, dups):
        worker = self._idle_worker(data)
        urls = self.fresh_urls(host, n) + [f"http://{host}/{j}" for j in range(dups)]
        self._start(worker, f"push {urls}", lambda: worker.push(urls))

    @precondition(any_idle)
    @rule(data=st.data(), n=st.integers(1, 3), send=st.booleans())
    def fetch(self, data, n, send):
        """A worker pops up to ``n`` requests; ``send``: they go to the download handler at
        once, each taking its host's turn (else later, in a finish)."""
        worker = self._idle_worker(data)
        self._start(worker, f"fetch {n}{' and send' * send}", lambda: worker.fetch(n, send))

    @precondition(any_holder)
    @rule(
        data=st.data(),
        pick=st.integers(0, 10),
        links=st.integers(0, 3),
        revisit=st.sampled_from([None, None, 5.0, 20.0, 120.0, 300.0]),
        unpaced=st.sampled_from([False, True, True]),
    )
    def finish(self, data, pick, links, revisit, unpaced):
        """A page a worker holds: its request takes its host's turn and leaves; or its
        answer comes in, the turn goes back and the page is done (or, ``unpaced``, it is
        done without a turn: a page whose turn is slow to come is finished anyway)."""
        worker = self._holder(data)
        lease = sorted(worker.held)[pick % len(worker.held)]
        if lease not in worker.sending and not unpaced:
            self._start(worker, f"send {lease}", lambda: worker.send(lease))
            return
        urls = self.fresh_urls(data.draw(st.sampled_from(HOSTS)), links)
        self._start(
            worker,
            f"finish {lease} +{urls} revisit {revisit}",
            lambda: worker.finish(lease, urls, revisit),
        )

    @precondition(any_idle)
    @rule(
        data=st.data(),
        n=st.integers(1, 3),
        hosts=st.lists(st.sampled_from(HOSTS), min_size=1, max_size=3),
    )
    def crawl(self, data, n, hosts):
        """A worker pops up to ``n`` pages and finishes them at once (unpaced), each with a
        fresh link to one of ``hosts``: the scheduler's loop, pages done with while their
        links are held (they leave with later steps)."""
        worker = self._idle_worker(data)

        def run():
            result = worker.step(pop=n)
            for i, (_, lease) in enumerate(result.popped if result is not None else ()):
                if lease in worker.held:
                    worker.finish(lease, self.fresh_urls(hosts[i % len(hosts)], 1), None)

        self._start(worker, f"crawl {n} -> {hosts}", run)

    @precondition(any_idle)
    @rule(data=st.data(), host=st.sampled_from(HOSTS))
    def probe(self, data, host):
        """A paced request that no pop handed out (robots.txt, a failed path's re-probe, a
        revisit's HEAD) takes its host's turn and leaves."""
        worker = self._idle_worker(data)
        probe = f"probe{worker.turns}"
        self._start(worker, f"{probe} {host}", lambda: worker.send(probe, host))

    def any_sending(self) -> bool:
        return any(not w.gate.busy and w.sending for w in self.workers)

    @precondition(any_sending)
    @rule(data=st.data(), pick=st.integers(0, 10))
    def answer(self, data, pick):
        """An answer comes in: its host's turn goes back (a page whose answer this is
        takes a turn again to be finished: a retry)."""
        worker = data.draw(
            st.sampled_from([w for w in self.workers if not w.gate.busy and w.sending])
        )
        key = sorted(worker.sending)[pick % len(worker.sending)]
        self._start(worker, f"answer {key}", lambda: worker.answer(key))

    @precondition(any_holder)
    @rule(data=st.data(), pick=st.integers(0, 10), wait=st.sampled_from([0.0, 5.0]))
    def nack(self, data, pick, wait):
        worker = self._holder(data)
        lease = sorted(worker.held)[pick % len(worker.held)]
        self._start(worker, f"nack {lease}", lambda: worker.nack(lease, wait))

    @precondition(any_idle)
    @rule(data=st.data())
    def heartbeat(self, data):
        worker = self._idle_worker(data)
        self._start(worker, "heartbeat", worker.heartbeat)

    @precondition(any_idle)
    @rule(data=st.data())
    def ownership(self, data):
        """A worker's heartbeat reads the registry and the shards it owns change: its view
        holds some of the live workers and maybe dead ones (their heartbeats not yet
        expired), as when workers join, leave or are killed.  Ownership only orders
        its pops, so the protocol must hold whoever owns what, and nothing may starve."""
        worker = self._idle_worker(data)
        names = sorted(w.name for w in [*self.workers, *self.dead])
        view = data.draw(st.lists(st.sampled_from(names), unique=True))
        mine = owned(worker.name, view, self.keys.shards)
        # how many workers it takes to share the looks: its view's, or a fleet's (its
        # looks then ask the others' shards in slices, a round in many seconds)
        workers = data.draw(st.sampled_from([len(view), 100]))
        self.history.append(f"{worker.name} owns shards {sorted(mine)} (sees {view} of {workers})")
        worker.queue.prefer(mine, workers=workers)

    @precondition(any_idle)
    @rule(data=st.data())
    def idle(self, data):
        worker = self._idle_worker(data)
        self._start(worker, "idle check", worker.idle)

    # -- the calls: go, fail or crash ---------------------------------------------

    @precondition(any_waiting)
    @rule(data=st.data(), roll=st.integers(0, 29))
    def call(self, data, roll):
        waiting = [
            (i, g)
            for i, w in enumerate(self.workers)
            for g in w.process.gates
            if g.waiting is not None
        ]
        i, gate = data.draw(st.sampled_from(waiting))
        worker = self.workers[i]
        verdict = {0: CRASH, 1: FAIL_BEFORE, 2: FAIL_AFTER}.get(roll, GO)
        self.history.append(f"{gate.name} {verdict}: {gate.waiting}")
        gate.decide(verdict)
        if worker.process.crashed:
            other = gate.sibling
            if other.waiting is not None:  # the process's other thread dies with it
                other.decide(CRASH)
            self.dead.append(worker)
            self.new_worker(i)

    @precondition(lambda self: self.any_waiting() or self.any_move())
    @rule(times=st.integers(1, 8))
    def run_on(self, times):
        """Every waiting thread makes its next calls; an idle mover takes its next move."""
        for _ in range(times):
            for worker in self.workers:
                if worker.moves and not worker.mover.busy:
                    self.history.append(f"{worker.mover.name} starts a move")
                    worker.mover.start(worker.move)
            for gate in [g for w in self.workers for g in w.process.gates]:
                if gate.waiting is not None:
                    self.history.append(f"{gate.name} go: {gate.waiting}")
                    gate.decide(GO)

    @precondition(any_move)
    @rule(data=st.data())
    def move(self, data):
        """A worker's mover thread runs the next spill, refill or store write it was
        handed (its calls wait at the gate like the others)."""
        worker = data.draw(
            st.sampled_from([w for w in self.workers if w.moves and not w.mover.busy])
        )
        self.history.append(f"{worker.mover.name} starts a move")
        worker.mover.start(worker.move)

    @precondition(any_move)
    @rule(data=st.data())
    def moves(self, data):
        """A worker's mover thread runs every move it was handed, every call going through."""
        worker = data.draw(
            st.sampled_from([w for w in self.workers if w.moves and not w.mover.busy])
        )
        self.history.append(f"{worker.mover.name} runs its moves")
        while worker.moves and worker.process.crashed is False:
            worker.mover.start(worker.move)
            while worker.mover.waiting is not None:
                self.history.append(f"{worker.mover.name} go: {worker.mover.waiting}")
                worker.mover.decide(GO)

    # -- the replica: it lags, catches up, takes over -------------------------------

    @rule(roll=st.integers(0, 9))
    def replica(self, roll):
        """The replica catches up (what a WAIT that counts it also does); or from now on
        WAIT finds it behind, or caught up again; or the master dies and the replica
        takes over with what it had.  Writes no WAIT confirmed are lost in a failover: a
        pop's lease too, so a page may be handed out again, and a lock may be lost
        (Redis locks are not safe across a failover)."""
        if "replica" in SKIP:
            return
        if roll in (1, 7):  # (not 0: Hypothesis tries the least value often)
            self.replica.fail_over()
            self.history.append("failover")
            self.holders.clear()
            self.in_flight.clear()  # holds and turns are lost too: politeness with them
            self.last_answer.clear()
            self.taker.clear()
            TAKEN.clear()
        elif roll in (2, 5, 6):
            self.replica.lagging = roll != 6
            self.history.append(f"replica {'lags' if roll != 6 else 'keeps up'}")
        else:
            self.replica.catch_up()
            self.history.append("replica catches up")

    @rule(
        kind=st.sampled_from(["spill", "cold", "revisit"]),
        shard=st.integers(0, 1),
        host=st.sampled_from(HOSTS),
    )
    def junk(self, kind, shard, host):
        """A record no worker wrote (a corrupted or foreign one) appears: in a shard's
        spill set (with no host: counted nowhere), under a host's prefix in the store's
        cold tier (sorting before its rows), or among the revisits in the store.  No
        worker can read it: the move that meets it drops it, and stalls nothing else
        (the invariants and the final drain say so)."""
        if "junk" in SKIP:
            return
        self.n_junk += 1
        if kind == "spill":
            self.client.zadd(self.keys.shard(shard).spill, {b"junk-%d" % self.n_junk: 0})
        elif kind == "cold":
            prefix = host_prefix(self.keys.crawl, self.keys.shard_of(host), host)
            self.store.frontier_put([(f"{prefix}0junk-{self.n_junk}", b"junk")])
        else:
            key = f"{revisit_prefix(self.keys.crawl)}0000000000000x/junk-{self.n_junk}"
            self.store.frontier_put([(key, b"junk")])
        self.history.append(f"junk {kind} {self.n_junk}")

    @rule(dt=st.sampled_from(TICKS))
    def tick(self, dt):
        self.now += dt
        self.history.append(f"time +{dt} = {self.now}")

    # -- invariants --------------------------------------------------------------

    def places(self):
        return read_places(self.client, self.store, self.keys)

    @invariant()
    def counters_match_what_the_keys_and_rows_hold(self):
        if "counters_match_what_the_keys_and_rows_hold" in SKIP:
            return
        p = self.places()
        negative = {k: v for k, v in {**p.counters, **p.cold_count, **p.spilling}.items() if v < 0}
        assert not negative, f"negative counters {negative}"
        assert p.counters["queued"] == len(p.hot), (p.counters, len(p.hot))
        assert p.counters["cold_total"] == sum(p.cold_count.values())
        for host in set(p.cold_count) | set(p.spill) | set(p.cold):
            rows = (p.spill[host] | set(p.cold[host])) - p.moved[host]
            assert p.cold_count.get(host, 0) == len(rows), (
                f"host {host}: cold count {p.cold_count.get(host, 0)}, but {len(rows)} in the "
                f"spill set and store (spill {sorted(p.spill[host])}, store "
                f"{sorted(p.cold[host])}, moved {sorted(p.moved[host])})"
            )
        assert p.counters["reserved"] == p.refill_rooms, (
            f"reserved {p.counters['reserved']} but {p.refill_leases} refill leases hold "
            f"{p.refill_rooms} places"
        )

    @invariant()
    def every_admitted_url_is_somewhere(self):
        if "every_admitted_url_is_somewhere" in SKIP:
            return
        p = self.places()
        queued = p.queued_urls()
        held = {h.url for w in self.workers for h in w.held.values()}
        lost = p.seen - queued - self.finished_urls - held
        assert not lost, f"admitted but nowhere: {sorted(lost)}"
        hot = {u for u, rv in p.hot if not rv}
        for host, rows in p.cold.items():
            skip = p.moved[host] | p.cold_revisits.get(host, set())
            twice = {u for seq, u in rows.items() if seq not in skip} & hot
            assert not twice, f"in the store and in a host queue: {sorted(twice)}"

    @invariant()
    def a_hosts_urls_in_the_dupefilter_are_those_its_budget_took(self):
        """FRONTIER_MAX_PAGES_PER_HOST: the URLs of a host that the dupefilter holds are
        the new URLs the host took (its count, at most the budget): one dropped over the
        budget is not recorded as seen."""
        if "a_hosts_urls_in_the_dupefilter_are_those_its_budget_took" in SKIP:
            return
        p = self.places()
        per_host = Counter(urlsplit(url).hostname for url in p.seen)
        for host in HOSTS:
            assert per_host[host] == p.host_pages.get(host, 0) <= MAX_PAGES, (
                f"host {host}: {per_host[host]} URLs seen, {p.host_pages.get(host, 0)} taken"
            )

    @invariant()
    def every_revisit_is_somewhere(self):
        if "every_revisit_is_somewhere" in SKIP:
            return
        p = self.places()
        queued = {u for u, rv in p.hot + p.delayed + list(p.leased.values()) if not rv}
        revisits = {u for u, rv in p.hot + p.delayed + list(p.leased.values()) if rv}
        keep = []
        for url, lease, worker in self.obligations:
            if lease in p.leased:  # not acknowledged yet
                keep.append((url, lease, worker))
                continue
            if url in queued or self.revisit_fetched[url]:
                continue  # the lease expired and the page is fetched again; or revisited
            key = url_key(url)
            alive = worker in self.workers
            if (
                key in p.revisits_redis
                or key in p.revisits_store
                or url in revisits
                or url in p.spilled_revisits
                or (alive and any(r[0] == key for r in worker.outbox.revisits + worker.far.pending))
            ):
                keep.append((url, lease, worker))
                continue
            raise AssertionError(f"the revisit of {url} (lease {lease} acknowledged) is lost")
        self.obligations = keep

    @invariant()
    def no_operation_failed_but_by_redis_or_the_store(self):
        """An operation (on a worker's thread) ends, or fails with an outage's error: any
        other error, a model's assertion on that thread too, fails the test here."""
        for worker in self.workers + self.dead:
            for gate in worker.process.gates:
                outcome = gate.outcome
                if isinstance(outcome, BaseException) and not isinstance(
                    outcome, (redis.RedisError, StoreError)
                ):
                    raise AssertionError(f"{gate.name}: {outcome!r}") from outcome

    @invariant()
    def a_live_lock_is_its_holders(self):
        if "a_live_lock_is_its_holders" in SKIP:
            return
        live = {f"sim-{w.name}" for w in self.workers}
        for thread, lock in TAKEN:
            if thread in live and lock.held and lock.deadline > self.now:
                value = self.client.get(lock.key)
                assert value is not None and value.decode().startswith(lock.token + "|"), (
                    f"{thread} holds {lock.key} until {lock.deadline} (now {self.now}) but "
                    f"Redis has {value!r}: another worker freed or took it"
                )

    def teardown(self):
        for w in self.workers + self.dead:
            t = w.queue.tier_stats
            STATS.update(
                spilled=t.spilled,
                refilled=t.refilled,
                refills=t.refills,
                recovered=t.recovered,
                errors=t.errors,
                unreadable=t.unreadable,
            )
            log = w.gate.log + w.mover.log
            STATS.update(line.split(":")[0] for line in log)
            STATS.update(line.split(":", 1)[1].split()[0:2][-1] for line in log)
        STATS["failovers"] += self.replica.failovers
        STATS["examples"] += 1
        STATS["steps"] += len(self.history)  # rules and calls
        STATS["longest"] = max(STATS["longest"], len(self.history))
        try:
            self.drain()
        except BaseException:
            Path("/tmp/sim-fail.txt").write_text("\n".join(self.history))
            raise
        finally:
            for gate in [g for w in self.workers for g in w.process.gates]:
                if gate.waiting is not None:  # leave no thread waiting
                    gate.decide(CRASH)
            for store in self.stores:
                store.close()

    def settle(self, worker: SimWorker) -> None:
        """Let every call of ``worker`` through, its moves too, until it is idle."""
        while True:
            while worker.gate.busy or worker.mover.busy:
                gate = worker.gate if worker.gate.waiting is not None else worker.mover
                gate.decide(GO)
            if not worker.moves:
                return
            worker.mover.start(worker.move)

    def drain(self) -> None:
        """Liveness: no more pushes, no faults, time runs on: everything is fetched,
        nothing is left queued, and the idle check says the crawl is done."""
        self.replica.lagging = False
        for worker in self.workers:
            self.settle(worker)
        for _ in range(200):
            for worker in self.workers:
                worker.gate.start(lambda w=worker: w.fetch(3))
                self.settle(worker)
                for lease in list(worker.held):  # (an answer gives its turn back first)
                    worker.gate.start(lambda w=worker, lease=lease: w.finish(lease, [], None))
                    self.settle(worker)
                worker.gate.start(worker.heartbeat)
                self.settle(worker)
            states = []
            for worker in self.workers:
                worker.gate.start(worker.idle)
                self.settle(worker)
                states.append(worker.gate.outcome)
            if all(s is not None and not any(s) for s in states):
                break
            self.now += LEASE + 1
        else:
            p = self.places()
            raise AssertionError(
                f"the crawl does not drain: idle checks {states}, counters "
                f"{p.counters}, cold {p.cold_count}, store "
                f"{ {h: sorted(r) for h, r in p.cold.items() if r} }"
            )
        p = self.places()
        missing = p.seen - self.finished_urls
        assert not missing, f"never fetched: {sorted(missing)}"
        left = {
            "queued": sorted(p.queued_urls()),
            "cold": p.cold_count,
            "spilling": p.spilling,
            "counters": {k: v for k, v in p.counters.items() if v and ":" not in k},
            "refill leases": p.refill_leases,
        }
        assert not any(left.values()), f"the crawl says it is done, but {left}"
        assert not any(p.cold.values()), f"left in the store: {dict(p.cold)}"

        # junk in a spill set is counted nowhere (the crawl is done without it), but its
        # shard has work while it is there: once its claim (if any) expires, the next
        # step claims it and the move drops it
        def junk() -> list[bytes]:
            return [e for k in self.keys.all_shards() for e in self.client.zrange(k.spill, 0, -1)]

        for _ in range(3):
            if not junk():
                break
            self.now += LEASE + 1
            for worker in self.workers:
                worker.gate.start(lambda w=worker: w.fetch(3))
                self.settle(worker)
        assert not junk(), f"left in the spill sets: {junk()}"
        # no turn is held for ever: every host's comes back (its holds expired or released)
        self.now += LEASE + DELAY
        worker = self.workers[0]
        for host in HOSTS:
            worker.gate.start(
                lambda h=host: worker.queue.turns.acquire(h, default_delay=DELAY, now=self.now)
            )
            self.settle(worker)
            wait = worker.gate.outcome
            assert wait == 0, f"{host}'s turn does not come back: {wait} s to wait"


# (worker thread, lock) of every lock a simulated worker took
TAKEN: list[tuple[str, RedisLock]] = []


@pytest.fixture
def sim_redis(request, tmp_path_factory, monkeypatch):
    """The simulation's Redis: the session's, or with WEBCRAWL_SIM_CLUSTER=1 a real local
    Redis Cluster of three masters (the two shards on two of them)."""
    if not CLUSTER:
        client = request.getfixturevalue("redis_server").client()
        yield client
        client.close()
        return
    from tools.localcluster import LocalRedisCluster

    # a step's calls to several nodes go one after the other, on the worker's thread (a
    # worker sends them at once, from a pool: one gate holds one call at a time)
    monkeypatch.setattr(
        ShardRouter, "_run_groups", lambda self, groups: [self._run_group(g) for g in groups]
    )
    cluster = LocalRedisCluster(tmp_path_factory.mktemp("sim-cluster"), replicas=0).start()
    client = redis.RedisCluster(host="127.0.0.1", port=cluster.masters()[0].port)
    try:
        yield client
    finally:
        client.close()
        cluster.stop()


@pytest.fixture
def machine(sim_redis, tmp_path, monkeypatch):
    acquire = RedisLock.acquire

    def recorded(lock: RedisLock, *, now: float | None = None) -> bool:
        taken = acquire(lock, now=now)
        if taken:
            TAKEN.append((threading.current_thread().name, lock))
        return taken

    monkeypatch.setattr(RedisLock, "acquire", recorded)
    # the emulated replica is the one every node has (the router would ask INFO for the
    # count when its wall-clock cache expires: examples would not replay the same)
    monkeypatch.setattr(ShardRouter, "_wait_for", lambda self, client, strict=False: 1)
    FrontierMachine.client = sim_redis
    FrontierMachine.tmp = tmp_path
    yield FrontierMachine
    TAKEN.clear()


@pytest.mark.timeout(3600)
def test_the_frontier_protocol_holds_under_any_interleaving(machine, monkeypatch):
    from webcrawl.frontier import queue

    monkeypatch.setattr(queue, "SPILL_BATCH", 3)
    test = machine.TestCase
    test.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        print_blob=True,
    )
    test().runTest()
    print(dict(STATS))


STATS: Counter[str] = Counter()
