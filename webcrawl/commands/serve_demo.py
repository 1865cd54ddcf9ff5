"""``webcrawl serve-demo``: serve the demo web on 127.0.0.x, for your own crawls."""

from __future__ import annotations

import argparse

from scrapy.settings import Settings

HELP = "serve the demo web on 127.0.0.x"
CRAWL_OPTIONS = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webcrawl.demo import web

    web.add_arguments(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.demo import web

    web.run(args)
    return 0
