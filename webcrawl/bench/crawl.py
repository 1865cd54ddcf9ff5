"""``webcrawl bench crawl``: pages/s of the full stack on this machine, on the demo web.

Every setup crawls the same site (the demo web, or a real static site with ``--site``,
served by nginx) as ``scrapy crawl web`` subprocesses with politeness off (the server
is local): webcrawl's scheduler over the embedded Redis (Unix socket) and over TCP,
with one worker and with two.  (The comparisons with a plain Scrapy spider and stock
scrapy-redis are ``python -m tools.bench compare``, in a checkout: the same table with
those setups first.)

Redis work per page is shown two ways: commands the server executed
(``total_commands_processed``, commands inside Lua scripts included) and round trips
the workers made (``frontier/redis_round_trips``: one per command or pipeline sent;
webcrawl's scheduler counts them).  Pages/s is Scrapy's ``response_received_count`` over
the seconds from the crawl's first response to its last (of any worker: recorded by
:mod:`webcrawl.bench.span`), so that start-up and the end-of-crawl detection (polled
every 0.5 s), the same for every setup, neither dilute nor blur the differences; the
"wall s" column is from the first worker's start to the last one's end.  The median of
``--runs`` runs is shown.  The demo web is
served by nginx (static files) when it is installed, else by the Twisted demo server;
both share the machine's cores with the crawlers, and the Twisted one (about one core
for 200 pages/s) caps what two workers can show on a small machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from webcrawl.bench.common import COMMON, CpuSampler, project_env, serve, stat, tcp_redis
from webcrawl.demo import crawl_command, demo_server

# a crawl command other than this webcrawl's: (seeds, data dir, log) -> (argv, env, cwd)
Command = Callable[[list[str], Path, Path], tuple[list[str], dict[str, str], Path | None]]


@dataclass(frozen=True)
class Setup:
    """One row of the table: ``workers`` crawls with ``settings`` (``command``: another
    spider's crawl, e.g. the plain Scrapy spider of the comparisons; ``redis``: whether
    the settings name the benchmark's Redis, whose commands are counted)."""

    name: str
    settings: tuple[str, ...] = ()
    workers: int = 1
    command: Command | None = None
    redis: bool = False


def webcrawl_setups(url: str, warc: bool = False) -> list[Setup]:
    setups = [
        Setup("webcrawl, embedded Redis"),
        Setup("webcrawl, Redis over TCP", (f"REDIS_URL={url}",), redis=True),
        Setup("webcrawl, 2 workers, TCP", (f"REDIS_URL={url}",), 2, redis=True),
    ]
    if not warc:
        return setups
    with_warc = [
        Setup(f"{s.name}, WARC", (*s.settings, "WARC_ENABLED=True"), s.workers, redis=s.redis)
        for s in setups
    ]
    return [x for pair in zip(setups, with_warc, strict=True) for x in pair]


def crawl_parallel(
    seeds: list[str],
    workdir: Path,
    settings: list[str],
    workers: int,
    *,
    totals: dict[str, float] | None = None,
    command: Command | None = None,
    project: str | None = None,
) -> tuple[int, float]:
    """(pages, seconds) of ``workers`` ``scrapy crawl`` processes sharing one crawl (with
    ``command``, of another spider; with ``project``, of the webcrawl checkout in that
    directory).

    Seconds: from the crawl's first response to its last, of any worker (see
    :mod:`webcrawl.bench.span`).  ``totals``, if given, gets the sum over the workers of
    each stat it names (0 where a worker has none), ``wall`` the seconds from the
    first worker's start to the last one's end, and ``first`` and ``last`` the Unix
    times of the crawl's first and last response.
    """
    data = Path(tempfile.mkdtemp(dir=workdir))
    settings = [*settings, *span_settings(data)]
    logs = [data / f"crawl{i}.log" for i in range(workers)]
    procs = []
    for log in logs:
        if command is not None:
            cmd, env, cwd = command(seeds, data, log)
            cmd = [*cmd, *(x for item in settings for x in ("-s", item))]
        else:
            cmd = crawl_command(seeds, data, *COMMON, *settings, f"LOG_FILE={log}")
            env, cwd = project_env(project)
        path = os.pathsep.join(filter(None, [str(data), env.get("PYTHONPATH")]))
        env = {**env, "PYTHONPATH": path}  # (the span extension's copy: see span_settings)
        procs.append(subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL))
    codes = [p.wait() for p in procs]
    texts = [log.read_text() for log in logs]
    for code, text in zip(codes, texts, strict=True):
        if code:
            raise RuntimeError(f"crawl failed (exit {code}):\n{text[-2000:]}")
    shutil.rmtree(data, ignore_errors=True)
    pages = sum(int(stat(t, "response_received_count")) for t in texts)
    for name in totals or {}:
        if name == "wall":
            starts = [_time(t, "start_time") for t in texts]
            ends = [_time(t, "finish_time") for t in texts]
            totals[name] = max(ends) - min(starts)
        else:
            totals[name] = sum(stat(t, name, 0.0) for t in texts)  # type: ignore[index]
    firsts = [stat(t, "bench/first_response", -1.0) for t in texts]
    lasts = [stat(t, "bench/last_response", -1.0) for t in texts]
    answered = [(a, b) for a, b in zip(firsts, lasts, strict=True) if a >= 0]
    if not answered:
        raise RuntimeError(f"the crawl got no response:\n{texts[0][-2000:]}")
    first, last = min(a for a, _ in answered), max(b for _, b in answered)
    if totals is not None:
        totals.update({k: v for k, v in (("first", first), ("last", last)) if k in totals})
    return pages, last - first


def span_settings(directory: Path) -> list[str]:
    """Settings that add :class:`~webcrawl.bench.span.ResponseSpan` to a crawl run with
    ``directory`` first on its ``PYTHONPATH`` (a copy of the module is put there: another
    spider's crawl, or another checkout's, need not have it).  It goes into
    ``EXTENSIONS_BASE`` with Scrapy's own, so that the project's ``EXTENSIONS`` stay."""
    from scrapy.settings.default_settings import EXTENSIONS_BASE

    from webcrawl.bench import span

    shutil.copyfile(span.__file__, directory / f"{span.MODULE}.py")
    extensions = {**EXTENSIONS_BASE, f"{span.MODULE}.ResponseSpan": 0}
    return [f"EXTENSIONS_BASE={json.dumps(extensions)}"]


def _time(log: str, name: str) -> float:
    match = re.search(rf"'{name}': datetime\.datetime\(([0-9, ]+)", log)
    if not match:
        raise RuntimeError(f"no {name} in the crawl's stats")
    parts = [int(x) for x in match.group(1).split(",")[:7]]
    return datetime.datetime(*parts, tzinfo=datetime.timezone.utc).timestamp()


def _commands(url: str) -> int:
    import redis

    return int(redis.Redis.from_url(url).info("stats")["total_commands_processed"])


def run_crawl(args: argparse.Namespace, before: Callable[[str], list[Setup]] | None = None) -> int:
    """The table; ``before`` gives setups (of the benchmark's Redis URL) shown first, and
    the "x first" column divides by the first row."""
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-"))
    rows = []
    try:
        with serve(args) as info, tcp_redis(workdir) as url:
            seeds = info["seeds"]
            setups = [
                *(before(url) if before else []),
                *webcrawl_setups(url, getattr(args, "warc", False)),
            ]
            server = info.get("server", "twisted")
            what = f"site {info['site']}" if "site" in info else "demo web"
            if args.project:
                what += f"; webcrawl of {args.project}"
            print(
                f"{what} ({server}): {info['pages']} pages on {len(info['hosts'])} "
                f"hosts; {args.runs} runs per setup (median)",
                flush=True,
            )
            # runs interleave the setups, so a slow spell of the machine hits all alike
            # per setup and run: pages, seconds, Redis commands, round trips, WARC bytes,
            # wall s, and the machine's busy CPU seconds from the first response to the last
            results: dict[str, list[tuple[int, float, int, float, float, float, float]]] = {
                s.name: [] for s in setups
            }
            for i in range(args.runs):
                for setup in setups:
                    extra = (
                        [] if setup.command else [f"WEBCRAWL_CRAWL=bench{i}-{time.monotonic_ns()}"]
                    )
                    before_commands = _commands(url)
                    trips = {"frontier/redis_round_trips": 0.0, "warc/bytes": 0.0, "wall": 0.0}
                    trips.update(first=0.0, last=0.0)
                    with CpuSampler() as cpu:
                        pages, seconds = crawl_parallel(
                            seeds,
                            workdir,
                            [*setup.settings, *extra],
                            setup.workers,
                            totals=trips,
                            command=setup.command,
                            project=args.project,
                        )
                    results[setup.name].append(
                        (
                            pages,
                            seconds,
                            _commands(url) - before_commands,
                            trips["frontier/redis_round_trips"],
                            trips["warc/bytes"],
                            trips["wall"],
                            cpu.at(trips["last"]) - cpu.at(trips["first"]),
                        )
                    )
                print(f"  run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
            for setup in setups:
                runs = results[setup.name]
                pages = int(statistics.median(r[0] for r in runs))
                seconds = statistics.median(r[1] for r in runs)
                rate = statistics.median(r[0] / r[1] for r in runs)
                calls = statistics.median(r[2] / r[0] for r in runs) if setup.redis else None
                trips = statistics.median(r[3] / r[0] for r in runs)
                warc = statistics.median(r[4] / r[0] for r in runs)
                wall = statistics.median(r[5] for r in runs)
                busy = statistics.median(r[6] / r[1] for r in runs)
                cpu_ms = statistics.median(1000 * r[6] / r[0] for r in runs)
                rows.append((setup, pages, seconds, wall, rate, calls, trips, warc, busy, cpu_ms))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base = rows[0][4]
    one = next(r[4] for r in rows if r[0].name == "webcrawl, Redis over TCP")
    warc = any(row[7] for row in rows)
    print(
        f"\n{'setup':<34} {'pages':>6} {'seconds':>8} {'wall s':>7} {'pages/s':>8} {'x first':>8} "
        f"{'x 1 worker':>10} {'Redis cmds/page':>16} {'round trips/page':>17} "
        f"{'cores busy':>10} {'CPU ms/page':>11}" + (f" {'WARC bytes/page':>16}" if warc else "")
    )
    for setup, pages, seconds, wall, rate, calls, trips, warc_bytes, busy, cpu_ms in rows:
        shown = f"{calls:.2f}" if calls is not None else "-"
        scale = f"{rate / one:.2f}" if setup.workers > 1 else "-"
        per_page = f"{trips:.2f}" if trips else "-"  # (webcrawl's scheduler counts them)
        print(
            f"{setup.name:<34} {pages:>6} {seconds:>8.2f} {wall:>7.1f} {rate:>8.1f} "
            f"{rate / base:>8.2f} {scale:>10} {shown:>16} {per_page:>17} {busy:>10.2f} "
            f"{cpu_ms:>11.2f}"
            + ((f" {warc_bytes:>16.0f}" if warc_bytes else f" {'-':>16}") if warc else "")
        )
    print(
        f"(cores busy: of the machine's {os.cpu_count()}, from the crawl's first response to "
        "its last, as pages/s: near them, the crawl is bound by the machine's cores; CPU "
        "ms/page: those cores' time a page, of every process: workers, Redis, web server)"
    )
    return 0


def run_politeness(args: argparse.Namespace) -> int:
    """Achieved per-host request rate against the configured one, workers together."""
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-"))
    log = workdir / "requests.jsonl"
    rows = []
    try:
        with demo_server(args.hosts, args.pages, log) as info, tcp_redis(workdir) as url:
            for delay, workers in ((0.1, 1), (0.1, 2), (0.25, 2), (0.5, 3)):
                log.write_text("")
                crawl = f"WEBCRAWL_CRAWL=pol-{time.monotonic_ns()}"
                settings = [
                    f"REDIS_URL={url}",
                    f"FRONTIER_HOST_DELAY={delay}",
                    "DEPTH_LIMIT=3",
                    crawl,
                ]
                crawl_parallel(info["seeds"], workdir, settings, workers)
                times: dict[str, list[float]] = {}
                for line in log.read_text().splitlines():
                    r = json.loads(line)
                    if r["path"] != "/robots.txt":
                        times.setdefault(r["host"], []).append(r["t"])
                gaps, rates = [], []
                for t in times.values():
                    t.sort()
                    gaps += [b - a for a, b in pairwise(t)]
                    if len(t) > 1:
                        rates.append((len(t) - 1) / (t[-1] - t[0]))
                rows.append(
                    (
                        delay,
                        workers,
                        len(times),
                        min(gaps),
                        statistics.median(gaps),
                        statistics.mean(rates),
                    )
                )
                print(f"  done: delay {delay} s, {workers} workers", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n{'delay s':>8} {'workers':>8} {'hosts':>6} {'min gap s':>10} {'median gap s':>13} "
        f"{'req/s/host':>11} {'configured':>11}"
    )
    for delay, workers, hosts, low, mid, rate in rows:
        print(
            f"{delay:>8.2f} {workers:>8} {hosts:>6} {low:>10.3f} {mid:>13.3f} {rate:>11.2f} "
            f"{1 / delay:>11.2f}"
        )
    return 0


def run_memory(args: argparse.Namespace) -> int:
    """Bytes per URL in Redis: the queue, the exact dupefilter, the Bloom filter."""
    import hashlib

    import redis
    from scrapy import Request, Spider

    from webcrawl.frontier.bloom import BloomParams
    from webcrawl.frontier.keys import CrawlKeys
    from webcrawl.frontier.queue import HostQueue

    n = args.urls
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-"))
    try:
        with tcp_redis(workdir) as url:
            client = redis.Redis.from_url(url)
            spider = Spider(name="web")
            urls = [
                f"https://www.example{i % 50}.com/section-{i % 97}/article-{i}.html"
                for i in range(n)
            ]
            rows = []
            # a link as a spider makes it: its depth, and its page's URL as its Referer
            for name, hosts in (
                ("queue, 50 hosts (long queues)", 50),
                ("hot queues, 100 per host", max(1, n // 100)),
                ("short queues, 10 per host", max(1, n // 10)),
            ):
                keys = CrawlKeys(f"mem{hosts}")
                queue = HostQueue(client, spider, keys)
                for start in range(0, n, 1000):
                    pushes = []
                    for i in range(start, min(n, start + 1000)):
                        host = f"www.example{i % hosts}.com"
                        u = f"https://{host}/section-{i % 97}/article-{i}.html"
                        request = Request(
                            u,
                            meta={"depth": 3},
                            headers={"Referer": f"https://{host}/section-{i % 97}/"},
                        )
                        fp = hashlib.sha1(u.encode()).digest()
                        pushes.append((fp, host, 0, 0.0, queue.encode(request)))
                    queue.step(now=0, pushes=pushes, pop=False)
                queue_bytes = sum(
                    client.memory_usage(k) or 0
                    for k in client.scan_iter(match=f"webcrawl:{{mem{hosts}:*}}:hq:*")
                )
                rows.append((name, queue_bytes / n, None))
            entry = len(pushes[-1][-1])
            set_bytes = sum(client.memory_usage(k.seen) or 0 for k in keys.all_shards())
            rows.append(("dupefilter: exact set", set_bytes / n, 0.0))
            for rate in (0.01, 0.001):
                params = BloomParams(n, rate)
                key = f"bloom-{rate}"
                client.set(key, bytes(-(-params.bits // 8)))  # as RedisBloomDupeFilter does
                pipe = client.pipeline(transaction=False)
                for u in urls:
                    for offset in params.offsets(hashlib.sha1(u.encode()).digest()):
                        pipe.setbit(key, offset, 1)
                pipe.execute()
                probes, hits = min(n, 100_000), 0
                for i in range(probes):
                    offsets = params.offsets(hashlib.sha1(f"other-{i}".encode()).digest())
                    pipe = client.pipeline(transaction=False)
                    for offset in offsets:
                        pipe.getbit(key, offset)
                    hits += all(pipe.execute())
                rows.append(
                    (
                        f"dupefilter: Bloom at {rate:.1%}",
                        client.memory_usage(key) / n,
                        hits / probes,
                    )
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{n} URLs; a queue entry of a typical link: {entry} bytes (its URL {len(urls[-1])})")
    print(f"{'structure':<32} {'bytes/URL':>10} {'false positives':>16}")
    for name, per_url, fp_rate in rows:
        shown = "-" if fp_rate is None else f"{fp_rate:.3%}"
        print(f"{name:<32} {per_url:>10.1f} {shown:>16}")
    return 0
