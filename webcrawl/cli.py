"""The ``webcrawl`` command: run the demo, inspect and steer a crawl.

    webcrawl demo                 crawl the bundled demo web, print a summary
    webcrawl status [--json]      the crawl's queue, dupefilter, store, workers
    webcrawl monitor [--port N]   the same on a live web page, and crawl-wide metrics
    webcrawl show URL             a page's stored row as JSON
    webcrawl failpaths [--clear]  the failed-path filter list (dead paths)
    webcrawl submit URL|-f FILE   add seeds to a (running) crawl
    webcrawl reset --yes          delete a crawl's state in Redis
    webcrawl serve-demo           serve the demo web (for your own crawls)
    webcrawl deploy [TARGET...]   build the egg, deploy to scrapyd, start N workers
    webcrawl bench                pages/s of the full stack vs plain Scrapy
    webcrawl hbase start|stop|status   a standalone HBase in the data dir, for the
                                  HBase store on one machine

Each command is a module of :mod:`webcrawl.commands`.  Settings come from the Scrapy
project (``scrapy.cfg``, or ``SCRAPY_SETTINGS_MODULE``, e.g.
``webcrawl.settings.cluster``), with ``-s NAME=VALUE`` overrides, exactly as for
``scrapy crawl``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from webcrawl.commands import COMMANDS, load_settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="webcrawl", description=__doc__.split("\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting (as with scrapy crawl -s)",
    )
    common.add_argument("--crawl", help="crawl name (default: WEBCRAWL_CRAWL, else 'web')")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        command = importlib.import_module(f"webcrawl.commands.{name}")
        p = sub.add_parser(
            name.replace("_", "-"),
            parents=[common] if command.CRAWL_OPTIONS else [],
            help=command.HELP,
        )
        command.add_arguments(p)
        p.set_defaults(func=command.run)
    return parser


def main(argv: list[str] | None = None) -> Any:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(getattr(args, "set", []))
        return args.func(args, settings)
    except (ValueError, OSError) as exc:
        print(f"webcrawl {args.command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        import redis

        if isinstance(exc, redis.RedisError):
            print(f"webcrawl {args.command}: Redis: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
