"""``webcrawl status``: the crawl's queue, dupefilter, store, revisits, hosts' sitemap
trust and workers."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from scrapy.settings import Settings

from webcrawl.commands import Session, ago, crawl_keys, crawl_name
from webcrawl.commands.failpaths import dead_paths
from webcrawl.frontier.inspection import Inspector
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.workers import WorkerRegistry
from webcrawl.settings_check import trust_params
from webcrawl.sitemaps.trust import DISTRUSTED, TRUSTED, UNKNOWN, HostTrust, TrustParams
from webcrawl.store import open_store, store_url_from_settings

HELP = "show the crawl's state and workers"
CRAWL_OPTIONS = True
SITEMAP_TRUST_READ = 10_000  # hosts' sitemap trust records read, at most (HSCAN, never all)
# hosts listed first: those whose lastmods are ignored, then those whose lastmods act
_TRUST_ORDER = {DISTRUSTED: 0, TRUSTED: 1, UNKNOWN: 2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--top",
        type=int,
        default=10,
        help="rows listed per table (hosts by queue size, by sitemap trust, dead paths)",
    )


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
        "sitemap_trust": sitemap_trust(session.client, keys, trust_params(settings), top),
    }


def sitemap_trust(
    client: Any, keys: CrawlKeys, params: TrustParams, top: int, limit: int = SITEMAP_TRUST_READ
) -> dict[str, Any]:
    """How far each host's sitemap ``lastmod`` is believed (:mod:`webcrawl.sitemaps.trust`):
    ``hosts`` with a record (HLEN); of the first ``limit`` read (HSCAN: a crawl may have
    hundreds of thousands), how many are trusted, distrusted and unknown, and the first
    ``top`` of them, distrusted first, then by claims seen.  ``truncated``: reading
    stopped at ``limit``, so the counts are of the hosts read, not of all."""
    from webcrawl.sitemaps.trustbook import TrustBook

    read: dict[str, tuple[HostTrust, int]] = {}
    truncated = False
    for origin, trust, claims in TrustBook(client, keys.sitemap_trust, params).hosts():
        if origin not in read and len(read) >= limit:
            truncated = True
            break
        read[origin] = (trust, claims)  # (HSCAN may return a field twice)
    hosts = max(len(read), client.hlen(keys.sitemap_trust))  # (some may have come since)
    rows = [
        {
            "host": origin,
            "state": trust.state(params),
            "claims": claims,  # claimed changes seen in its sitemaps
            "confirmed": trust.confirmed,  # tested claims (recent: halved past the window)
            "refuted": trust.refuted,
            "precision": trust.precision,  # (confirmed + 1) / (tested + 2)
        }
        for origin, (trust, claims) in read.items()
    ]
    states = Counter(row["state"] for row in rows)
    rows.sort(
        key=lambda r: (
            _TRUST_ORDER[r["state"]],
            -r["claims"],
            -(r["confirmed"] + r["refuted"]),
            r["host"],
        )
    )
    return {
        "hosts": hosts,
        "read": len(read),
        "truncated": truncated,
        **{state: states[state] for state in (DISTRUSTED, TRUSTED, UNKNOWN)},
        "listed": rows[:top],
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
    print_sitemap_trust(status["sitemap_trust"])
    print_workers(status["workers"], now)
    return 0


def describe_dupefilter(dupefilter: dict[str, Any]) -> str:
    if dupefilter["kind"] == "set":
        return "exact set"
    d = dupefilter
    full = d["false_positive_rate_now"] > d["error_rate"]
    return (
        f"Bloom filter for {d['capacity']} URLs at {d['error_rate'] * 100:.2g} % false "
        f"positives ({d['shard_capacity']} a shard); about {d['false_positives']} new URLs "
        f"taken for seen so far (never crawled), {d['false_positive_rate_now'] * 100:.2g} % "
        "of new URLs now" + ("; past its capacity: the rate climbs as it fills" if full else "")
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


def print_sitemap_trust(trust: dict[str, Any]) -> None:
    if not trust["hosts"]:
        print("sitemaps   no host's lastmod trust recorded")
        return
    read = ""
    if trust["truncated"]:
        read = f" (only {trust['read']} read: the counts and rows are theirs)"
    print(
        f"sitemaps   lastmod trust of {trust['hosts']} hosts{read}: "
        f"{trust[DISTRUSTED]} distrusted, {trust[TRUSTED]} trusted, {trust[UNKNOWN]} unknown "
        "(too few claims tested); distrusted first:"
    )
    header = f"  {'host':<40} {'state':<10} {'claims':>8} {'confirmed':>9} {'refuted':>8} "
    print(header + f"{'precision':>9}")
    for row in trust["listed"]:
        print(
            f"  {row['host']:<40} {row['state']:<10} {row['claims']:>8} "
            f"{_count(row['confirmed']):>9} {_count(row['refuted']):>8} "
            f"{row['precision']:>9.2f}"
        )
    if trust["hosts"] > len(trust["listed"]):
        print(f"  and {trust['hosts'] - len(trust['listed'])} more")


def _count(n: float) -> str:
    """A tested-claims count, halved past the window: 12, 37.5."""
    return f"{round(n, 1):g}"
