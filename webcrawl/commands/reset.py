"""``webcrawl reset --yes``: delete a crawl's state in Redis (its pages are kept)."""

from __future__ import annotations

import argparse
import sys

from scrapy.settings import Settings

from webcrawl.commands import Session, crawl_keys, crawl_name
from webcrawl.frontier.cold import clear_cold
from webcrawl.store import StoreError, open_store, store_url_from_settings

HELP = "delete a crawl's state in Redis"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", action="store_true", help="really do it")


def run(args: argparse.Namespace, settings: Settings) -> int:
    crawl = crawl_name(args, settings)
    if not args.yes:
        print(
            f"webcrawl reset: this deletes crawl {crawl!r}'s queue, dupefilter and "
            "workers in Redis, and the queued requests it keeps in the store (its pages "
            "are kept); add --yes to do it",
            file=sys.stderr,
        )
        return 2
    from webcrawl.frontier.layout import delete_crawl, describe_store, recorded_store

    store_url = store_url_from_settings(settings)
    with Session(settings) as session:
        keys = crawl_keys(session.client, crawl, settings)
        crawl_store = recorded_store(session.client, keys)
        # the store's tier first: rows left there while Redis forgot the crawl would come
        # back into the next crawl of this name
        try:
            with open_store(store_url) as store:
                if crawl_store is not None and crawl_store["id"] != store.identity():
                    print(
                        f"webcrawl reset: crawl {crawl!r} keeps its queued requests in "
                        f"{describe_store(crawl_store)}, not in this command's store "
                        f"{store_url}: nothing deleted (set STORE_URL to the "
                        "crawl's store)",
                        file=sys.stderr,
                    )
                    return 1
                cold = clear_cold(store, keys.crawl)
        except StoreError as exc:
            print(
                f"webcrawl reset: could not delete crawl {crawl!r}'s queued requests in "
                f"{store_url}: {exc}; nothing deleted in Redis (try again when the store "
                "is back)",
                file=sys.stderr,
            )
            return 1
        deleted = delete_crawl(session.client, keys)
    print(
        f"reset crawl {crawl!r}: deleted {cold} queued requests in {store_url}, and {deleted} keys"
    )
    return 0
