"""``webcrawl bench WHAT``: benchmarks; each prints a table."""

from __future__ import annotations

import argparse

from scrapy.settings import Settings

HELP = "benchmarks on the demo web; each prints a table"
CRAWL_OPTIONS = False


def add_arguments(p: argparse.ArgumentParser) -> None:
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


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl import bench

    # --hosts and --duration mean other things to frontier and tiers: so do their defaults
    if args.what not in ("frontier", "tiers"):
        args.hosts = 4 if args.hosts is None else args.hosts
        args.duration = 120.0 if args.duration is None else args.duration
    elif args.what == "tiers":
        args.hosts = 100_000 if args.hosts is None else args.hosts
        args.duration = 20.0 if args.duration is None else args.duration
    if args.urls is None:
        args.urls = 10_000_000 if args.what == "tiers" else 200_000
    return bench.run(args)
