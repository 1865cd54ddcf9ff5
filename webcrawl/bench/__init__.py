"""Benchmarks: commands that print a table (``webcrawl bench WHAT``); tools, not the product.

Each benchmark is a module of its own (``crawl`` also holds ``politeness`` and
``memory``); what they share is in :mod:`webcrawl.bench.common`, so no
benchmark imports another.
"""

from __future__ import annotations

import argparse
import importlib

_MODULES = {
    "crawl": "crawl",
    "stages": "stages",
    "politeness": "crawl",
    "memory": "crawl",
    "failpath": "failpath",
    "revisit": "revisit",
    "simhash": "simhash",
    "store": "store",
    "incremental": "incremental",
    "frontier": "frontier",
    "tiers": "tiers",
}


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args.what`` (its module is imported only then)."""
    module = importlib.import_module(f"webcrawl.bench.{_MODULES[args.what]}")
    if module.__name__.endswith(".crawl"):
        return {
            "crawl": module.run_crawl,
            "politeness": module.run_politeness,
            "memory": module.run_memory,
        }[args.what](args)
    return module.run(args)
