"""``python -m tools.bench WHAT``: comparisons, profiles and experiments; each prints a table."""

from __future__ import annotations

import argparse
import importlib
import sys

from webcrawl.bench import add_crawl_arguments, add_frontier_arguments, add_site_arguments
from webcrawl.settings import defaults

HELP = {
    "compare": "webcrawl bench crawl's table with a plain Scrapy spider, the web spider on "
    "Scrapy's own queue and on stock scrapy-redis first",
    "stages": "CPU ms per page by stage (parse, links, requests, scheduler, pipelines, store) "
    "from a py-spy profile of one crawl",
    "frontier": "webcrawl bench frontier on one Redis and on a local Redis Cluster of three "
    "masters with a replica each (per-master balance)",
    "failpath": "the failed-path filter's paper experiment: filter off vs its three parameter "
    "sets, and an oracle",
    "simhash": "our SimHash vs the simhash package on real page texts (--site)",
    "revisit": "our revisit policy vs Nutch's on a simulated clock",
    "incremental": "a continuous crawl of the changing demo web at accelerated time, judged "
    "from the server's side",
    "warc": "WARC bytes per page, and what revisit records save on a second crawl of a "
    "changing demo web",
    "warc_members": "µs and bytes of a WARC record's gzip member: zlib-ng (a compressed "
    "payload stored) against the standard library's zlib, plain and gzip-encoded pages",
    "redis_profile": "the frontier's Redis work a page in instructions (callgrind), not "
    "time: bench frontier's workload for a fixed number of pages, split into commands, the "
    "Lua around them and the rest; the same count on any machine",
    "layouts": "Redis CPU a page of bench frontier's synthetic workload as plain pipelined "
    "commands, in the frontier's data layout and in others (per-host integer seen sets, "
    "list host queues), and made atomic by the least Lua step, by MULTI/EXEC or by "
    "optimistic transactions (WATCH): what a frontier of that layout costs at least "
    "(--count: instructions, under callgrind)",
    "sitemaps": "revisits wasted and changes caught with and without sitemaps, for a truthful "
    "and a lying host of the changing demo web; a worker's memory reading the largest and "
    "the most hostile sitemaps",
}


def _stages(p: argparse.ArgumentParser) -> None:
    add_site_arguments(p)
    p.add_argument(
        "--raw",
        metavar="FILE",
        help="keep the profile's collapsed stacks (py-spy's raw format, for flamegraph.pl "
        "or speedscope) in FILE",
    )
    p.add_argument(
        "--setup",
        choices=("webcrawl", "plain"),
        default="webcrawl",
        help="profile webcrawl (one worker, embedded Redis) or the plain Scrapy spider",
    )
    p.add_argument("--warc", action="store_true", help="with WARC output (webcrawl only)")


def _frontier(p: argparse.ArgumentParser) -> None:
    add_frontier_arguments(p)
    p.add_argument(
        "--target",
        choices=("single", "cluster", "both"),
        default="both",
        help="one Redis, the local Redis Cluster (3 masters, a replica each), or both",
    )


def _failpath(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", type=int, default=3, help="runs per setup (the median is shown)")
    p.add_argument(
        "--real-waits",
        action="store_true",
        help="the paper's waits and robots.txt's 300 s in real seconds (the re-probe "
        "interval 1/60): about half an hour per set",
    )
    p.add_argument(
        "--sets",
        type=lambda v: [int(x) for x in v.split(",")],
        default=None,
        metavar="1,2,3",
        help="which of the paper's parameter sets (default all)",
    )


def _simhash(p: argparse.ArgumentParser) -> None:
    p.add_argument("--site", metavar="DIR", action="append", help="a directory of HTML pages")
    p.add_argument("--limit", type=int, default=100_000, help="pages at most")


def _revisit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pages-sim", type=int, default=2000, help="simulated pages")
    p.add_argument("--seed", type=int, default=1, help="random seed")


def _incremental(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=4, help="seed hosts of the demo web")
    p.add_argument("--pages", type=int, default=100, help="pages per host (at most 100)")
    p.add_argument("--speed", type=float, default=3600.0, help="simulated seconds per real second")
    p.add_argument(
        "--duration", type=float, default=120.0, help="real seconds of continuous crawling"
    )
    p.add_argument("--seed", type=int, default=1, help="random seed")


def _warc(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=int, default=4, help="seed hosts of the demo web")
    p.add_argument("--pages", type=int, default=300, help="pages per host")
    p.add_argument("--speed", type=float, default=3600.0, help="simulated seconds per real second")
    p.add_argument(
        "--gap",
        type=float,
        default=10.0,
        help="real seconds between the first crawl and the second",
    )


def _warc_members(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pages", type=int, default=600, help="pages of the demo web")
    p.add_argument("--repeat", type=int, default=5, help="passes (the best is shown)")


def _sitemaps(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pages", type=int, default=60, help="pages per host")
    p.add_argument("--speed", type=float, default=1800.0, help="simulated seconds per real second")
    p.add_argument(
        "--duration", type=float, default=120.0, help="real seconds of each continuous crawl"
    )


def _redis_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="synthetic hosts (default 25000: as many as each of bench frontier's 4 workers "
        "owns, and its seen cache holds their navigation links); with --graph, hosts of "
        "its copies (default 1000, as bench frontier's)",
    )
    p.add_argument("--graph", metavar="FILE", help="replay a recorded link graph instead")
    p.add_argument("--pages", type=int, default=2000, help="pages measured")
    p.add_argument("--shards", type=int, default=defaults.FRONTIER_SHARDS)
    p.add_argument("--links", type=int, default=60, help="links per page (synthetic)")
    p.add_argument("--prefetch", type=int, default=defaults.FRONTIER_PREFETCH)
    p.add_argument("--redis-server", metavar="PATH", help="the redis-server to profile")
    p.add_argument("--shown", type=int, default=8, help="commands shown")
    p.add_argument("--keep", metavar="FILE", help="keep callgrind's profile in FILE")


def _layouts(p: argparse.ArgumentParser) -> None:
    from tools.bench.layouts import add_arguments

    add_arguments(p)


ARGUMENTS = {
    "compare": add_crawl_arguments,
    "stages": _stages,
    "frontier": _frontier,
    "failpath": _failpath,
    "simhash": _simhash,
    "revisit": _revisit,
    "incremental": _incremental,
    "warc": _warc,
    "warc_members": _warc_members,
    "redis_profile": _redis_profile,
    "sitemaps": _sitemaps,
    "layouts": _layouts,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    sub = parser.add_subparsers(dest="what", required=True, metavar="WHAT")
    for name, help_text in HELP.items():
        ARGUMENTS[name](sub.add_parser(name, help=help_text, description=help_text))
    args = parser.parse_args(argv)
    return importlib.import_module(f"tools.bench.{args.what}").run(args)


if __name__ == "__main__":
    sys.exit(main())
