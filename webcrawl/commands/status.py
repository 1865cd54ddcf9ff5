"""``webcrawl status``: the crawl's queue, dupefilter, store, revisits and workers."""

from __future__ import annotations

import argparse
import json
from typing import Any

from scrapy.settings import Settings

from webcrawl.commands import Session, ago, crawl_keys, crawl_name
from webcrawl.commands.failpaths import dead_paths
from webcrawl.frontier.inspection import Inspector
from webcrawl.frontier.workers import WorkerRegistry
from webcrawl.store import open_store, store_url_from_settings

HELP = "show the crawl's state and workers"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--top", type=int, default=10, help="hosts listed by queue size")


def collect_status(session: Session, settings: Settings, crawl: str, top: int) -> dict[str, Any]:
    """The crawl's state as ``webcrawl status --json`` shows it, and as the monitor and
    its metrics read it (``now``: Redis's clock; ``store``: this command's store,
    ``crawl_store``: the one the crawl recorded)."""
    from webcrawl.frontier.layout import existing_crawl, recorded_store

    keys = crawl_keys(session.client, crawl, settings)
    exists = existing_crawl(session.client, crawl, settings.getint("FRONTIER_SHARDS"))[1]
    frontier = Inspector(session.client, keys)
    now = frontier.now()
    shards = frontier.shards(now)
    seen, dupefilter = frontier.seen(shards)
    firsts = [s.next_revisit for s in shards if s.next_revisit is not None]
    sizes = frontier.largest_hosts(shards)
    over_budget = frontier.hosts_over_budget()
    workers = WorkerRegistry(session.client, keys).live()
    store_url = store_url_from_settings(settings)
    with open_store(store_url) as store:
        store_id = store.identity()
        stored = store.count_pages()
        dead = dead_paths(store, settings)
    return {
        "crawl": keys.crawl,
        "exists": exists,  # False: no worker of this crawl has started on this Redis
        "now": now,
        "redis": session.redis.description,
        "store": store_url,
        "store_id": store_id,
        "crawl_store": recorded_store(session.client, keys),  # None: no worker joined yet
        "shards": keys.shards,
        "queued": sum(s.queued for s in shards),
        "queued_in_store": sum(s.cold for s in shards),
        "queued_per_shard": [s.queued for s in shards],
        "queued_per_host": {host: n for n, host in sizes[:top]},
        "hosts_queued": len(sizes),
        "leased": sum(s.leased for s in shards),
        "seen": seen,
        "dupefilter": dupefilter,
        **frontier.crawl_wide(),
        "stored": stored,
        "revisit_due": sum(s.revisit_due for s in shards),
        "revisits_scheduled": sum(s.revisits for s in shards),
        "next_revisit": min(firsts) if firsts else None,
        "workers": workers,
        "dead_paths": dead,
        "hosts_over_budget": {host: n for n, host in over_budget},
    }


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.frontier.layout import describe_store

    with Session(settings) as session:
        status = collect_status(session, settings, crawl_name(args, settings), args.top)
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    now, queued, cold = status["now"], status["queued"], status["queued_in_store"]
    print(f"crawl      {status['crawl']}")
    if not status["exists"]:
        print(
            "           not in this Redis (yet): name it with --crawl (a crawl is named "
            "after its spider, unless WEBCRAWL_CRAWL says otherwise)"
        )
    print(f"redis      {status['redis']}")
    print(f"store      {status['store']}")
    crawl_store = status["crawl_store"]
    if crawl_store is not None and crawl_store["id"] != status["store_id"]:
        print(
            f"           not the crawl's store, which is {describe_store(crawl_store)}: "
            "stored pages and dead paths below are this command's store's"
        )
    for name in ("queued", "leased", "seen", "submitted", "stored", "failed"):
        tiers = f" ({queued - cold} in Redis, {cold} in the store)" if name == "queued" else ""
        print(f"{name:<10} {status[name]}{tiers}")
    print(f"dupefilter {describe_dupefilter(status['dupefilter'])}")
    per_shard = status["queued_per_shard"]
    busiest = max(range(len(per_shard)), key=per_shard.__getitem__)
    print(
        f"shards     {status['shards']}; the most queued: shard {busiest} with {per_shard[busiest]}"
    )
    revisits, due, first = (
        status["revisits_scheduled"],
        status["revisit_due"],
        status["next_revisit"],
    )
    if revisits:
        print(
            f"revisits   {revisits} scheduled, {due} due now; next in {max(0.0, first - now):.0f} s"
        )
    else:
        print("revisits   none scheduled")
    if status["queued_per_host"]:
        print(f"hosts      {status['hosts_queued']} with queued requests; the largest:")
        for host, n in status["queued_per_host"].items():  # the largest --top
            print(f"  {host:<40} {n:>8}")
    over_budget = status["hosts_over_budget"]
    if over_budget:
        print(
            f"budget     {len(over_budget)} hosts took FRONTIER_MAX_PAGES_PER_HOST new URLs "
            "(more were dropped):"
        )
        for host, n in list(over_budget.items())[: args.top]:
            print(f"  {host:<40} {n:>8}")
    dead = status["dead_paths"]
    print(f"dead paths {len(dead)}" + ("; the most failed:" if dead else ""))
    for entry in sorted(dead, key=lambda d: -d["failures"])[: args.top]:
        why = f" ({entry['reason']})" if entry["reason"] else ""
        print(f"  {entry['url']:<50} {entry['failures']:>6} failures{why}")
    print_workers(status["workers"], now)
    return 0


def describe_dupefilter(dupefilter: dict[str, Any]) -> str:
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


def print_workers(workers: list[dict[str, Any]], now: float) -> None:
    print(f"workers    {len(workers)} alive")
    if workers:
        header = f"  {'worker':<32} {'state':<5} {'pages':>7} {'items':>7} {'errors':>6} "
        print(header + f"{'pages/s':>8} {'up':>8} {'seen':>6}")
        for w in workers:
            print(
                f"  {w['id']:<32} {w.get('state', '?'):<5} {w['pages']:>7} {w['items']:>7} "
                f"{w['errors']:>6} {w['rate']:>8.1f} {ago(now - w['started']):>8} "
                f"{ago(now - w['last_seen']):>6}"
            )
