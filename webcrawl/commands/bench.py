"""``webcrawl bench WHAT``: capacity benchmarks on this machine; each prints a table."""

from __future__ import annotations

import argparse

from scrapy.settings import Settings

HELP = "capacity benchmarks on this machine; each prints a table"
CRAWL_OPTIONS = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webcrawl.bench import add_arguments

    add_arguments(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl import bench

    return bench.run(args)
