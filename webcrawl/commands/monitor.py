"""``webcrawl monitor``: a live status page of the crawl, and its crawl-wide metrics."""

from __future__ import annotations

import argparse
from typing import Any

from scrapy.settings import Settings

from webcrawl.commands import Session, crawl_name
from webcrawl.commands.status import collect_status
from webcrawl.store import open_store, store_url_from_settings

HELP = "serve a live status page of the crawl, and its crawl-wide metrics"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8410, help="port of the page (default 8410)")
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument(
        "--public", action="store_true", help="allow a --bind address that is not local"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a name the page is reached by (its Host header), besides the bind address "
        "and localhost; repeat for more (a request naming another host gets 421)",
    )
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between two samples")
    parser.add_argument(
        "--top", type=int, default=10, help="rows of each table (host queues, sitemap trust)"
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    import signal

    from webcrawl.frontier.layout import existing_crawl
    from webcrawl.metrics import http_url
    from webcrawl.monitor.server import Sampler, check_bind, serve
    from webcrawl.settings_check import revisit_params

    check_bind(args.bind, args.public)
    crawl = crawl_name(args, settings)
    with Session(settings) as session:
        if not existing_crawl(session.client, crawl, settings.getint("FRONTIER_SHARDS"))[1]:
            raise SystemExit(
                f"webcrawl monitor: there is no crawl {crawl!r} in "
                f"{session.redis.description} (name it with --crawl; "
                "-s WEBCRAWL_DATA_DIR= for an embedded one)"
            )
        store_url = store_url_from_settings(settings)

        def rows(limit: int) -> list[Any]:
            with open_store(store_url) as store:
                return [row.get("visits") or [] for row in store.scan_pages(limit=limit)]

        sampler = Sampler(
            lambda: collect_status(session, settings, crawl, args.top),
            rows,
            revisit_params(settings),
            args.interval,
        )
        server = serve(sampler, args.bind, args.port, args.allowed_host or [])
        sampler.start()
        print(
            f"webcrawl monitor: crawl {crawl!r} on {http_url(args.bind, server.server_port)} "
            f"(metrics: /metrics); Ctrl-C stops it",
            flush=True,
        )
        # a service manager's stop (SIGTERM) ends it as Ctrl-C does: the embedded Redis
        # it started is shut down on the way out, not left running
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            sampler.stop()
            server.server_close()
    return 0
