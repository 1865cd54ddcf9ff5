"""``webcrawl failpaths``: the failed-path filter list (dead paths), or clearing it."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from scrapy.settings import Settings

from webcrawl.store import open_store, store_url_from_settings
from webcrawl.urls.urlkey import BadURLError

HELP = "list (or clear) the failed-path filter list"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all", action="store_true", help="every recorded level, not just dead ones"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--clear",
        nargs="*",
        metavar="SITE",
        help="delete the counts of these sites (URLs or row keys; none: every site); "
        "URLs already dropped come back through the re-probe",
    )


def failpath_entries(store: Any, settings: Settings) -> list[dict[str, Any]]:
    """Every recorded path level: site, level, URL prefix, failures, dead or not, and why
    (a site whose robots.txt gets no answer)."""
    from webcrawl.failpath import FAIL, OK, ROBOTS, SITE, TALLIES
    from webcrawl.urls.urlkey import key_to_url

    heighten = settings.getint("FAILPATH_HEIGHTEN")
    entries = []
    for site, counts in store.failpath_rows():
        origin = key_to_url(site + "/").rstrip("/")
        for level, count in counts.items():
            if level in TALLIES:
                continue
            url = origin + ("/ (whole site)" if level == SITE else level)
            reason = ""
            if level == SITE and counts.get(ROBOTS):
                since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(counts[ROBOTS]))
                reason = f"robots.txt unanswered since {since}"
            entries.append(
                {
                    "site": site,
                    "level": level,
                    "url": url,
                    "failures": count,
                    "dead": count > heighten,
                    "ok": counts.get(OK, 0),
                    "failed": counts.get(FAIL, 0),
                    "reason": reason,
                }
            )
    return entries


def dead_paths(store: Any, settings: Settings) -> list[dict[str, Any]]:
    return [e for e in failpath_entries(store, settings) if e["dead"]]


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.failpath import site_of

    store_url = store_url_from_settings(settings)
    with open_store(store_url) as store:
        if args.clear is not None:
            sites = []
            for target in args.clear or [row for row, _ in store.failpath_rows()]:
                try:
                    sites.append(site_of(target) if "://" in target else target)
                except BadURLError as exc:
                    print(f"webcrawl failpaths: {exc}", file=sys.stderr)
                    return 2
            for site in sites:
                store.failpath_delete(site)
            print(f"Cleared the failure counts of {len(sites)} sites in {store_url}")
            return 0
        entries = failpath_entries(store, settings)
    if not args.all:
        entries = [e for e in entries if e["dead"]]
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    what = "recorded path levels" if args.all else "dead paths (URLs under them are dropped)"
    print(f"{len(entries)} {what} in {store_url}")
    if entries:
        print(f"  {'path':<56} {'failures':>8} {'site ok/failed':>15}")
    for e in entries:
        mark = " dead" if e["dead"] and args.all else ""
        why = f"  {e['reason']}" if e["reason"] else ""
        print(f"  {e['url']:<56} {e['failures']:>8} {e['ok']:>7}/{e['failed']:<7}{mark}{why}")
    return 0
