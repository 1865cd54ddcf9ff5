"""``python -m tools.bench redis_profile``: the frontier's Redis work a page, counted in
instructions, not timed.

Redis CPU per page (``webcrawl bench frontier``) varies by ±15 % between runs on a shared
machine, more than most changes to a script save.  This runs ``bench frontier``'s workload
(its synthetic pages, or ``--graph``) for a fixed number of pages with one worker that
owns every shard, against a redis-server under valgrind's callgrind, and counts the
instructions Redis executes meanwhile: the same code gives the same count to a fraction
of a percent, on any machine.  It splits them into what the commands themselves cost,
what the Lua around them costs, the rest (reading requests, writing replies, the event
loop), and shows the costliest commands and functions.

Deterministic by construction: the worker's random numbers are seeded, a shard's links
leave by batch size only (``FRONTIER_SHARD_WAIT`` is set beyond the run), and the
frontier runs on a simulated clock (its scripts' "now" included) that each page moves on
by a millisecond, so its looks and every score are the same whatever valgrind's speed.
The seen set and the seeds are loaded natively and saved; only the measured pages run
under valgrind (``--instr-atstart=no``), from that snapshot.  Compare two checkouts by
running it in each (``git worktree add``).
Needs valgrind (``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from webcrawl.bench import frontier as bf
from webcrawl.bench.common import redis_server_args, tcp_redis
from webcrawl.frontier.embedded_redis import redis_server_binary

HOSTS = 25_000  # synthetic hosts: as many as each of bench frontier's 4 workers owns
SHARD_WAIT = 1e9  # links leave by batch size only
# the frontier's clock while measured (the scripts' "now" too): a time after the seeds',
# moved on by a millisecond a page (a worker's 1 000 pages/s)
START, PAGE_TIME = 4e9, 0.001
# callgrind_annotate's function names (file:function; 'N: a recursion's inner level)
_LINE = re.compile(r"^\s*([\d,]+) \([\s\d.]+%\)\s+(\S+)")


def config(args: argparse.Namespace, url: str, data_dir: str) -> bf.Config:
    """``bench frontier``'s Config for one worker (its defaults, its copies of a graph)."""
    if args.hosts is None and not args.graph:
        args.hosts = HOSTS
    hosts, _, _ = bf.settings_of(args)
    copies = 1
    if args.graph:
        recorded = bf._recorded(args.graph)
        copies = max(1, -(-hosts // len(recorded.hosts)))
        hosts = copies * len(recorded.hosts)
    return bf.Config(
        url=url,
        data_dir=data_dir,
        crawl="profile",
        shards=args.shards,
        hosts=hosts,
        workers=1,
        links=args.links,
        prefetch=args.prefetch,
        parent=0,
        graph=args.graph,
        copies=copies,
        shard_wait=SHARD_WAIT,
    )


class _Go:
    value = bf.GO  # the parent's control value: never STOP (the driver counts pages)


def worker(cfg: bf.Config) -> bf.Worker:
    w = bf.Worker(cfg, _Go(), [0.0] * len(bf.FIELDS))
    w.rng = random.Random(7)
    return w


def drive(w: bf.Worker, pages: int) -> None:
    """``pages`` pages of ``bench frontier``'s worker loop, then its links and acks out,
    on a simulated clock that a page moves on by ``PAGE_TIME``."""
    done = 0
    w.now = START
    while done < pages:
        while w.prefetched and done < pages:
            w.process(*w.prefetched.popleft())
            done += 1
            w.now += PAGE_TIME
        if done >= pages:
            break
        result = w.step(pop=w.cfg.prefetch)
        w.prefetched.extend(result.popped)
        if not result.popped:
            if not w.outbox.held():
                raise RuntimeError(f"the frontier ran out of work after {done} pages")
            w.step(pop=False, flush=True)
    if w.prefetched:  # popped but not processed: handed back, as a closing worker does
        w.queue.renew([lease for _, lease in w.prefetched], 0.0)
        w.prefetched.clear()
    w.step(pop=False, flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def under_callgrind(binary: str, workdir: Path, out: Path) -> Iterator[tuple[str, int]]:
    """redis-server from ``workdir``'s dump.rdb under callgrind, counting nothing until
    told: (its URL, valgrind's pid)."""
    import redis

    port = _free_port()
    args = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
        *redis_server_args(binary, port, workdir),
    ]
    log = (workdir / "valgrind.log").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 600  # loading the snapshot is 50x slower in valgrind
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"valgrind exited at start: see {workdir / 'valgrind.log'}")
            try:
                redis.Redis.from_url(url).ping()
                break
            except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()


def control(*args: str) -> None:
    """callgrind_control with ``args``."""
    subprocess.run(
        ["callgrind_control", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def dump_total(workdir: Path, pid: int) -> int:
    """The instructions counted since the last dump (or the start) of the callgrind at
    ``pid``, writing to ``workdir``: dumped, read and the dump removed."""
    before = set(workdir.glob("callgrind.out.*"))
    control("-d", str(pid))
    dumps = set(workdir.glob("callgrind.out.*")) - before
    if len(dumps) != 1:
        raise RuntimeError(f"callgrind wrote {len(dumps)} profiles, not one")
    path = dumps.pop()
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            path.unlink()
            return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals line")


def profile(args: argparse.Namespace, workdir: Path) -> tuple[Path, bf.Worker]:
    """Load and save the keyspace natively, then ``--pages`` pages under callgrind: the
    profile's file and the worker (its counts)."""
    binary = args.redis_server or redis_server_binary()
    with tcp_redis(workdir, binary) as url:
        w = worker(config(args, url, str(workdir)))
        w.prefill()
        w.seed()
        w.redis.client.save()
        w.redis.close()
    out = workdir / "callgrind.out"
    with under_callgrind(binary, workdir, out) as (url, pid):
        w = worker(config(args, url, str(workdir)))
        w.prefill_cache()
        control("-i", "on", str(pid))
        drive(w, args.pages)
        control("-i", "off", str(pid))
        control("-d", str(pid))
        w.redis.close()
    dumps = sorted(workdir.glob("callgrind.out.*"))
    if not dumps:
        raise RuntimeError("callgrind wrote no profile")
    return dumps[-1], w


def inclusive(path: Path) -> tuple[int, dict[str, int]]:
    """(total instructions, inclusive instructions by function) of a callgrind file."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total, functions = 0, {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        count, name = int(match[1].replace(",", "")), match[2]
        if name == "PROGRAM":
            total = count
        else:  # file:function, or ???:function without debug information
            functions.setdefault(name.rsplit(":", 1)[-1], count)
    if "evalGenericCommand" not in functions:
        raise RuntimeError(
            f"{path}: no function names (a redis-server without its symbols?): the split needs them"
        )
    return total, functions


def split(total: int, fn: dict[str, int]) -> list[tuple[str, int]]:
    """The instructions' parts: commands, the Lua around them, the rest."""

    def get(name: str) -> int:
        return fn.get(name, 0)

    scripts = get("evalGenericCommand")
    in_scripts = get("call'2")  # the commands a script calls (call within call)
    commands = get("call")
    conversions = get("strtod") + get("__vfprintf_internal")
    return [
        ("commands called by scripts", in_scripts),
        ("Lua: the scripts around them", scripts - in_scripts),
        ("commands sent by the workers", commands - scripts),
        ("reading requests, replies, event loop", total - commands),
        ("(of all: numbers to text and back)", conversions),
    ]


def costliest_commands(fn: dict[str, int], shown: int) -> list[tuple[str, int]]:
    found = [
        (name, n)
        for name, n in fn.items()
        if re.fullmatch(r"[a-z]+Command", name)
        and name not in ("evalShaCommand", "evalCommand", "processCommand")
    ]
    return sorted(found, key=lambda kv: -kv[1])[:shown]


def run(args: argparse.Namespace) -> int:
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
        if not shutil.which(tool):
            raise SystemExit(f"redis_profile: {tool} is missing (apt-get install valgrind)")
    if args.pages < 1:
        raise SystemExit("redis_profile: --pages must be >= 1")
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-redis-profile-"))
    try:
        path, w = profile(args, workdir)
        total, fn = inclusive(path)
        if args.keep:
            shutil.copy(path, args.keep)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    pages, c = args.pages, w.counts
    cfg = w.cfg
    print(bf.describe(cfg))
    print(
        f"{pages} pages by one worker that owns all {cfg.shards} shards; per page: "
        f"{c['links'] / pages:.1f} links, {c['pushed'] / pages:.1f} sent to Redis, "
        f"{c['added'] / pages:.1f} new; {c['steps'] / pages:.2f} steps."
    )
    print()
    print(f"{'Redis instructions per page':<40} {'thousands':>10} {'share':>7}")
    print(f"{'all':<40} {total / pages / 1e3:>10.1f} {100:>6.0f}%")
    for name, n in split(total, fn):
        print(f"{name:<40} {n / pages / 1e3:>10.1f} {100 * n / total:>6.0f}%")
    print()
    print(f"{'costliest commands (inclusive)':<40} {'thousands':>10} {'share':>7}")
    for name, n in costliest_commands(fn, args.shown):
        print(f"{name:<40} {n / pages / 1e3:>10.1f} {100 * n / total:>6.0f}%")
    print(
        "(callgrind's instruction counts of the redis-server while the pages ran: the same "
        "for the same code and workload on any machine; a page's Redis µs on a machine are "
        "about these thousands divided by its instructions per µs)"
    )
    if args.keep:
        print(f"the profile: {args.keep} (callgrind_annotate, kcachegrind)")
    return 0
