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
- ``L``: BC made atomic by a Lua script, a call a page (``--script-pages``): a page's
  pop, lease and acknowledgement; a host's links looked up with one SMISMEMBER, the
  new ones added with one SADD and one RPUSH; nothing else a frontier needs (no host
  turns, budgets, cold tier, priorities, delays, revisits);
- ``L2``: L with less: a request popped and leased at once (LMOVE to a list of the
  worker's leases, acknowledged by LREM: a lease expires with its worker, not on its
  own), and a host with one link sent takes a SADD alone;
- ``M``: atomic without Lua, MULTI/EXEC: a host's sorted set is its seen set and its
  queue at once (a URL's score says queued, leased or done; its request in a hash of
  the host), so a link needs no lookup: ``ZADD NX`` adds only what is new, ``HSETNX``
  its request.  A step reads its pops first (the host's first queued URL), then writes
  its pages in one transaction: leases, acknowledgements, links.  A sketch of the
  protocol, not proven: its requests of links already done are left behind in the
  hashes, and a crash between the reads and the transaction is not handled;
- ``O``: atomic without Lua, optimistically: C's layout (a seen set a shard, host queues
  as lists), a step's pages popped from one shard as ``step.lua`` pops them.  A step
  WATCHes the shard's ready set and seen set and reads the hosts whose turn it is, then
  WATCHes their queues and reads their heads and its links' fingerprints (two round
  trips), then writes in one MULTI/EXEC: pops, new turns, the hosts found empty out of
  the ready set, leases, acknowledgements, the new links and their hosts' turns.  A
  change to a watched key in between aborts it, and the step reads again.  The queues
  are watched because a head can change with no change to the ready set (a pop whose
  new turn is its host's old score; a request put back first).  Links to other shards
  wait in an outbox a shard and leave ``--outbox`` at a time, each batch its own
  transaction (WATCH the shard's seen set, look up, write); a page's lease is
  acknowledged (in a later step on its shard) once all its links are stored, as the
  frontier's outbox does.  Lease ids are new at every attempt.  Like L, it has no host
  delays, priorities, budgets, cold tier, delayed requests, revisits or lease expiry;
- ``OZ``: O with A's sorted-set host queues, so priorities (a pop removes the request it
  read).

P to BC are plain commands, no atomicity: a frontier whose steps must be atomic costs
more than its layout's floor; L, L2, M, O and OZ show how much more.  Redis CPU a page
is ``INFO cpu``'s user and system time over the pages; with ``--count``, the
instructions Redis runs a page, counted by callgrind (deterministic, as
``tools.bench redis_profile``'s).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
from pathlib import Path
from shutil import which
from typing import Any

from webcrawl.bench.common import redis_cpu, tcp_redis
from webcrawl.bench.frontier import article_urls, fingerprint, host_name, nav_urls
from webcrawl.frontier import members
from webcrawl.frontier.embedded_redis import redis_server_binary
from webcrawl.frontier.keys import shard_of

VARIANTS = ("P", "A", "B", "C", "BC", "L", "L2", "M", "O", "OZ")
# O, OZ: a link: seen key, fingerprint, host, its request if new, and (shard, lease) of
# the page it is on
Link = tuple[str, bytes, str, bytes | None, tuple[int, str]]
NAV, KNOWN_ARTICLES, QUEUED = 45, 10, 5  # per host: navigation, articles known, queued
BUILD_BATCH = 500  # hosts per pipeline while building
DATA = b"x" * 112  # a request's encoding, about the size of bench frontier's
# M: a URL's score in its host's sorted set: queued (its order, below QUEUED_MAX), leased
# or done
QUEUED_MAX, LEASED, DONE = 1e15, 2e15, 3e15
# L and L2: per host of a page's links (hosts of them, from a[i]): seen key, list key,
# n, n fingerprints, n members; the new ones added (lean: a host's one link by SADD
# alone, no lookup first).  Returns where the next page starts.
ADD_LINKS = """
local a = ARGV
local function add_links(i, hosts, lean)
  for _ = 1, hosts do
    local seen, list, n = a[i], a[i + 1], tonumber(a[i + 2])
    i = i + 3
    if lean and n == 1 then
      if redis.call('SADD', seen, a[i]) == 1 then redis.call('RPUSH', list, a[i + 1]) end
    else
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
    end
    i = i + 2 * n
  end
  return i
end
"""


def _pages_script(page: str) -> str:
    """A script of --script-pages pages: each its host's turn popped, then ``page``."""
    head = "local i = 1\nwhile i <= #a do\n  redis.call('ZPOPMIN', a[i])"
    return f"{ADD_LINKS}{head}{page}end\n"


# L: --script-pages pages in one call, their keys in ARGV (one Redis, no cluster); per
# page: ready, the host's list, leases, leased, lease id, the page's number, the lease's
# member, the host, n hosts of its links, then its links (ADD_LINKS)
STEP_SCRIPT = _pages_script("""
  redis.call('LPOP', a[i + 1])
  redis.call('ZADD', a[i], a[i + 5], a[i + 7])
  redis.call('ZADD', a[i + 2], a[i + 5], a[i + 4])
  redis.call('HSET', a[i + 3], a[i + 4], a[i + 6])
  redis.call('ZREM', a[i + 2], a[i + 4])
  redis.call('HDEL', a[i + 3], a[i + 4])
  i = add_links(i + 9, tonumber(a[i + 8]), false)
""")
# L2: L with less: a page's request popped and leased at once, LMOVE to the worker's
# list of leases (whose deadline would be the worker's, not a lease's), acknowledged by
# LREM; a host with one link sent adds it with SADD alone.  Per page: ready, the host's
# list, the worker's leases, the page's number, the host, n hosts of its links, then its
# links
LEAN_SCRIPT = _pages_script("""
  local got = redis.call('LMOVE', a[i + 1], a[i + 2], 'LEFT', 'RIGHT')
  redis.call('ZADD', a[i], a[i + 3], a[i + 4])
  if got then redis.call('LREM', a[i + 2], '1', got) end
  i = add_links(i + 6, tonumber(a[i + 5]), true)
""")


def add_arguments(p: argparse.ArgumentParser) -> None:
    for name, default, text in (
        ("--hosts", 100_000, "synthetic hosts"),
        ("--shards", 128, "shards the hosts are in"),
        ("--pages", 20_000, "pages per layout and round"),
        ("--rounds", 3, "rounds of every layout"),
        ("--prefetch", 16, "pages a pipeline (a step's)"),
        ("--script-pages", 1, "L, L2: pages a script call (1: cheaper than 16, measured)"),
        ("--outbox", 32, "O, OZ: links to another shard a batch (FRONTIER_SHARD_BATCH's)"),
        ("--clients", 1, "O, OZ: processes sending at once, each owning its share of shards"),
    ):
        p.add_argument(name, type=int, default=default, help=f"{text} (default %(default)s)")
    for name, default, text in (
        ("--sent", 14.8, "links a page sends to Redis (bench frontier's 'pushed/page')"),
        ("--new", 12.6, "of them new (added)"),
    ):
        p.add_argument(name, type=float, default=default, help=f"{text} (default %(default)s)")
    p.add_argument(
        "--variants",
        type=lambda v: v.split(","),
        default=[v for v in VARIANTS if v != "M"],
        metavar="P,A,...",
        help=f"layouts measured, of {','.join(VARIANTS)} (default all but M, whose key "
        "space is another: measure it beside A, --variants A,M)",
    )
    p.add_argument("--redis-server", metavar="PATH", help="the redis-server to measure")
    p.add_argument(
        "--count",
        action="store_true",
        help="count Redis's instructions a page under callgrind instead of timing its CPU "
        "(needs valgrind; slower, and the same on any machine)",
    )


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
        self.m_pages: list[tuple[Any, ...]] = []  # M: a step's pages
        self.wire: _Wire | None = None  # O, OZ: their connection
        self.transactions = 0  # O, OZ: transactions sent
        # O, OZ: lease ids (a prefix a process), the links a lease's page still has in
        # an outbox, and by shard the leases due acknowledgement (all their links stored)
        self.lease_prefix, self.lease_count = f"l{os.getpid()}.", 0
        self.waiting: dict[str, int] = {}
        self.acks: dict[int, list[str]] = {}
        self.aborted = 0  # O, OZ: of them, aborted (a watched key changed)

    def shard(self, host: str) -> int:
        s = self.shard_of.get(host)
        if s is None:
            s = self.shard_of[host] = shard_of(host, self.args.shards)
        return s

    def seen_key(self, variant: str, host: str) -> str:
        s = self.shard(host)
        if variant == "M":
            return f"hz:{{{s}}}:{host}"
        return f"seenh:{{{s}}}:{host}" if "B" in variant else f"seen:{{{s}}}"

    def build(self) -> None:
        """The key space of the layouts measured (only theirs: a larger one costs every
        layout more cache misses)."""
        uses = set(self.args.variants)
        seen, seenh = uses & {"A", "C", "O", "OZ"}, uses & {"B", "BC", "L", "L2"}
        ordered, lists = uses & {"P", "A", "B", "OZ"}, uses & {"C", "BC", "L", "L2", "O"}
        pipe = self.r.pipeline(transaction=False)
        for i in range(self.args.hosts):
            host = host_name(i)
            s = self.shard(host)
            urls = nav_urls(host, NAV) + article_urls(host, KNOWN_ARTICLES)
            queued = [members.member(i * 10 + k, DATA) for k in range(QUEUED)]
            if seen:
                pipe.sadd(f"seen:{{{s}}}", *[fingerprint(u) for u in urls])
            if seenh:
                pipe.sadd(f"seenh:{{{s}}}:{host}", *[_int_fingerprint(u) for u in urls])
            if ordered:
                pipe.zadd(f"hq:{{{s}}}:{host}", {m: -1 for m in queued})
                pipe.zadd(f"ready:{{{s}}}", {host: i})
            if lists:
                pipe.rpush(f"hl:{{{s}}}:{host}", *queued).zadd(f"readyl:{{{s}}}", {host: i})
            if "M" in uses:
                waiting = [_int_fingerprint(f"http://{host}/q/{k}") for k in range(QUEUED)]
                states = {_int_fingerprint(u): DONE for u in urls}
                states.update({fp: k for k, fp in enumerate(waiting)})
                pipe.zadd(f"hz:{{{s}}}:{host}", states).zadd(f"readym:{{{s}}}", {host: i})
                pipe.hset(f"hd:{{{s}}}:{host}", mapping=dict(zip(waiting, queued, strict=True)))
            if i % BUILD_BATCH == BUILD_BATCH - 1:
                pipe.execute()
        pipe.execute()

    def run(self, variant: str, seed: int) -> float:
        """Redis CPU µs a page of ``args.pages`` pages in ``variant``."""
        a, rng = self.args, random.Random(seed)
        if variant in {"O", "OZ"}:
            return self._run_optimistic(variant, rng, seed)
        pipe = self.r.pipeline(transaction=False)
        source = LEAN_SCRIPT if variant == "L2" else STEP_SCRIPT
        script = self.r.register_script(source)
        self.r.script_load(source)  # (loaded before the pages are timed)
        step: list[Any] = []
        self.checks, self.adds = {}, {}
        began = redis_cpu(self.r)
        for page in range(a.pages):
            host = host_name(rng.randrange(a.hosts))
            page_id = seed * 10**7 + page
            if variant in {"L", "L2"}:
                step += self._page_args(rng, page_id, host, lean=variant == "L2")
            elif variant == "M":
                self.m_pages.append((page_id, host, *self._links("M", rng, page_id, host)))
            else:
                self._pop_lease_ack(pipe, "C" in variant, page_id, host)
                if variant != "P":
                    self._plain_links(variant, rng, page_id, host, pipe)
            if step and (page % a.script_pages == a.script_pages - 1 or page == a.pages - 1):
                script(args=step, client=pipe)
                step = []
            if page % a.prefetch == a.prefetch - 1 or page == a.pages - 1:
                if self.m_pages:
                    self._transaction(self.m_pages)
                    self.m_pages = []
                for key, fps in self.checks.items():
                    pipe.execute_command("SMISMEMBER", key, *fps)
                for key, fps in self.adds.items():
                    pipe.sadd(key, *fps)
                self.checks, self.adds = {}, {}
                pipe.execute()
        return (redis_cpu(self.r) - began) / a.pages * 1e6

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
        leases, leased = _lease_keys(s)
        pipe.zadd(leases, {lease: page})
        pipe.hset(leased, lease, members.member(page, DATA))
        pipe.zrem(leases, lease).hdel(leased, lease)

    def _page_args(self, rng: random.Random, page: int, host: str, lean: bool) -> list[Any]:
        """L, L2: a page's part of STEP_SCRIPT's (LEAN_SCRIPT's) arguments."""
        s, lease = self.shard(host), f"l{page}"
        args: list[Any] = [f"readyl:{{{s}}}", f"hl:{{{s}}}:{host}"]
        if lean:
            args += [f"worker-leases:{{{s}}}", page, host]
        else:
            args += [*_lease_keys(s), lease, page]
            args += [members.member(page, DATA), host]
        looked, added, queued = self._links("BC", rng, page, host)
        new = {fp for _, fp in added}
        by_key = _by_key(looked)
        args.append(len(by_key))
        for key, fps in by_key.items():
            target = key.split(":", 2)[2]
            entries = iter(queued.get(target, []))
            # (a known link's member is never queued: any bytes hold its place)
            data = [next(entries) if fp in new else b"" for fp in fps]
            t = self.shard(target)
            args += [key, f"hl:{{{t}}}:{target}", len(fps), *fps, *data]
        return args

    def _transaction(self, pages: list[tuple[Any, ...]]) -> None:
        """M: a step's pops read, then its pages written in one MULTI/EXEC."""
        reads = self.r.pipeline(transaction=False)
        popped: dict[str, int] = {}  # (a host popped twice in a step: its first two)
        for _, host, *_ in pages:
            popped[host] = popped.get(host, 0) + 1
            s = self.shard(host)
            reads.zpopmin(f"readym:{{{s}}}")
        for host, n in popped.items():
            hz = f"hz:{{{self.shard(host)}}}:{host}"
            reads.zrangebyscore(hz, "-inf", QUEUED_MAX, start=0, num=n)
        firsts = dict(zip(popped, reads.execute()[len(pages) :], strict=True))
        tx = self.r.pipeline(transaction=True)
        for page, host, looked, _, _ in pages:
            s = self.shard(host)
            hz, hd, leases = f"hz:{{{s}}}:{host}", f"hd:{{{s}}}:{host}", _lease_keys(s)[0]
            tx.zadd(f"readym:{{{s}}}", {host: page})
            if firsts[host]:
                url = firsts[host].pop(0)
                lease = b"%s\n%s" % (host.encode(), url)
                tx.zadd(hz, {url: LEASED}, xx=True).zadd(leases, {lease: page})
                tx.zadd(hz, {url: DONE}, xx=True).zrem(leases, lease).hdel(hd, url)
            for key, fps in _by_key(looked).items():
                target = key.split(":", 2)[2]
                t = self.shard(target)
                tx.zadd(key, dict.fromkeys(fps, page % QUEUED_MAX), nx=True)
                for fp in fps:
                    tx.hsetnx(f"hd:{{{t}}}:{target}", fp, members.member(page, DATA))
                tx.zadd(f"readym:{{{t}}}", {target: page}, nx=True)
        tx.execute()

    def _run_optimistic(self, variant: str, rng: random.Random, seed: int) -> float:
        """O, OZ: Redis CPU µs a page, by one client or by ``--clients``."""
        began = redis_cpu(self.r)
        if self.args.clients == 1:
            self._optimistic(variant, rng, self.args.pages, seed * 10**7)
        else:
            self._in_processes(variant, seed)
        return (redis_cpu(self.r) - began) / self.args.pages * 1e6

    def _in_processes(self, variant: str, seed: int) -> None:
        """O, OZ by ``--clients`` processes at once, each its share of the pages, popped
        from the shards it owns (as the frontier's workers own shards: shard % clients),
        its links to any shard; their transactions and those read again added up."""
        import multiprocessing

        _FORKED["layouts"] = self
        n = self.args.clients
        jobs = [(variant, seed, k) for k in range(n)]
        with multiprocessing.get_context("fork").Pool(n) as pool:
            for transactions, aborted in pool.map(_client, jobs):
                self.transactions += transactions
                self.aborted += aborted

    def _optimistic(
        self,
        variant: str,
        rng: random.Random,
        pages: int,
        first_id: int,
        owned: tuple[int, int] | None = None,
    ) -> None:
        """O, OZ: ``pages`` pages (ids from ``first_id``) in steps of ``--prefetch`` from
        one shard (of those ``s % owned[1] == owned[0]``, if given), each step and each
        outbox batch an optimistic transaction."""
        a, zsets = self.args, variant == "OZ"
        self.wire = self.wire or _Wire(self.r)
        outbox: dict[int, list[Link]] = {}
        done, idle = 0, 0
        while done < pages:
            s = self.shard(host_name(rng.randrange(a.hosts)))  # (a shard with hosts)
            if owned and s % owned[1] != owned[0]:
                continue
            first = first_id + done
            page_ids = list(range(first, first + min(a.prefetch, pages - done)))
            popped, links = self._step_transaction(zsets, rng, s, page_ids)
            done += popped
            idle = 0 if popped else idle + 1
            if idle > 10 * a.shards:
                raise RuntimeError(f"{variant}: no host has a turn after {done} pages")
            for link in links:
                outbox.setdefault(self.shard(link[2]), []).append(link)
            for t in [t for t, batch in outbox.items() if len(batch) >= a.outbox]:
                self._push_transaction(zsets, t, outbox.pop(t))
        for t, batch in outbox.items():
            self._push_transaction(zsets, t, batch)
        self._acknowledge_all()

    def _keys(self, zsets: bool, s: int) -> tuple[str, str, str]:
        """O, OZ: a shard's ready set, seen set and host queues' prefix."""
        if zsets:
            return f"ready:{{{s}}}", f"seen:{{{s}}}", f"hq:{{{s}}}:"
        return f"readyl:{{{s}}}", f"seen:{{{s}}}", f"hl:{{{s}}}:"

    def _step_transaction(
        self, zsets: bool, rng: random.Random, s: int, page_ids: list[int]
    ) -> tuple[int, list[Link]]:
        """O, OZ: a step on shard ``s``: up to a page a page id, each its host's turn and
        request popped and leased, its links to the shard added, and the shard's leases
        whose links are all stored acknowledged, in one transaction that is read again
        when a watched key changed: (pages, their links to other shards)."""
        ready, seen, queue = self._keys(zsets, s)
        leases, leased = _lease_keys(s)
        while True:
            read = self._read_step(zsets, rng, s, page_ids)
            if read is None:
                return 0, []
            pages, links, heads, known = read
            tx: list[tuple[Any, ...]] = [("MULTI",)]
            turns, done, lease_at, to_lease, new_leases = [], [], [], [], []
            here, away = [], []
            for page, host in pages:
                if not heads[host]:  # (no request: its host leaves ready, unless pushed to)
                    done.append(host)
                    continue
                head = heads[host][0]
                tx.append(("ZREM", queue + host, head) if zsets else ("LPOP", queue + host))
                self.lease_count += 1
                lease = f"{self.lease_prefix}{self.lease_count}"  # (new at each attempt)
                turns += [page, host]
                lease_at += [page + 300, lease]
                to_lease += [lease, head]
                mine = [(*x, (s, lease)) for x in links[host]]
                here += [x for x in mine if x[0] == seen]
                away += [x for x in mine if x[0] != seen]
                new_leases.append((lease, sum(x[0] != seen for x in mine)))
            if turns:
                tx += [("ZADD", ready, *turns), ("ZADD", leases, *lease_at)]
                tx.append(("HSET", leased, *to_lease))
            if done:
                tx.append(("ZREM", ready, *done))
            acks = self.acks.get(s, [])
            if acks:
                tx += [("ZREM", leases, *acks), ("HDEL", leased, *acks)]
            tx += self._adds(zsets, s, here, known)
            self.transactions += 1
            if self.wire.send([*tx, ("EXEC",)])[-1] is None:
                self.aborted += 1
                continue
            self.acks[s] = []
            for lease, waiting in new_leases:  # (acknowledged once its links are stored)
                self.waiting[lease] = waiting
                if not waiting:
                    self.acks[s].append(lease)
            return len(new_leases), away

    def _read_step(
        self, zsets: bool, rng: random.Random, s: int, page_ids: list[int]
    ) -> tuple[list[tuple[int, str]], dict[str, Any], dict[str, Any], dict[bytes, int]] | None:
        """O, OZ: a step's reads, its keys watched: (pages (id, host whose turn it is),
        their links, their hosts' queues' heads, which of the links to the shard are
        known); None when no host of the shard has a turn."""
        ready, seen, queue = self._keys(zsets, s)
        first = ("ZRANGE", ready, 0, len(page_ids) - 1)
        hosts = [h.decode() for h in self.wire.send([("WATCH", ready, seen), first])[1]]
        if not hosts:
            self.wire.send([("UNWATCH",)])
            return None
        pages = list(zip(page_ids, hosts, strict=False))  # (fewer hosts than pages)
        kind = "A" if zsets else "C"
        links = {h: self._page_links(kind, rng, p, h) for p, h in pages}
        fps = list(dict.fromkeys(x[1] for h in hosts for x in links[h] if x[0] == seen))
        # the queues read are watched: a head can change with no change to ready (a pop
        # whose new turn is its host's old one; a request put back first)
        reads: list[tuple[Any, ...]] = [("WATCH", *(queue + h for h in hosts))]
        reads += [("ZRANGE" if zsets else "LRANGE", queue + h, 0, 0) for h in hosts]
        if fps:
            reads.append(("SMISMEMBER", seen, *fps))
        answers = self.wire.send(reads)[1:]
        known = dict(zip(fps, answers[len(hosts)], strict=True)) if fps else {}
        return pages, links, dict(zip(hosts, answers, strict=False)), known

    def _push_transaction(self, zsets: bool, t: int, links: list[Link]) -> None:
        """O, OZ: an outbox batch of links to shard ``t``: looked up, the new ones added;
        then the leases of pages whose links are all stored are due acknowledgement."""
        _, seen, _ = self._keys(zsets, t)
        fps = list(dict.fromkeys(x[1] for x in links))
        while True:
            answers = self.wire.send([("WATCH", seen), ("SMISMEMBER", seen, *fps)])
            tx = [("MULTI",), *self._adds(zsets, t, links, dict(zip(fps, answers[1], strict=True)))]
            self.transactions += 1
            if self.wire.send([*tx, ("EXEC",)])[-1] is not None:
                break
            self.aborted += 1
        for *_, (s, lease) in links:
            self.waiting[lease] -= 1
            if not self.waiting[lease]:
                self.acks.setdefault(s, []).append(lease)

    def _acknowledge_all(self) -> None:
        """O, OZ: the leases still due acknowledgement, a transaction a shard."""
        for s, acks in self.acks.items():
            if acks:
                leases, leased = _lease_keys(s)
                tx = [("MULTI",), ("ZREM", leases, *acks), ("HDEL", leased, *acks), ("EXEC",)]
                self.wire.send(tx)
        self.acks = {}

    def _adds(
        self,
        zsets: bool,
        s: int,
        links: list[Link],
        known: dict[bytes, int],
    ) -> list[tuple[Any, ...]]:
        """O, OZ: the commands that add a shard's new links: their fingerprints, their
        requests into their hosts' queues, and the turns of hosts that had none."""
        ready, seen, queue = self._keys(zsets, s)
        new: list[bytes] = []
        queued: dict[str, list[Any]] = {}
        for _, fp, target, entry, _ in links:
            if entry is not None and not known[fp]:
                known[fp] = 1  # (a link sent twice is added once)
                new.append(fp)
                queued.setdefault(target, []).extend((-1, entry) if zsets else (entry,))
        if not new:
            return []
        tx: list[tuple[Any, ...]] = [("SADD", seen, *new)]
        tx += [("ZADD" if zsets else "RPUSH", queue + host, *e) for host, e in queued.items()]
        turns = [x for host in queued for x in (0, host)]
        return [*tx, ("ZADD", ready, "NX", *turns)]

    def _links(
        self, variant: str, rng: random.Random, page: int, host: str
    ) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]], dict[str, list[bytes]]]:
        """A page's links: (seen key, fingerprint) of the ``--sent`` looked up and of the
        ``--new`` of them added, and the requests queued by host."""
        looked, added, queued = [], [], {}
        for key, fp, target, entry in self._page_links(variant, rng, page, host):
            looked.append((key, fp))
            if entry is not None:
                added.append((key, fp))
                queued.setdefault(target, []).append(entry)
        return looked, added, queued

    def _page_links(
        self, variant: str, rng: random.Random, page: int, host: str
    ) -> list[tuple[str, bytes, str, bytes | None]]:
        """A page's ``--sent`` links as (seen key, fingerprint, host, its request if it is
        one of the ``--new``, else None); a new link goes to the page's host (10 in 12.6,
        as bench frontier's articles) or to another host."""
        a = self.args
        fp = _int_fingerprint if "B" in variant or variant == "M" else fingerprint
        new = int(a.new) + (rng.random() < a.new % 1)
        sent = max(new, int(a.sent) + (rng.random() < a.sent % 1))
        links: list[tuple[str, bytes, str, bytes | None]] = []
        for n in range(sent):
            entry = None
            if n < new:
                target = host if rng.random() < 10 / 12.6 else host_name(rng.randrange(a.hosts))
                url = f"http://{target}/n/{page}-{n}"
                entry = members.member(page * 100 + n, DATA)
            else:
                target = host
                url = f"http://{host}/a/{rng.randrange(KNOWN_ARTICLES)}"
            links.append((self.seen_key(variant, target), fp(url), target, entry))
        return links


_FORKED: dict[str, Layouts] = {}  # (the Layouts a --clients process runs: forked, not pickled)


def _client(job: tuple[str, int, int]) -> tuple[int, int]:
    """A ``--clients`` process: its share of O's (OZ's) pages; (transactions, aborted)."""
    variant, seed, k = job
    layouts = _FORKED["layouts"]
    n = layouts.args.clients
    layouts.wire, layouts.transactions, layouts.aborted = None, 0, 0  # (its own connection)
    layouts.lease_prefix, layouts.waiting, layouts.acks = f"l{os.getpid()}.", {}, {}
    pages = layouts.args.pages // n + (k < layouts.args.pages % n)
    rng = random.Random(seed * 1000 + k)
    layouts._optimistic(variant, rng, pages, seed * 10**7 + k * 10**6, owned=(k, n))
    return layouts.transactions, layouts.aborted


class _Wire:
    """Commands sent together on one connection, their replies read in order: WATCH,
    MULTI and EXEC as plain commands (redis-py's pipeline sends WATCH at once, alone)."""

    def __init__(self, client: Any) -> None:
        self.conn = client.connection_pool.get_connection()

    def send(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """The replies, every one read before the first error reply is raised (a reply
        left unread would be taken for the next command's)."""
        self.conn.send_packed_command(self.conn.pack_commands(commands))
        replies, error = [], None
        for _ in commands:
            try:
                replies.append(self.conn.read_response())
            except Exception as e:  # (raised below, once all are read)
                replies.append(e)
                error = error or e
        for reply in replies[-1] if isinstance(replies[-1], list) else []:
            error = error or (reply if isinstance(reply, Exception) else None)
        if error:
            raise error
        return replies


def _lease_keys(s: int) -> tuple[str, str]:
    """A shard's leases (a sorted set of deadlines) and leased (a hash of requests)."""
    return f"leases:{{{s}}}", f"leased:{{{s}}}"


def _by_key(looked: list[tuple[str, bytes]]) -> dict[str, list[bytes]]:
    """A page's (seen key, fingerprint) pairs grouped by seen key, in order."""
    by_key: dict[str, list[bytes]] = {}
    for key, fp in looked:
        by_key.setdefault(key, []).append(fp)
    return by_key


def _rounds(args: argparse.Namespace, measure: Any) -> dict[str, list[float]]:
    """``measure(variant, seed)`` of every layout, ``--rounds`` times, each round in
    another order (no layout always follows the same one)."""
    results: dict[str, list[float]] = {v: [] for v in args.variants}
    n = len(args.variants)
    for rnd in range(args.rounds):
        for i in range(n):
            variant = args.variants[(rnd + i) % n]
            results[variant].append(measure(variant, rnd * 100 + i))
    return results


def _counted(args: argparse.Namespace, work: Path) -> dict[str, list[float]]:
    """``_rounds`` counted: thousands of instructions a page, the saved key space in
    ``work`` loaded by a redis-server under callgrind."""
    import redis

    from tools.bench.redis_profile import control, dump_total, under_callgrind

    binary = args.redis_server or redis_server_binary()
    with under_callgrind(binary, work, work / "callgrind.out") as (url, pid):
        layouts = Layouts(redis.Redis.from_url(url), args)

        def measure(variant: str, seed: int) -> float:
            control("-i", "on", str(pid))
            layouts.run(variant, seed)
            control("-i", "off", str(pid))
            return dump_total(work, pid) / args.pages / 1e3

        return _rounds(args, measure)


def run(args: argparse.Namespace) -> int:
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"--variants: unknown layouts {sorted(unknown)} (of {VARIANTS})")
    numbers = ("hosts", "shards", "pages", "rounds", "prefetch", "script_pages", "outbox")
    numbers += ("clients",)
    small = [f"--{n.replace('_', '-')}" for n in numbers if getattr(args, n) < 1]
    if small:
        raise SystemExit(f"{', '.join(small)}: must be >= 1")
    missing = [t for t in ("valgrind", "callgrind_control") if args.count and not which(t)]
    if missing:
        raise SystemExit(f"--count: {', '.join(missing)} missing (apt-get install valgrind)")
    import redis

    with tempfile.TemporaryDirectory() as work:
        with tcp_redis(Path(work), args.redis_server) as url:
            client = redis.Redis.from_url(url)
            version = client.info("server")["redis_version"]
            layouts = Layouts(client, args)
            layouts.build()
            memory = client.info("memory")["used_memory_human"]
            print(
                f"Redis {version}; {args.hosts} hosts in {args.shards} shards, the layouts "
                f"measured built at once ({memory}); {args.pages} pages a layout and round, "
                f"{args.sent} links sent and {args.new} new a page",
                flush=True,
            )
            if args.count:
                client.save()
            else:
                results = _rounds(args, layouts.run)
        if args.count:
            results = _counted(args, Path(work))
        print()
        print("layout   " + "".join(f"round {r + 1:<4}" for r in range(args.rounds)) + "median")
        for variant, values in results.items():
            cells = "".join(f"{v:>8.1f}  " for v in values)
            print(f"{variant:<8} {cells}{statistics.median(values):>6.1f}")
        optimistic = [v for v in args.variants if v in {"O", "OZ"}]
        if optimistic and not args.count:
            print(
                f"(transactions aborted and sent again, {', '.join(optimistic)} by "
                f"{args.clients} client(s): {layouts.aborted} of {layouts.transactions})"
            )
        unit = "thousand Redis instructions a page" if args.count else "Redis CPU µs a page"
        print(
            f"\n({unit}; P to BC: plain pipelined commands, no atomicity; L, L2: BC's work "
            f"in Lua, {args.script_pages} page(s) a script call; M: without Lua, a MULTI/EXEC "
            "a step; O, OZ: optimistic MULTI/EXEC steps, WATCH)"
        )
    return 0
