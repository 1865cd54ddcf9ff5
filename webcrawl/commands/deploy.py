"""``webcrawl deploy``: build the egg, deploy to scrapyd targets, start N workers."""

from __future__ import annotations

import argparse

from scrapy.settings import Settings

HELP = "deploy to scrapyd targets and start N web workers"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webcrawl import deploy

    deploy.add_arguments(parser)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl import deploy

    return deploy.run(args)
