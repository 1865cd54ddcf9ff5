"""``webcrawl bench frontier`` (one Redis) and ``python -m tools.bench frontier`` (one Redis and
the local Redis Cluster) print their tables and lose nothing."""

import subprocess
import sys
from typing import Any

import pytest
from conftest import ROOT, crawl_env

pytestmark = pytest.mark.e2e

SETUPS = ("one Redis", "cluster, 3 masters")
SMALL = ("--hosts", "300", "--duration", "2", "--workers", "2")
PROFILED = ("--hosts", "400", "--pages", "150", "--links", "20")


def python_m(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m ARGV`` in the checkout, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bench(*command: str) -> str:
    """The output of ``python -m COMMAND`` on a small frontier (300 hosts, 2 s, 2 workers)."""
    result = python_m(*command, *SMALL)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_bench_frontier_prints_its_tables_and_loses_nothing():
    out = bench("tools.bench", "frontier", "--links", "20")
    assert "300 hosts in 128 shards" in out, out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if "us/page" in line)
    end = next(i for i, line in enumerate(lines) if "costliest commands" in line)
    costs = [line.split() for line in lines[head + 1 : end]]
    # per setup, its costliest commands: the step scripts first, what they call after
    for setup in SETUPS:
        costly = [row[-3] for row in costs if " ".join(row).startswith(setup)]
        assert costly and costly[0] == "evalsha" and len(costly) >= 4, out
    rows = [line for line in lines[:head] + lines[end:] if line.startswith(SETUPS)]
    # per setup: rate, Redis work, links, the per-master table (one row per master), lost
    assert sum(line.startswith("one Redis") for line in rows) == 5, out
    assert sum(line.startswith("cluster, 3 masters") for line in rows) == 4 + 3, out
    lost = out[out.rindex("lost") :].splitlines()[1:3]
    for setup, line in zip(SETUPS, lost, strict=True):
        assert line.startswith(setup), out
        added, acked, queued, leased, missing, failed = (int(x) for x in line.split()[-6:])
        assert added >= 300 and acked > 0 and queued + leased > 0, out
        assert missing == 0 and failed == 0, out
    # one Redis: the least its per-page work can cost as plain commands, and how far we are
    floor = next(line for line in out.splitlines() if line.startswith("native floor"))
    assert float(floor.split()[2]) > 0 and "x it)" in floor, out


def test_bench_frontier_new_links_sets_the_new_links_per_page():
    # (links not held: held ones cross the short window's edges, up to a second's worth)
    out = bench("webcrawl.cli", "bench", "frontier", "--new-links", "2", "--shard-batch", "1")
    assert "10 to its host's articles (2 of them new, the rest known)" in out, out
    header = next(line for line in out.splitlines() if "added/page" in line)
    row = out.splitlines()[out.splitlines().index(header) + 1]
    added = float(row.split()[-1])
    assert 1.5 <= added <= 2.6, out  # 2 new per page; a seed now and then on top


def test_bench_frontier_rate_paces_each_worker():
    """``--rate``: each worker does at most that many pages a second (a politeness-bound
    crawl, whose workers' steps carry few links each)."""
    # (links held briefly: a page is counted when acknowledged, after its links leave,
    # and a short window would see few)
    out = bench("webcrawl.cli", "bench", "frontier", "--rate", "20", "--shard-wait", "0.1")
    assert "at most 20 pages/s each" in out, out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["setup", "pages/s"])
    rate = float(lines[header + 1].split()[3])  # "one Redis 6.2.14  <pages/s> ..."
    assert 20 <= rate <= 2 * 20 * 1.1, out


def test_bench_frontier_seen_cache_too_small_sends_the_navigation_links_to_redis():
    """``--seen-cache``: a worker's seen cache that cannot hold its hosts' navigation
    links drops (almost) none of them; the default holds them all."""

    def local_dups(out: str) -> float:
        lines = out.splitlines()
        header = next(
            i for i, line in enumerate(lines) if line.startswith("setup") and "local dups" in line
        )
        return float(lines[header + 1].split()[-4].rstrip("%"))

    # (16 shards: with 128, 300 hosts are two or three a shard, and a pop of four pages
    # from one often takes a host twice, whose second page's links are held already and
    # are dropped as known whatever the cache)
    tiny = bench("webcrawl.cli", "bench", "frontier", "--seen-cache", "2", "--shards", "16")
    assert "local seen cache 2," in tiny, tiny
    default = bench("webcrawl.cli", "bench", "frontier", "--shards", "16")
    assert local_dups(tiny) < 10 and local_dups(default) > 60, tiny + default
    result = python_m("webcrawl.cli", "bench", "frontier", "--seen-cache", "0", timeout=60)
    assert result.returncode != 0 and "--seen-cache must be >= 1" in result.stderr, result


def test_redis_profile_splits_a_pages_redis_instructions():
    """``python -m tools.bench redis_profile``: Redis's instructions a page (callgrind's
    count, not a time), split into parts that add up to them."""
    result = python_m("tools.bench", "redis_profile", *PROFILED, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "150 pages by one worker that owns all 128 shards" in out, out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Redis instructions"))
    parts = {}
    for line in lines[head + 1 :]:
        if not line.strip():
            break
        name, thousands, _share = line.rsplit(None, 2)
        parts[name] = float(thousands)
    total, conversions = parts.pop("all"), parts.pop("(of all: numbers to text and back)")
    assert total > 0 and 0 < conversions < total, out
    assert abs(sum(parts.values()) - total) <= 0.01 * total, out
    assert parts["commands called by scripts"] > 0 and parts["Lua: the scripts around them"] > 0
    assert "zaddCommand" in out, out


def test_layouts_prints_every_layout_and_its_script_does_the_plain_commands_work(tmp_path):
    """``python -m tools.bench layouts``: a row a layout; and its L and L2 (a page's work
    in one script) and M (a step's in one transaction) add the same fingerprints and queue
    the same requests as BC's plain commands, so the table compares like with like."""
    import argparse

    import redis

    from tools.bench.layouts import DONE, LEASED, VARIANTS, Layouts, _Wire, add_arguments
    from webcrawl.bench.common import tcp_redis

    every = ",".join(VARIANTS)
    command = ["tools.bench", "layouts", "--hosts", "200", "--pages", "200", "--rounds", "1"]
    result = python_m(*command, "--variants", every)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split()[0] for line in result.stdout.splitlines()[3:] if line[:1].isupper()]
    assert rows == list(VARIANTS), result.stdout

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--hosts", "50", "--pages", "100", "--variants", every])
    with tcp_redis(tmp_path) as url:
        client = redis.Redis.from_url(url)
        layouts = Layouts(client, args)
        layouts.build()

        def totals() -> tuple[int, int]:
            queued = sum(client.llen(k) for k in client.scan_iter("hl:*"))
            return queued, sum(client.scard(k) for k in client.scan_iter("seenh:*"))

        done = []
        runs = (("L", 1), ("L", 3), ("L2", 1), ("L2", 3), ("BC", 1))
        for seed, (variant, script_pages) in enumerate(runs):
            args.script_pages = script_pages
            before = totals()
            layouts.run(variant, seed=seed)
            after = totals()
            done.append((after[0] - before[0], after[1] - before[1]))
        ready = {m for k in client.scan_iter("readyl:*") for m in client.zrange(k, 0, -1)}
        assert ready <= {f"www.site{i}.example".encode() for i in range(50)}, ready

        # M: as many URLs new, each with its request; a page's URL leased and done
        def states() -> list[int]:
            keys = list(client.scan_iter("hz:*"))
            requests = sum(client.hlen(k.replace(b"hz:", b"hd:", 1)) for k in keys)
            return [sum(client.zcard(k) for k in keys), requests] + [
                sum(client.zcount(k, s, s) for k in keys) for s in (LEASED, DONE)
            ]

        before = states()
        layouts.run("M", seed=9)
        m_new, m_requests, m_leased, m_done = (b - a for a, b in zip(before, states(), strict=True))

        # O, OZ: as many URLs new, each queued once in its host's list (sorted set), a
        # page's request popped, every lease acknowledged; one client: no transaction
        # read again, until another client, before the first EXEC, adds to the seen set
        # the step watches, or puts a request back first in a queue the step read (no
        # change to the ready set): then that step is read again
        class Meddling(_Wire):
            def __init__(self, client: Any, kind: str) -> None:
                super().__init__(client)
                self.kind, self.watched, self.meddled = kind, [], False

            def send(self, commands: list[tuple[Any, ...]]) -> list[Any]:
                # (the seen set a step watches, the queues it reads)
                read = [k for c in commands if c[0] == "WATCH" for k in c[1:]]
                read += [c[1] for c in commands if c[0] == "LRANGE"]
                keys = [k for k in read if k.startswith(self.kind)]
                self.watched = keys or self.watched
                if commands[-1] == ("EXEC",) and not self.meddled:
                    self.meddled = True
                    if self.kind == "seen:":
                        client.sadd(self.watched[0], "x")
                    else:
                        client.lpush(self.watched[0], "put back")
                return super().send(commands)

        def sizes(variant: str) -> tuple[int, int]:
            size = client.zcard if variant == "OZ" else client.llen
            queued = sum(size(k) for k in client.scan_iter("hq:*" if variant == "OZ" else "hl:*"))
            return queued, sum(client.scard(k) for k in client.scan_iter("seen:*"))

        optimistic = []
        # (the last: two processes at once, each its shards' pops, its links to any)
        runs = (("O", "", 1), ("OZ", "", 1), ("O", "seen:", 1), ("O", "hl:", 1), ("O", "", 2))
        for seed, (variant, meddled, clients) in enumerate(runs, start=20):
            aborted = layouts.aborted
            if meddled:
                layouts.wire = Meddling(client, meddled)
            args.clients = clients
            before = sizes(variant)
            layouts.run(variant, seed=seed)
            queued, seen = (b - a for a, b in zip(before, sizes(variant), strict=True))
            if meddled:
                assert layouts.aborted == aborted + 1, meddled
                seen -= meddled == "seen:"  # (its "x")
                queued -= meddled == "hl:"  # (its request put back)
            else:
                assert layouts.aborted == aborted or clients > 1
            optimistic.append((queued, seen))
            leases = [k for k in client.scan_iter("lease*:*") if client.type(k) != b"list"]
            assert not leases, (variant, leases)
        assert layouts.transactions > 100
    for queued, seen in done:
        assert seen > 1000 and abs(seen - done[-1][1]) < 0.1 * done[-1][1], done
        assert queued == seen - 100, done  # (100 pops)
    assert abs(m_new - done[-1][1]) < 0.1 * done[-1][1], (m_new, done)
    assert m_leased == 0 and m_done == 100, (m_leased, m_done)
    assert m_requests >= m_new - 100, (m_requests, m_new)  # (done ones dropped theirs)
    for queued, seen in optimistic:
        assert abs(seen - done[-1][1]) < 0.1 * done[-1][1], (optimistic, done)
        assert queued == seen - 100, optimistic  # (100 pops)


def test_layouts_counts_instructions_under_callgrind():
    """``layouts --count``: thousands of Redis instructions a page, callgrind's count."""
    command = ["tools.bench", "layouts", "--count", "--hosts", "50", "--pages", "50"]
    result = python_m(*command, "--rounds", "1", "--variants", "P,O", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0]: float(line.split()[-1]) for line in result.stdout.splitlines()[3:5]}
    assert set(rows) == {"P", "O"} and 0 < rows["P"] < rows["O"], result.stdout
    assert "thousand Redis instructions a page" in result.stdout, result.stdout
