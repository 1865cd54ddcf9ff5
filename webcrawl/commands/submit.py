"""``webcrawl submit URL|-f FILE``: add seeds to a (running) crawl."""

from __future__ import annotations

import argparse
import sys

from scrapy.settings import Settings

from webcrawl.commands import Session, crawl

HELP = "add seeds to a crawl"
CRAWL_OPTIONS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("urls", nargs="*", help="seed URLs")
    parser.add_argument("-f", "--file", help="file of seed URLs, one per line")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from webcrawl.frontier.layout import submit_seeds
    from webcrawl.safety.bindings import SeedBindings, record_bindings
    from webcrawl.safety.policy import url_hosts
    from webcrawl.safety.seal import Seal
    from webcrawl.urls.seeds import parse_seed_lines, read_seeds

    urls: list[str] = []
    bad = []
    if args.file:
        try:
            found, errors = read_seeds(args.file)
        except OSError as exc:
            print(f"webcrawl submit: {exc}", file=sys.stderr)
            return 2
        urls += found
        bad += errors
    found, errors = parse_seed_lines(args.urls, "argument")
    urls += found
    bad += errors
    for seed in bad:
        print(f"webcrawl submit: skipping bad seed {seed}", file=sys.stderr)
    if not urls:
        print("webcrawl submit: no valid seeds", file=sys.stderr)
        return 2
    with Session(settings) as session:
        keys = crawl(args, settings, session.client)
        # their hosts bound here, sealed (webcrawl/safety/seal.py): whoever else pushes a
        # URL to the list gets no special-use address for it
        seal = Seal(settings.get("WEBCRAWL_SECRET") or "", local=session.redis.embedded is not None)
        bindings = SeedBindings(session.client, keys.seed_bindings, seal)
        bound, untrusted = record_bindings(bindings, urls) if seal.trusted else ({}, set())
        submit_seeds(session.client, keys, urls)
    if not seal.trusted:
        why = "WEBCRAWL_SECRET is not set on this shared Redis"
    elif untrusted:
        why = f"{len(untrusted)} hosts have a binding in Redis that does not verify"
    elif len(bound) < len(url_hosts(urls)):
        why = "some of their names do not resolve now"
    else:
        why = ""
    if why:
        print(
            f"webcrawl submit: {why}: the seeds' hosts are allowed no private or loopback "
            "address (ADDRESSES_ALLOWED_NETWORKS allows networks)",
            file=sys.stderr,
        )
    print(
        f"submitted {len(urls)} seeds to crawl {keys.crawl!r}"
        + (f" ({len(bad)} bad)" if bad else "")
    )
    return 1 if bad else 0
