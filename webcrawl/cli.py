"""The ``webcrawl`` command: run the demo, inspect and steer a crawl.

    webcrawl demo                 crawl the bundled demo web, print a summary
    webcrawl status [--json]      the crawl's queue, dupefilter, store, workers
    webcrawl monitor [--port N]   the same on a live web page, and crawl-wide metrics
    webcrawl show URL             a page's stored row as JSON
    webcrawl failpaths [--clear]  the failed-path filter list (dead paths)
    webcrawl submit URL|-f FILE   add seeds to a (running) crawl
    webcrawl reset --yes          delete a crawl's state in Redis
    webcrawl serve-demo           serve the demo web (for your own crawls)
    webcrawl deploy [TARGET...]   build the egg, deploy to scrapyd, start N workers
    webcrawl bench                pages/s of the full stack vs plain Scrapy
    webcrawl hbase start|stop|status   a standalone HBase in the data dir, for the
                                  HBase store on one machine

Settings come from the Scrapy project (``scrapy.cfg``, or
``SCRAPY_SETTINGS_MODULE``, e.g. ``webcrawl.settings.cluster``), with ``-s NAME=VALUE``
overrides, exactly as for ``scrapy crawl``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from scrapy.settings import Settings

from webcrawl.frontier.cold import clear_cold
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.redisconn import CrawlRedis
from webcrawl.frontier.workers import WorkerRegistry
from webcrawl.settings_check import environment_overridden
from webcrawl.store import StoreError, open_store, store_url_from_settings
from webcrawl.urls.urlkey import BadURLError, url_to_key


def load_settings(overrides: list[str] | None = None) -> Settings:
    """The project's settings (as ``scrapy crawl`` sees them) plus ``-s`` overrides."""
    from scrapy.utils.project import get_project_settings

    from webcrawl.addon import apply

    settings = get_project_settings()
    if not settings.getdict("ADDONS"):  # not inside a project: this project's settings
        settings.setmodule("webcrawl.settings.base", priority="project")
    if not apply(settings):
        raise SystemExit(
            "webcrawl: the project's ADDONS do not include webcrawl.Addon (its settings "
            f"module is {os.environ.get('SCRAPY_SETTINGS_MODULE') or 'from scrapy.cfg'})"
        )
    for item in overrides or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"webcrawl: -s expects NAME=VALUE, got {item!r}")
        settings.set(name, value, priority="cmdline")
    for message in environment_overridden(settings, os.environ):
        print(f"webcrawl: warning: {message}", file=sys.stderr)
    return settings


def _crawl_name(args: argparse.Namespace, settings: Settings) -> str:
    return args.crawl or settings.get("WEBCRAWL_CRAWL") or "web"


def _crawl(args: argparse.Namespace, settings: Settings, client: Any) -> CrawlKeys:
    return _crawl_keys(client, _crawl_name(args, settings), settings)


def _crawl_keys(client: Any, crawl: str, settings: Settings) -> CrawlKeys:
    """The crawl's keys, with the shard count it was created with (FRONTIER_SHARDS if
    it does not exist yet)."""
    from webcrawl.frontier.layout import existing_crawl

    try:
        return existing_crawl(client, crawl, settings.getint("FRONTIER_SHARDS"))[0]
    except ValueError as exc:
        raise SystemExit(f"webcrawl: {exc}") from None


class _Session:
    """Redis and store for one command, closed (embedded Redis left) at the end."""

    def __init__(self, settings: Settings) -> None:
        self.redis = CrawlRedis.from_settings(settings, timeout=30.0)  # not a reactor: patience
        self.redis.open()
        self.client = self.redis.client

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.redis.close()


# -- commands -------------------------------------------------------------------


def _shard_counts(client: Any, keys: CrawlKeys, now: float) -> list[dict[str, Any]]:
    """Per shard: queued (in Redis, and in the store's cold tier), leased, seen (exact set
    members or Bloom bits set), revisits due and scheduled, the first revisit's time and
    the hosts with queued requests (ready, or waiting for a refill)."""
    pipe = client.pipeline(transaction=False)  # on a cluster, sent to each key's node
    for k in keys.all_shards():
        pipe.get(k.queued).zcard(k.delayed).zcard(k.leases).scard(k.seen).bitcount(k.bloom)
        pipe.zcard(k.revisits).zcount(k.revisits, "-inf", now)
        pipe.zrange(k.revisits, 0, 0, withscores=True).zrange(k.ready, 0, -1)
        pipe.get(k.cold_total).hkeys(k.cold)
    replies, width = pipe.execute(), 11
    shards = []
    for shard in range(keys.shards):
        queued, delayed, leased, seen, bloom_bits, revisits, due, first, hosts, cold, cold_hosts = (
            replies[shard * width : (shard + 1) * width]
        )
        hot, cold = int(queued or 0) + delayed, int(cold or 0)
        names = dict.fromkeys(h.decode() for h in [*hosts, *cold_hosts])
        shards.append(
            {
                "shard": shard,
                "queued": hot + cold,
                "hot": hot,
                "cold": cold,
                "leased": leased,
                "seen": seen,
                "bloom_bits": bloom_bits,
                "revisits": revisits,
                "revisit_due": due,
                "next_revisit": first[0][1] if first else None,
                "hosts": list(names),
            }
        )
    return shards


def _host_sizes(client: Any, keys: CrawlKeys, shards: list[dict[str, Any]]) -> list:
    """(queued, host) of every host with queued requests (in Redis or the store), largest
    first."""
    pipe, hosts = client.pipeline(transaction=False), []
    for s in shards:
        k = keys.shard(s["shard"])
        for host in s["hosts"]:
            hosts.append(host)
            pipe.zcard(k.host_queue(host)).hget(k.cold, host)
    counts = pipe.execute() if hosts else []
    totals = [hot + int(cold or 0) for hot, cold in zip(counts[::2], counts[1::2], strict=True)]
    return sorted(zip(totals, hosts, strict=True), reverse=True)


def _seen(client: Any, keys: CrawlKeys, shards: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """URLs the crawl has seen (a Bloom filter's: estimated from its bits), and its
    dupefilter as recorded when the crawl was created (not this command's settings); a
    Bloom filter's with the new URLs expected to have been taken for seen (never
    crawled)."""
    from webcrawl.frontier.dupefilter import shard_bloom_params
    from webcrawl.frontier.layout import recorded_dupefilter

    seen = sum(s["seen"] for s in shards)
    layout = recorded_dupefilter(client, keys)
    if layout.get("dupefilter") != "bloom":
        return seen, {"kind": "set"}
    capacity, error_rate = int(layout["bloom_capacity"]), float(layout["bloom_error_rate"])
    params = shard_bloom_params(capacity, error_rate, keys.shards)
    counts = [params.estimated_count(s["bloom_bits"]) for s in shards]
    return seen + sum(counts), {
        "kind": "bloom",
        "capacity": capacity,
        "error_rate": error_rate,
        "false_positives": round(sum(params.expected_false_positives(n) for n in counts)),
        "false_positive_rate_now": max(params.false_positive_rate(n) for n in counts),
    }


def _describe_seen(dupefilter: dict[str, Any]) -> str:
    if dupefilter["kind"] == "set":
        return "exact set"
    d = dupefilter
    full = d["false_positive_rate_now"] > d["error_rate"]
    return (
        f"Bloom filter for {d['capacity']} URLs at {d['error_rate'] * 100:.2g} % false "
        f"positives; about {d['false_positives']} new URLs taken for seen so far (never "
        f"crawled), {d['false_positive_rate_now'] * 100:.2g} % of new URLs now"
        + ("; past its capacity: the rate climbs as it fills" if full else "")
    )


def _hosts_over_budget(client: Any, keys: CrawlKeys) -> list[tuple[int, str]]:
    """(new URLs taken, host) of the hosts whose new URLs went over the per-host budget."""
    pipe = client.pipeline(transaction=False)
    for k in keys.all_shards():
        pipe.smembers(k.over_budget)
    per_shard = pipe.execute()
    pipe = client.pipeline(transaction=False)
    hosts = []
    for k, members in zip(keys.all_shards(), per_shard, strict=True):
        for host in sorted(members):
            hosts.append(host.decode())
            pipe.hget(k.host_pages, host)
    counts = pipe.execute() if hosts else []
    return sorted(((int(n or 0), h) for n, h in zip(counts, hosts, strict=True)), reverse=True)


def collect_status(session: _Session, settings: Settings, crawl: str, top: int) -> dict[str, Any]:
    """The crawl's state as ``webcrawl status --json`` shows it (``now``: Redis's clock;
    ``store``: this command's store, ``crawl_store``: the one the crawl recorded)."""
    from webcrawl.frontier.layout import recorded_store

    keys = _crawl_keys(session.client, crawl, settings)
    seconds, micros = session.client.time()  # the frontier's clock, not this machine's
    now = seconds + micros / 1e6
    shards = _shard_counts(session.client, keys, now)
    pipe = session.client.pipeline(transaction=False)
    pipe.llen(keys.start).scard(keys.scope).get(keys.failed)
    submitted, scope, failed = pipe.execute()
    seen, dupefilter = _seen(session.client, keys, shards)
    queued = sum(s["queued"] for s in shards)
    cold = sum(s["cold"] for s in shards)
    firsts = [s["next_revisit"] for s in shards if s["next_revisit"] is not None]
    sizes = _host_sizes(session.client, keys, shards)
    over_budget = _hosts_over_budget(session.client, keys)
    workers = WorkerRegistry(session.client, keys).live()
    store_url = store_url_from_settings(settings)
    with open_store(store_url) as store:
        store_id = store.identity()
        stored = store.count_pages()
        dead = _dead_paths(store, settings)
    return {
        "crawl": keys.crawl,
        "now": now,
        "redis": session.redis.description,
        "store": store_url,
        "store_id": store_id,
        "crawl_store": recorded_store(session.client, keys),  # None: no worker joined yet
        "shards": keys.shards,
        "queued": queued,
        "queued_in_store": cold,
        "queued_per_shard": [s["queued"] for s in shards],
        "queued_per_host": {host: n for n, host in sizes[:top]},
        "hosts_queued": len(sizes),
        "leased": sum(s["leased"] for s in shards),
        "seen": seen,
        "dupefilter": dupefilter,
        "failed": int(failed or 0),
        "submitted": submitted,
        "scope_keys": scope,
        "stored": stored,
        "revisit_due": sum(s["revisit_due"] for s in shards),
        "revisits_scheduled": sum(s["revisits"] for s in shards),
        "next_revisit": min(firsts) if firsts else None,
        "workers": workers,
        "dead_paths": dead,
        "hosts_over_budget": {host: n for n, host in over_budget},
    }


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.frontier.layout import describe_store

    with _Session(settings) as session:
        status = collect_status(session, settings, _crawl_name(args, settings), args.top)
    now, queued, cold = status["now"], status["queued"], status["queued_in_store"]
    revisits, due, first = (
        status["revisits_scheduled"],
        status["revisit_due"],
        status["next_revisit"],
    )
    sizes = [(n, host) for host, n in status["queued_per_host"].items()]
    over_budget = [(n, host) for host, n in status["hosts_over_budget"].items()]
    dead, workers, dupefilter = status["dead_paths"], status["workers"], status["dupefilter"]
    keys_crawl, redis_desc, store_url = status["crawl"], status["redis"], status["store"]
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"crawl      {keys_crawl}")
    print(f"redis      {redis_desc}")
    print(f"store      {store_url}")
    crawl_store = status["crawl_store"]
    if crawl_store is not None and crawl_store["id"] != status["store_id"]:
        print(
            f"           not the crawl's store, which is {describe_store(crawl_store)}: "
            "stored pages and dead paths below are this command's store's"
        )
    for name in ("queued", "leased", "seen", "submitted", "stored", "failed"):
        tiers = f" ({queued - cold} in Redis, {cold} in the store)" if name == "queued" else ""
        print(f"{name:<10} {status[name]}{tiers}")
    print(f"dupefilter {_describe_seen(dupefilter)}")
    per_shard = status["queued_per_shard"]
    busiest = max(range(len(per_shard)), key=per_shard.__getitem__)
    print(
        f"shards     {status['shards']}; the most queued: shard {busiest} with {per_shard[busiest]}"
    )
    if revisits:
        wait = max(0.0, first - now)
        print(f"revisits   {revisits} scheduled, {due} due now; next in {wait:.0f} s")
    else:
        print("revisits   none scheduled")
    if sizes:
        print(f"hosts      {status['hosts_queued']} with queued requests; the largest:")
        for n, host in sizes:  # the largest args.top: collect_status cut them
            print(f"  {host:<40} {n:>8}")
    if over_budget:
        print(
            f"budget     {len(over_budget)} hosts took FRONTIER_MAX_PAGES_PER_HOST new URLs "
            "(more were dropped):"
        )
        for n, host in over_budget[: args.top]:
            print(f"  {host:<40} {n:>8}")
    print(f"dead paths {len(dead)}" + ("; the most failed:" if dead else ""))
    for entry in sorted(dead, key=lambda d: -d["failures"])[: args.top]:
        why = f" ({entry['reason']})" if entry["reason"] else ""
        print(f"  {entry['url']:<50} {entry['failures']:>6} failures{why}")
    _print_workers(workers, now)
    return 0


def cmd_monitor(args: argparse.Namespace, settings: Settings) -> int:
    import signal
    import threading

    from webcrawl.frontier.layout import existing_crawl
    from webcrawl.metrics import http_url
    from webcrawl.monitor.server import Sampler, check_bind, serve
    from webcrawl.settings_check import revisit_params

    check_bind(args.bind, args.public)
    crawl = _crawl_name(args, settings)
    with _Session(settings) as session:
        if not existing_crawl(session.client, crawl, settings.getint("FRONTIER_SHARDS"))[1]:
            raise SystemExit(
                f"webcrawl monitor: there is no crawl {crawl!r} in "
                f"{session.redis.description} (name it with --crawl; "
                "-s WEBCRAWL_DATA_DIR= for an embedded one)"
            )
        store_url = store_url_from_settings(settings)

        def rows(limit: int) -> list[Any]:
            with open_store(store_url) as store:
                return [row.get("visits") or [] for row in store.scan_pages(limit=limit)]

        sampler = Sampler(
            lambda: collect_status(session, settings, crawl, args.top),
            rows,
            revisit_params(settings),
            args.interval,
        )
        server = serve(sampler, args.bind, args.port, args.allowed_host or [])
        sampler.sample()
        thread = threading.Thread(target=sampler.run, name="webcrawl-monitor", daemon=True)
        thread.start()
        print(
            f"webcrawl monitor: crawl {crawl!r} on {http_url(args.bind, server.server_port)} "
            f"(metrics: /metrics); Ctrl-C stops it",
            flush=True,
        )
        # a service manager's stop (SIGTERM) ends it as Ctrl-C does: the embedded Redis
        # it started is shut down on the way out, not left running
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            sampler.stop()
            server.server_close()
    return 0


def _print_workers(workers: list[dict[str, Any]], now: float) -> None:
    print(f"workers    {len(workers)} alive")
    if workers:
        header = f"  {'worker':<32} {'state':<5} {'pages':>7} {'items':>7} {'errors':>6} "
        print(header + f"{'pages/s':>8} {'up':>8} {'seen':>6}")
        for w in workers:
            print(
                f"  {w['id']:<32} {w.get('state', '?'):<5} {w['pages']:>7} {w['items']:>7} "
                f"{w['errors']:>6} {w['rate']:>8.1f} {_ago(now - w['started']):>8} "
                f"{_ago(now - w['last_seen']):>6}"
            )


def _failpath_entries(store: Any, settings: Settings) -> list[dict[str, Any]]:
    """Every recorded path level: site, level, URL prefix, failures, dead or not, and why
    (a site whose robots.txt gets no answer)."""
    from webcrawl.failpath import FAIL, OK, ROBOTS, SITE, TALLIES
    from webcrawl.urls.urlkey import key_to_url

    heighten = settings.getint("FAILPATH_HEIGHTEN")
    entries = []
    for site, counts in store.failpath_rows():
        origin = key_to_url(site + "/").rstrip("/")
        for level, count in counts.items():
            if level in TALLIES:
                continue
            url = origin + ("/ (whole site)" if level == SITE else level)
            reason = ""
            if level == SITE and counts.get(ROBOTS):
                since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(counts[ROBOTS]))
                reason = f"robots.txt unanswered since {since}"
            entries.append(
                {
                    "site": site,
                    "level": level,
                    "url": url,
                    "failures": count,
                    "dead": count > heighten,
                    "ok": counts.get(OK, 0),
                    "failed": counts.get(FAIL, 0),
                    "reason": reason,
                }
            )
    return entries


def _dead_paths(store: Any, settings: Settings) -> list[dict[str, Any]]:
    return [e for e in _failpath_entries(store, settings) if e["dead"]]


def cmd_failpaths(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.failpath import site_of

    store_url = store_url_from_settings(settings)
    with open_store(store_url) as store:
        if args.clear is not None:
            sites = []
            for target in args.clear or [row for row, _ in store.failpath_rows()]:
                try:
                    sites.append(site_of(target) if "://" in target else target)
                except BadURLError as exc:
                    print(f"webcrawl failpaths: {exc}", file=sys.stderr)
                    return 2
            for site in sites:
                store.failpath_delete(site)
            print(f"Cleared the failure counts of {len(sites)} sites in {store_url}")
            return 0
        entries = _failpath_entries(store, settings)
    if not args.all:
        entries = [e for e in entries if e["dead"]]
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    what = "recorded path levels" if args.all else "dead paths (URLs under them are dropped)"
    print(f"{len(entries)} {what} in {store_url}")
    if entries:
        print(f"  {'path':<56} {'failures':>8} {'site ok/failed':>15}")
    for e in entries:
        mark = " dead" if e["dead"] and args.all else ""
        why = f"  {e['reason']}" if e["reason"] else ""
        print(f"  {e['url']:<56} {e['failures']:>8} {e['ok']:>7}/{e['failed']:<7}{mark}{why}")
    return 0


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    try:
        key = url_to_key(args.url)
    except BadURLError as exc:
        print(f"webcrawl show: {exc}", file=sys.stderr)
        return 2
    store_url = store_url_from_settings(settings)
    with open_store(store_url) as store:
        row = store.get_page(key)
    if row is None:
        print(f"webcrawl show: not stored: {args.url} (key {key} in {store_url})", file=sys.stderr)
        return 1
    print(json.dumps(row, indent=2, ensure_ascii=False))
    return 0


def cmd_submit(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.safety.bindings import SeedBindings, record_bindings
    from webcrawl.safety.policy import url_hosts
    from webcrawl.safety.seal import Seal
    from webcrawl.urls.seeds import parse_seed_lines, read_seeds

    urls: list[str] = []
    bad = []
    if args.file:
        try:
            found, errors = read_seeds(args.file)
        except OSError as exc:
            print(f"webcrawl submit: {exc}", file=sys.stderr)
            return 2
        urls += found
        bad += errors
    found, errors = parse_seed_lines(args.urls, "argument")
    urls += found
    bad += errors
    for seed in bad:
        print(f"webcrawl submit: skipping bad seed {seed}", file=sys.stderr)
    if not urls:
        print("webcrawl submit: no valid seeds", file=sys.stderr)
        return 2
    with _Session(settings) as session:
        keys = _crawl(args, settings, session.client)
        # their hosts bound here, sealed (webcrawl/safety/seal.py): whoever else pushes a
        # URL to the list gets no special-use address for it
        seal = Seal(settings.get("WEBCRAWL_SECRET") or "", local=session.redis.embedded is not None)
        bindings = SeedBindings(session.client, keys.seed_bindings, seal)
        bound, untrusted = record_bindings(bindings, urls) if seal.trusted else ({}, set())
        session.client.rpush(keys.start, *urls)
    if not seal.trusted:
        why = "WEBCRAWL_SECRET is not set on this shared Redis"
    elif untrusted:
        why = f"{len(untrusted)} hosts have a binding in Redis that does not verify"
    elif len(bound) < len(url_hosts(urls)):
        why = "some of their names do not resolve now"
    else:
        why = ""
    if why:
        print(
            f"webcrawl submit: {why}: the seeds' hosts are allowed no private or loopback "
            "address (ADDRESSES_ALLOWED_NETWORKS allows networks)",
            file=sys.stderr,
        )
    print(
        f"submitted {len(urls)} seeds to crawl {keys.crawl!r}"
        + (f" ({len(bad)} bad)" if bad else "")
    )
    return 1 if bad else 0


def cmd_reset(args: argparse.Namespace, settings: Settings) -> int:
    crawl = _crawl_name(args, settings)
    if not args.yes:
        print(
            f"webcrawl reset: this deletes crawl {crawl!r}'s queue, dupefilter and "
            "workers in Redis, and the queued requests it keeps in the store (its pages "
            "are kept); add --yes to do it",
            file=sys.stderr,
        )
        return 2
    from webcrawl.frontier.layout import describe_store, recorded_store

    store_url = store_url_from_settings(settings)
    with _Session(settings) as session:
        keys = _crawl(args, settings, session.client)
        crawl_store = recorded_store(session.client, keys)
        # the store's tier first: rows left there while Redis forgot the crawl would come
        # back into the next crawl of this name
        try:
            with open_store(store_url) as store:
                if crawl_store is not None and crawl_store["id"] != store.identity():
                    print(
                        f"webcrawl reset: crawl {crawl!r} keeps its queued requests in "
                        f"{describe_store(crawl_store)}, not in this command's store "
                        f"{store_url}: nothing deleted (set STORE_URL to the "
                        "crawl's store)",
                        file=sys.stderr,
                    )
                    return 1
                cold = clear_cold(store, keys.crawl)
        except StoreError as exc:
            print(
                f"webcrawl reset: could not delete crawl {crawl!r}'s queued requests in "
                f"{store_url}: {exc}; nothing deleted in Redis (try again when the store "
                "is back)",
                file=sys.stderr,
            )
            return 1
        names = {
            name
            for pattern in keys.all_patterns()  # every node of a cluster
            for name in session.client.scan_iter(match=pattern, count=1000)
            if keys.owns(name)
        }
        names = sorted(names)
        for i in range(0, len(names), 1000):
            session.client.delete(*names[i : i + 1000])
    print(
        f"reset crawl {crawl!r}: deleted {cold} queued requests in {store_url}, and "
        f"{len(names)} keys"
    )
    return 0


def cmd_serve_demo(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.demo import web as demoweb

    demoweb.run(args)
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl import demo

    return demo.run(args, settings)


def cmd_deploy(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl import deploy

    return deploy.run(args)


def cmd_hbase(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.localhbase import command

    return command.run(args, settings)


def cmd_bench(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl import bench

    return bench.run(args)


# -- parser ---------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from webcrawl.demo import web as demoweb

    parser = argparse.ArgumentParser(prog="webcrawl", description=__doc__.split("\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting (as with scrapy crawl -s)",
    )
    common.add_argument("--crawl", help="crawl name (default: WEBCRAWL_CRAWL, else 'web')")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("status", parents=[common], help="show the crawl's state and workers")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--top", type=int, default=10, help="hosts listed by queue size")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "monitor",
        parents=[common],
        help="serve a live status page of the crawl, and its crawl-wide metrics",
    )
    p.add_argument("--port", type=int, default=8410, help="port of the page (default 8410)")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--public", action="store_true", help="allow a --bind address that is not local")
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a name the page is reached by (its Host header), besides the bind address "
        "and localhost; repeat for more (a request naming another host gets 421)",
    )
    p.add_argument("--interval", type=float, default=2.0, help="seconds between two samples")
    p.add_argument("--top", type=int, default=10, help="hosts listed by queue size")
    p.set_defaults(func=cmd_monitor)

    p = sub.add_parser(
        "failpaths", parents=[common], help="list (or clear) the failed-path filter list"
    )
    p.add_argument("--all", action="store_true", help="every recorded level, not just dead ones")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--clear",
        nargs="*",
        metavar="SITE",
        help="delete the counts of these sites (URLs or row keys; none: every site); "
        "URLs already dropped come back through the re-probe",
    )
    p.set_defaults(func=cmd_failpaths)

    p = sub.add_parser("show", parents=[common], help="print a page's stored row as JSON")
    p.add_argument("url")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("submit", parents=[common], help="add seeds to a crawl")
    p.add_argument("urls", nargs="*", help="seed URLs")
    p.add_argument("-f", "--file", help="file of seed URLs, one per line")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("reset", parents=[common], help="delete a crawl's state in Redis")
    p.add_argument("--yes", action="store_true", help="really do it")
    p.set_defaults(func=cmd_reset)

    p = sub.add_parser("serve-demo", help="serve the demo web on 127.0.0.x")
    demoweb.add_arguments(p)
    p.set_defaults(func=cmd_serve_demo)

    p = sub.add_parser("demo", parents=[common], help="crawl the bundled demo web end to end")
    p.add_argument("--hosts", type=int, default=4, help="seed hosts of the demo web")
    p.add_argument("--pages", type=int, default=100, help="pages per host")
    p.add_argument(
        "--data-dir", default=".webcrawl/demo", help="where the demo crawl keeps its data"
    )
    p.set_defaults(func=cmd_demo)

    from webcrawl import deploy

    p = sub.add_parser(
        "deploy", parents=[common], help="deploy to scrapyd targets and start N web workers"
    )
    deploy.add_arguments(p)
    p.set_defaults(func=cmd_deploy)

    from webcrawl.localhbase.command import add_arguments as hbase_arguments

    p = sub.add_parser(
        "hbase", parents=[common], help="start, stop or check a standalone HBase (Thrift1)"
    )
    hbase_arguments(p)
    p.set_defaults(func=cmd_hbase)

    _add_bench_parser(sub)
    return parser


def _add_bench_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmarks on the demo web; each prints a table")
    p.add_argument(
        "what",
        nargs="?",
        default="crawl",
        choices=(
            "crawl",
            "stages",
            "politeness",
            "memory",
            "failpath",
            "simhash",
            "revisit",
            "incremental",
            "store",
            "frontier",
            "tiers",
        ),
        help="crawl: pages/s and Redis calls/page vs a plain Scrapy spider and scrapy-redis; "
        "stages: CPU ms per page by stage (parse, links, requests, scheduler, pipelines, store) "
        "from a profile (py-spy) of one crawl; "
        "politeness: achieved vs configured per-host rate; memory: bytes/URL in Redis; "
        "failpath: the seed-000 paper's experiment (filter off vs its three parameter sets); "
        "simhash: ours vs the simhash package on real page texts (--site); revisit: our "
        "revisit policy vs Nutch's on a simulated clock; incremental: a continuous crawl of "
        "the changing demo web at accelerated time, judged from the server's side; store: rows/s "
        "written and read by SQLite and by a real HBase 2.6 (webcrawl hbase, started for the run, "
        "or --hbase URL); frontier: scale without the network: synthetic worker processes drive "
        "the real frontier steps over --hosts hosts, on one Redis and on a local 3-master Redis "
        "Cluster (pages/s, Redis commands, round trips and CPU per page, per-master balance, "
        "memory per queued URL); tiers: --urls synthetic URLs over --hosts hosts through the "
        "frontier's two tiers (Redis memory per URL, store rows and bytes, refill throughput "
        "against the pop rate)",
    )
    p.add_argument(
        "--urls",
        type=int,
        default=None,
        help="memory: URLs to insert, default 200000; tiers: default 10000000",
    )
    p.add_argument("--hot-per-host", type=int, default=100, help="tiers: FRONTIER_HOT_PER_HOST")
    p.add_argument("--hot-budget", type=int, default=500_000, help="tiers: FRONTIER_HOT_BUDGET")
    p.add_argument("--rows", type=int, default=20_000, help="store: rows written and read")
    p.add_argument("--row-bytes", type=int, default=8000, help="store: text bytes per row")
    p.add_argument("--batch", type=int, default=200, help="store: rows per write batch")
    p.add_argument(
        "--hbase",
        metavar="URL",
        help="store: measure this HBase Thrift server (hbase://HOST:PORT?table_prefix=NEW) "
        "instead of starting a standalone one",
    )
    p.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="seed hosts of the demo web (with --site: mirrors of the site), default 4; "
        "frontier and tiers: synthetic hosts, default 100000",
    )
    p.add_argument("--pages", type=int, default=1500, help="pages per host")
    p.add_argument("--runs", type=int, default=3, help="runs per setup (the median is shown)")
    p.add_argument(
        "--real-waits",
        action="store_true",
        help="failpath: the paper's waits and robots.txt's 300 s in real seconds (the re-probe "
        "interval 1/60): about half an hour per set",
    )
    p.add_argument(
        "--sets",
        type=lambda v: [int(x) for x in v.split(",")],
        default=None,
        metavar="1,2,3",
        help="failpath: which of the paper's parameter sets (default all)",
    )
    p.add_argument(
        "--server",
        choices=("auto", "nginx", "twisted"),
        default="auto",
        help="crawl: who serves the demo web; nginx (static files, a few %% of a core) lets "
        "two workers scale on a small machine; auto: nginx when installed",
    )
    p.add_argument(
        "--site",
        metavar="DIR",
        action="append",
        help="crawl, stages: crawl this static site instead of the demo web (nginx serves it on "
        "--hosts mirrors; repeat for more sites), e.g. real documentation: apt-get install "
        "python3-doc postgresql-doc-15, --site /usr/share/doc/python3-doc/html --site "
        "/usr/share/doc/postgresql-doc-15/html",
    )
    p.add_argument(
        "--project",
        metavar="DIR",
        help="crawl, stages: run the web spider of the webcrawl checkout in DIR (e.g. a git "
        "worktree of an older commit: a before and after on the same machine)",
    )
    p.add_argument(
        "--raw",
        metavar="FILE",
        help="stages: keep the profile's collapsed stacks (py-spy's raw format, "
        "for flamegraph.pl or speedscope) in FILE",
    )
    p.add_argument(
        "--setup",
        choices=("webcrawl", "plain"),
        default="webcrawl",
        help="stages: profile webcrawl (one worker, embedded Redis) or the plain Scrapy spider",
    )
    p.add_argument("--limit", type=int, default=100_000, help="simhash: pages at most")
    p.add_argument("--pages-sim", type=int, default=2000, help="revisit: simulated pages")
    p.add_argument("--seed", type=int, default=1, help="revisit, incremental: random seed")
    p.add_argument(
        "--speed", type=float, default=3600.0, help="incremental: simulated seconds per real second"
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="incremental: real seconds of continuous crawling, default 120; frontier: "
        "seconds measured per setup (after a warm-up), default 20; tiers: seconds of "
        "popping, default 20",
    )
    p.add_argument("--workers", type=int, default=4, help="frontier: worker processes")
    p.add_argument("--shards", type=int, default=16, help="frontier: FRONTIER_SHARDS")
    p.add_argument("--links", type=int, default=60, help="frontier: links per page")
    p.add_argument(
        "--new-links",
        type=int,
        default=None,
        metavar="N",
        help="frontier: links per page to pages not known yet (default: article "
        "links pick among 1000 per host, nearly all new)",
    )
    p.add_argument("--prefetch", type=int, default=4, help="frontier: FRONTIER_PREFETCH")
    p.add_argument(
        "--target",
        choices=("single", "cluster", "both"),
        default="both",
        help="frontier: one Redis, the local Redis Cluster (3 masters, a replica each), or both",
    )

    def bench(args: argparse.Namespace, settings: Settings) -> int:
        # --hosts and --duration mean other things to frontier: so do their defaults
        if args.what not in ("frontier", "tiers"):
            args.hosts = 4 if args.hosts is None else args.hosts
            args.duration = 120.0 if args.duration is None else args.duration
        elif args.what == "tiers":
            args.hosts = 100_000 if args.hosts is None else args.hosts
            args.duration = 20.0 if args.duration is None else args.duration
        if args.urls is None:
            args.urls = 10_000_000 if args.what == "tiers" else 200_000
        return cmd_bench(args, settings)

    p.set_defaults(func=bench)


def main(argv: list[str] | None = None) -> Any:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(getattr(args, "set", []))
        return args.func(args, settings)
    except (ValueError, OSError) as exc:
        print(f"webcrawl {args.command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        import redis

        if isinstance(exc, redis.RedisError):
            print(f"webcrawl {args.command}: Redis: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
