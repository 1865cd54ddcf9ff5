"""``webcrawl demo``: crawl the bundled demo web end to end, and print a summary."""

from __future__ import annotations

import argparse

from scrapy.settings import Settings

HELP = "crawl the bundled demo web end to end"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hosts", type=int, default=4, help="seed hosts of the demo web")
    parser.add_argument("--pages", type=int, default=100, help="pages per host")
    parser.add_argument(
        "--data-dir", default=".webcrawl/demo", help="where the demo crawl keeps its data"
    )
    parser.add_argument(
        "--no-sitemaps",
        dest="sitemaps",
        action="store_false",
        help="serve no sitemaps (by default the first four hosts have some: a truthful one, "
        "a lying one, pages only a sitemap names, and a gzip bomb with a loop)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl import demo

    return demo.run(args, settings)
