"""``python -m tools.bench layouts``: what a synthetic page's shared frontier work costs
one Redis core as plain pipelined commands, in the frontier's data layout and in others.

``webcrawl bench frontier`` reports its native floor: the least Redis work of a page as
plain commands on the key space the run left, in today's layout (a seen set of 20-byte
fingerprints per shard; host queues in sorted sets).  This asks whether another layout
would have a lower floor.  It builds ``bench frontier``'s synthetic key space (hosts in
shards, each host's navigation and some articles known, a few requests queued a host),
then times pages of plain commands in each layout, the layouts interleaved over rounds
so that a slow spell of the machine hits them all:

- ``P``: a page's pop, lease and acknowledgement only (no links);
- ``A``: today's layout: P, the links sent looked up (SMISMEMBER per shard and step),
  the new ones added (SADD per shard and step, ZADD per host and page);
- ``B``: as A, but a seen set per host of 8-byte integer fingerprints (Redis's intset:
  one contiguous array a host, where A's members are scattered over the shard's table);
- ``C``: as A, but host queues as lists (RPUSH, LPOP: no ordered insert, no priority);
- ``BC``: both;
- ``L``: BC made atomic the only way a frontier can on any Redis server, a Lua script:
  a call a page (``--script-pages``), the least such a step can do (a page's pop,
  lease and acknowledgement; a host's links looked up with one SMISMEMBER, the new ones
  added with one SADD and one RPUSH), nothing else a frontier needs (no host turns,
  budgets, cold tier, priorities, delays, revisits).

P to BC are plain commands, no atomicity: a frontier whose steps must be atomic costs
more than its layout's floor; L shows how much more at least.  Redis CPU a page is
``INFO cpu``'s user and system time over the pages.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import zlib
from pathlib import Path
from typing import Any

from webcrawl.bench.common import tcp_redis
from webcrawl.bench.frontier import article_urls, fingerprint, host_name, nav_urls
from webcrawl.frontier import members

VARIANTS = ("P", "A", "B", "C", "BC", "L")
NAV, KNOWN_ARTICLES, QUEUED = 45, 10, 5  # per host: navigation, articles known, queued
BUILD_BATCH = 500  # hosts per pipeline while building
DATA = b"x" * 112  # a request's encoding, about the size of bench frontier's
# L: --script-pages pages in one call, their keys in ARGV (one Redis, no
# cluster); per page: ready, the host's list, leases, leased, lease id, the page's
# number, the lease's member, n hosts of its links, then per host: seen key, list key,
# n, n fingerprints, n members
STEP_SCRIPT = """
local a, i = ARGV, 1
while i <= #a do
  redis.call('ZPOPMIN', a[i])
  redis.call('LPOP', a[i + 1])
  redis.call('ZADD', a[i], a[i + 5], a[i + 1])
  redis.call('ZADD', a[i + 2], a[i + 5], a[i + 4])
  redis.call('HSET', a[i + 3], a[i + 4], a[i + 6])
  redis.call('ZREM', a[i + 2], a[i + 4])
  redis.call('HDEL', a[i + 3], a[i + 4])
  local hosts = tonumber(a[i + 7])
  i = i + 8
  for _ = 1, hosts do
    local seen, list, n = a[i], a[i + 1], tonumber(a[i + 2])
    i = i + 3
    local known = redis.call('SMISMEMBER', seen, unpack(a, i, i + n - 1))
    local fps, entries = {}, {}
    for k = 1, n do
      if known[k] == 0 then
        fps[#fps + 1] = a[i + k - 1]
        entries[#entries + 1] = a[i + n + k - 1]
      end
    end
    if #fps > 0 then
      redis.call('SADD', seen, unpack(fps))
      redis.call('RPUSH', list, unpack(entries))
    end
    i = i + 2 * n
  end
end
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=100_000, help="synthetic hosts")
    p.add_argument("--shards", type=int, default=128)
    p.add_argument("--pages", type=int, default=20_000, help="pages per layout and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every layout")
    p.add_argument(
        "--sent",
        type=float,
        default=14.8,
        help="links a page sends to Redis (bench frontier's 'links/page reaching Redis')",
    )
    p.add_argument("--new", type=float, default=12.6, help="of them new (added)")
    p.add_argument("--prefetch", type=int, default=16, help="pages a pipeline (a step's)")
    p.add_argument(
        "--script-pages",
        type=int,
        default=1,
        help="L: pages a script call (default 1: measured cheaper than a pipeline's 16)",
    )
    p.add_argument(
        "--variants",
        type=lambda v: v.split(","),
        default=list(VARIANTS),
        metavar="P,A,B,C,BC",
        help="layouts measured (default all)",
    )
    p.add_argument("--redis-server", metavar="PATH", help="the redis-server to measure")


def _int_fingerprint(url: str) -> bytes:
    """An 8-byte fingerprint as the decimal integer Redis keeps in an intset."""
    return b"%d" % int.from_bytes(fingerprint(url)[:8], "big", signed=True)


class Layouts:
    """The synthetic key space in every layout at once, and a page's plain commands."""

    def __init__(self, client: Any, args: argparse.Namespace) -> None:
        self.r, self.args = client, args
        self.shard_of: dict[str, int] = {}
        # a pipeline's fingerprints, by seen key: to look up, and to add
        self.checks: dict[str, list[bytes]] = {}
        self.adds: dict[str, list[bytes]] = {}

    def shard(self, host: str) -> int:
        s = self.shard_of.get(host)
        if s is None:
            s = self.shard_of[host] = zlib.crc32(host.encode()) % self.args.shards
        return s

    def seen_key(self, variant: str, host: str) -> str:
        s = self.shard(host)
        return f"seenh:{{{s}}}:{host}" if "B" in variant else f"seen:{{{s}}}"

    def build(self) -> None:
        pipe = self.r.pipeline(transaction=False)
        for i in range(self.args.hosts):
            host = host_name(i)
            s = self.shard(host)
            urls = nav_urls(host, NAV) + article_urls(host, KNOWN_ARTICLES)
            queued = [members.member(i * 10 + k, DATA) for k in range(QUEUED)]
            pipe.sadd(f"seen:{{{s}}}", *[fingerprint(u) for u in urls])
            pipe.sadd(f"seenh:{{{s}}}:{host}", *[_int_fingerprint(u) for u in urls])
            pipe.zadd(f"hq:{{{s}}}:{host}", {m: -1 for m in queued})
            pipe.rpush(f"hl:{{{s}}}:{host}", *queued)
            pipe.zadd(f"ready:{{{s}}}", {host: i}).zadd(f"readyl:{{{s}}}", {host: i})
            if i % BUILD_BATCH == BUILD_BATCH - 1:
                pipe.execute()
        pipe.execute()

    def cpu(self) -> float:
        info = self.r.info("cpu")
        return info["used_cpu_user"] + info["used_cpu_sys"]

    def run(self, variant: str, seed: int) -> float:
        """Redis CPU µs a page of ``args.pages`` pages in ``variant``."""
        a, rng = self.args, random.Random(seed)
        pipe = self.r.pipeline(transaction=False)
        script = self.r.register_script(STEP_SCRIPT)
        self.r.script_load(STEP_SCRIPT)  # (loaded before the pages are timed)
        step: list[Any] = []
        self.checks, self.adds = {}, {}
        began = self.cpu()
        for page in range(a.pages):
            host = host_name(rng.randrange(a.hosts))
            page_id = seed * 10**7 + page
            if variant == "L":
                step += self._page_args(rng, page_id, host)
            else:
                self._pop_lease_ack(pipe, "C" in variant, page_id, host)
                if variant != "P":
                    self._plain_links(variant, rng, page_id, host, pipe)
            if step and (page % a.script_pages == a.script_pages - 1 or page == a.pages - 1):
                script(args=step, client=pipe)
                step = []
            if page % a.prefetch == a.prefetch - 1 or page == a.pages - 1:
                for key, fps in self.checks.items():
                    pipe.execute_command("SMISMEMBER", key, *fps)
                for key, fps in self.adds.items():
                    pipe.sadd(key, *fps)
                self.checks, self.adds = {}, {}
                pipe.execute()
        return (self.cpu() - began) / a.pages * 1e6

    def _plain_links(
        self, variant: str, rng: random.Random, page: int, host: str, pipe: Any
    ) -> None:
        """A page's links as plain commands: the requests queued in ``pipe``, the
        fingerprints to look up and add kept for the pipeline's end."""
        looked, added, queued = self._links(variant, rng, page, host)
        for key, value in looked:
            self.checks.setdefault(key, []).append(value)
        for key, value in added:
            self.adds.setdefault(key, []).append(value)
        for target, entries in queued.items():
            t = self.shard(target)
            if "C" in variant:
                pipe.rpush(f"hl:{{{t}}}:{target}", *entries)
            else:
                pipe.zadd(f"hq:{{{t}}}:{target}", {m: -1 for m in entries})

    def _pop_lease_ack(self, pipe: Any, lists: bool, page: int, host: str) -> None:
        """A page's turn and request popped, its lease taken and acknowledged."""
        s, lease = self.shard(host), f"l{page}"
        if lists:
            pipe.zpopmin(f"readyl:{{{s}}}").lpop(f"hl:{{{s}}}:{host}")
            pipe.zadd(f"readyl:{{{s}}}", {host: page})
        else:
            pipe.zpopmin(f"ready:{{{s}}}").zpopmin(f"hq:{{{s}}}:{host}")
            pipe.zadd(f"ready:{{{s}}}", {host: page})
        pipe.zadd(f"leases:{{{s}}}", {lease: page})
        pipe.hset(f"leased:{{{s}}}", lease, members.member(page, DATA))
        pipe.zrem(f"leases:{{{s}}}", lease).hdel(f"leased:{{{s}}}", lease)

    def _page_args(self, rng: random.Random, page: int, host: str) -> list[Any]:
        """L: a page's part of STEP_SCRIPT's arguments."""
        s, lease = self.shard(host), f"l{page}"
        args: list[Any] = [f"readyl:{{{s}}}", f"hl:{{{s}}}:{host}", f"leases:{{{s}}}"]
        args += [f"leased:{{{s}}}", lease, page, members.member(page, DATA)]
        looked, added, queued = self._links("BC", rng, page, host)
        new = {fp for _, fp in added}
        by_key: dict[str, list[bytes]] = {}
        for key, fp in looked:
            by_key.setdefault(key, []).append(fp)
        args.append(len(by_key))
        for key, fps in by_key.items():
            target = key.split(":", 2)[2]
            entries = iter(queued.get(target, []))
            # (a known link's member is never queued: any bytes hold its place)
            data = [next(entries) if fp in new else b"" for fp in fps]
            t = self.shard(target)
            args += [key, f"hl:{{{t}}}:{target}", len(fps), *fps, *data]
        return args

    def _links(
        self, variant: str, rng: random.Random, page: int, host: str
    ) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]], dict[str, list[bytes]]]:
        """A page's links: (seen key, fingerprint) of the ``--sent`` looked up and of the
        ``--new`` of them added, and the requests queued by host; a new link goes to the
        page's host (10 in 12.6, as bench frontier's articles) or to another host."""
        a = self.args
        fp = _int_fingerprint if "B" in variant else fingerprint
        new = int(a.new) + (rng.random() < a.new % 1)
        sent = max(new, int(a.sent) + (rng.random() < a.sent % 1))
        looked, added, queued = [], [], {}
        for n in range(sent):
            if n < new:
                target = host if rng.random() < 10 / 12.6 else host_name(rng.randrange(a.hosts))
                url = f"http://{target}/n/{page}-{n}"
                queued.setdefault(target, []).append(members.member(page * 100 + n, DATA))
                added.append((self.seen_key(variant, target), fp(url)))
            else:
                target = host
                url = f"http://{host}/a/{rng.randrange(KNOWN_ARTICLES)}"
            looked.append((self.seen_key(variant, target), fp(url)))
        return looked, added, queued


def run(args: argparse.Namespace) -> int:
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"--variants: unknown layouts {sorted(unknown)} (of {VARIANTS})")
    numbers = ("hosts", "shards", "pages", "rounds", "prefetch", "script_pages")
    small = [f"--{n.replace('_', '-')}" for n in numbers if getattr(args, n) < 1]
    if small:
        raise SystemExit(f"{', '.join(small)}: must be >= 1")
    import redis

    with tempfile.TemporaryDirectory() as work, tcp_redis(Path(work), args.redis_server) as url:
        client = redis.Redis.from_url(url)
        version = client.info("server")["redis_version"]
        layouts = Layouts(client, args)
        layouts.build()
        memory = client.info("memory")["used_memory_human"]
        print(
            f"Redis {version}; {args.hosts} hosts in {args.shards} shards, every layout "
            f"built at once ({memory}); {args.pages} pages a layout and round, "
            f"{args.sent} links sent and {args.new} new a page"
        )
        results: dict[str, list[float]] = {v: [] for v in args.variants}
        for rnd in range(args.rounds):
            for i, variant in enumerate(args.variants):
                results[variant].append(layouts.run(variant, seed=rnd * 100 + i))
        print()
        print("layout   " + "".join(f"round {r + 1:<4}" for r in range(args.rounds)) + "median")
        for variant, values in results.items():
            cells = "".join(f"{v:>8.1f}  " for v in values)
            print(f"{variant:<8} {cells}{statistics.median(values):>6.1f}")
        print(
            "\n(Redis CPU µs a page; P to BC: plain pipelined commands, no atomicity; L: "
            f"BC's work, atomic: {args.script_pages} page(s) a script call)"
        )
    return 0
