"""``webcrawl hbase start|stop|status``: a standalone HBase (Thrift1) in the data dir."""

from __future__ import annotations

import argparse

from scrapy.settings import Settings

HELP = "start, stop or check a standalone HBase (Thrift1)"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webcrawl.localhbase.command import add_arguments

    add_arguments(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.localhbase import command

    return command.run(args, settings)
