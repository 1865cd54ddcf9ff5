"""``webcrawl show URL``: a page's stored row, as JSON; with WARC output, where its last
capture is (``warc``: file, offset; the file's path is said on stderr)."""

from __future__ import annotations

import argparse
import json
import sys

from scrapy.settings import Settings

from webcrawl.store import open_store, store_url_from_settings
from webcrawl.urls.urlkey import BadURLError, url_to_key

HELP = "print a page's stored row as JSON"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url")


def run(args: argparse.Namespace, settings: Settings) -> int:
    try:
        key = url_to_key(args.url)
    except BadURLError as exc:
        print(f"webcrawl show: {exc}", file=sys.stderr)
        return 2
    store_url = store_url_from_settings(settings)
    with open_store(store_url) as store:
        row = store.get_page(key)
    if row is None:
        print(f"webcrawl show: not stored: {args.url} (key {key} in {store_url})", file=sys.stderr)
        return 1
    print(json.dumps(row, indent=2, ensure_ascii=False))
    capture = row.get("warc")
    if isinstance(capture, dict) and capture.get("file"):
        from webcrawl.pipelines.warc import warc_dir

        print(
            f"last capture: {capture.get('type', 'record')} record at offset "
            f"{capture.get('offset')} ({capture.get('length')} bytes) of "
            f"{warc_dir(settings) / str(capture['file'])}",
            file=sys.stderr,
        )
    return 0
