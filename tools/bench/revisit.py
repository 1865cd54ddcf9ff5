"""``python -m tools.bench revisit``: our revisit policy against Nutch's on a simulated clock.

Thousands of pages with a true change process (Poisson, mean periods
log-uniform from 1 hour to 30 days; a quarter periodic: hourly, 6-hourly,
daily, weekly), each visited from time 0 for 200 of its periods (at least
60 days) by:

- **nutch**: AdaptiveFetchSchedule with nutch-default.xml's rates (x0.8 on
  change, x1.4 otherwise, sync_delta 0.3, 60 s .. 365 days), starting at our
  prior's interval (1 day) instead of Nutch's 30-day default, which would only
  make it look worse on fast pages;
- **ours**: :func:`webcrawl.incremental.revisit.plan`, with and without Last-Modified from
  the server;
- **ours, equal budget**: our intervals (with and without Last-Modified)
  scaled so that we fetch as often as Nutch did in total, for freshness at
  an equal fetch budget.

Printed: learned interval / true change period after 10 and 30 visits
(median and p5-p95, Poisson and periodic pages apart), the spread of the
interval once settled (max/min over visits 30-60), the share of fetches that
found no change, fetches, and freshness (share of time the stored copy
equals the live page, averaged over pages).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from webcrawl.incremental.revisit import RevisitParams
from webcrawl.incremental.revisit_sim import (
    DAY,
    ChangeProcess,
    Run,
    population,
    quantiles,
    simulate,
)

PARAMS = RevisitParams(min_interval=60.0, max_interval=365 * DAY, initial_interval=DAY)


def horizon_of(period: float) -> float:
    return max(200 * period, 60 * DAY)


def run_policy(pages: list[ChangeProcess], policy: str, **kw: object) -> list[Run]:
    return [simulate(p, policy, horizon_of(p.period), params=PARAMS, **kw) for p in pages]


def summarise(name: str, pages: list[ChangeProcess], runs: list[Run]) -> dict:
    row: dict = {"policy": name}
    for kind in ("poisson", "periodic"):
        for n in (10, 30):
            ratios = [
                r.intervals[n - 1] / p.period
                for p, r in zip(pages, runs, strict=True)
                if p.kind == kind and len(r.intervals) >= n
            ]
            row[f"{kind}@{n}"] = quantiles(ratios)
    spreads = [
        max(r.intervals[29:60]) / min(r.intervals[29:60]) for r in runs if len(r.intervals) >= 60
    ]
    row["spread"] = statistics.median(spreads) if spreads else float("nan")
    fetches = sum(r.fetches for r in runs)
    row["fetches"] = fetches
    row["no_change"] = sum(r.unchanged for r in runs) / fetches
    row["freshness"] = statistics.mean(
        r.fresh_time / horizon_of(p.period) for p, r in zip(pages, runs, strict=True)
    )
    return row


def at_budget(
    pages: list[ChangeProcess], target: int, runs: list[Run], **kw: object
) -> tuple[float, list[Run]]:
    """Our intervals scaled until we fetch ``target`` times in all (two corrections)."""
    scale, fetched = 1.0, sum(r.fetches for r in runs)
    for _ in range(2):
        scale *= fetched / target
        runs = run_policy(pages, "ours", scale=scale, **kw)
        fetched = sum(r.fetches for r in runs)
    return scale, runs


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    pages = [
        ChangeProcess.make(kind, period, horizon_of(period), rng)
        for kind, period in population(args.pages_sim, args.seed)
    ]
    started = time.monotonic()
    rows = []
    nutch = run_policy(pages, "nutch")
    rows.append(summarise("nutch (adaptive, defaults)", pages, nutch))
    ours = run_policy(pages, "ours")
    rows.append(summarise("ours", pages, ours))
    no_lm = run_policy(pages, "ours", last_modified=False)
    rows.append(summarise("ours, no Last-Modified", pages, no_lm))
    target = rows[0]["fetches"]
    for name, runs, kw in (("ours", ours, {}), ("ours, no LM", no_lm, {"last_modified": False})):
        scale, scaled = at_budget(pages, target, runs, **kw)
        rows.append(summarise(f"{name}, Nutch's budget (x{scale:.2f})", pages, scaled))
    print(
        f"{len(pages)} simulated pages ({sum(p.kind == 'poisson' for p in pages)} Poisson, "
        f"{sum(p.kind == 'periodic' for p in pages)} periodic), seed {args.seed}, "
        f"{time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    print_table(rows)
    return 0


def print_table(rows: list[dict]) -> None:
    def q(v: list[float]) -> str:
        return f"{v[1]:.2f} ({v[0]:.2f}-{v[2]:.2f})"

    print("\nlearned interval / true change period: median (p5-p95)")
    head = f"{'policy':<38} {'Poisson @10':>18} {'Poisson @30':>18} {'periodic @30':>18}"
    print(head)
    for r in rows:
        print(
            f"{r['policy']:<38} {q(r['poisson@10']):>18} {q(r['poisson@30']):>18} "
            f"{q(r['periodic@30']):>18}"
        )
    print(f"\n{'policy':<38} {'spread':>7} {'fetches':>9} {'no change':>10} {'freshness':>10}")
    for r in rows:
        print(
            f"{r['policy']:<38} {r['spread']:>7.2f} {r['fetches']:>9} {r['no_change']:>10.1%} "
            f"{r['freshness']:>10.1%}"
        )
