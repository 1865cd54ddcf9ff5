"""Revisit policies on a simulated clock: ours against Nutch's AdaptiveFetchSchedule.

Pure Python, no network: pages with a true change process (Poisson or
periodic), a policy deciding each next visit, and the figures an incremental crawler is judged by
for: learned interval / true change period after N visits, share of fetches
that found no change, and freshness (share of time the stored copy equals
the live page).  ``python -m tools.bench revisit`` prints the table.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from webcrawl.incremental.revisit import RevisitParams, Visit, plan

DAY = 86400.0


@dataclass
class ChangeProcess:
    """When a page changes: ``kind`` "poisson" (mean ``period``) or "periodic" (every ``period``
    from ``phase``).  ``times`` are the change instants up to the horizon, sorted."""

    kind: str
    period: float
    phase: float = 0.0
    times: list[float] = field(default_factory=list)

    @classmethod
    def make(cls, kind: str, period: float, horizon: float, rng: random.Random) -> ChangeProcess:
        if kind == "poisson":
            times, t = [], 0.0
            while True:
                t += rng.expovariate(1.0 / period)
                if t > horizon:
                    break
                times.append(t)
            return cls(kind, period, 0.0, times)
        phase = rng.uniform(0, period)
        n = int((horizon - phase) // period) + 1
        return cls(kind, period, phase, [phase + i * period for i in range(max(n, 0))])

    def last_change(self, t: float) -> float | None:
        """The last change at or before ``t`` (None: none yet)."""
        i = bisect.bisect_right(self.times, t)
        return self.times[i - 1] if i else None

    def version(self, t: float) -> int:
        """Changes so far at ``t``: the version of the live page."""
        return bisect.bisect_right(self.times, t)


class NutchAdaptive:
    """Nutch 1.x ``AdaptiveFetchSchedule.setFetchSchedule`` with nutch-default.xml's values:
    inc_rate 0.4, dec_rate 0.2, min 60 s, max 365 days, sync_delta on with rate 0.3,
    first interval ``db.fetch.interval.default`` (30 days)."""

    def __init__(
        self,
        initial: float = 30 * DAY,
        *,
        inc: float = 0.4,
        dec: float = 0.2,
        low: float = 60.0,
        high: float = 365 * DAY,
        sync_rate: float = 0.3,
    ) -> None:
        self.interval, self.inc, self.dec = initial, inc, dec
        self.low, self.high, self.sync_rate = low, high, sync_rate
        self.modified = 0.0

    def next(self, now: float, changed: bool | None, last_modified: float | None) -> float:
        """After a fetch at ``now``: the next fetch time (interval in ``self.interval``)."""
        modified = last_modified if last_modified and last_modified > 0 else self.modified
        if modified <= 0:
            modified = now
        if changed:
            self.interval *= 1 - self.dec
            modified = now
        elif changed is False:
            self.interval *= 1 + self.inc
        delta = now - modified
        self.interval = max(self.interval, delta)
        ref = now - round(delta * self.sync_rate)
        self.interval = min(self.high, max(self.low, self.interval))
        self.modified = modified
        return ref + self.interval


@dataclass
class Run:
    """One page under one policy: what was fetched and how fresh the copy stayed."""

    fetches: int = 0
    unchanged: int = 0  # fetches that found no change
    fresh_time: float = 0.0
    intervals: list[float] = field(default_factory=list)  # learned interval after each visit
    periods: list[float] = field(default_factory=list)  # estimated period after each visit


def simulate(
    process: ChangeProcess,
    policy: str,
    horizon: float,
    *,
    params: RevisitParams | None = None,
    scale: float = 1.0,
    last_modified: bool = True,
    start: float = 0.0,
) -> Run:
    """Visit the page from ``start`` to ``horizon`` under ``policy`` ("ours" or "nutch").

    ``scale`` multiplies our intervals (to meet a fetch budget; a periodic page's are
    only ever lengthened); ``last_modified``:
    whether the server sends it (the last change time).
    """
    params = params or RevisitParams()
    nutch = NutchAdaptive(initial=params.initial_interval) if policy == "nutch" else None
    visits: list[Visit] = []
    run = Run()
    t, seen_version = start, None
    while t < horizon:
        version = process.version(t)
        changed = None if seen_version is None else version != seen_version
        lm = process.last_change(t) if last_modified else None
        if lm is None and last_modified:
            lm = start - DAY  # an old page: changed before we knew it
        run.fetches += 1
        run.unchanged += changed is False
        if nutch is not None:
            due = nutch.next(t, changed, lm)
            run.intervals.append(nutch.interval)
            run.periods.append(nutch.interval)
        else:
            visits.append(Visit(t, changed, lm))
            revisit = plan(visits, t, params)
            if revisit.method != "periodic" or scale > 1:
                # (a periodic page is visited just after each change: visiting sooner
                # would land just before the change, again and again, for nothing)
                due = t + (revisit.due - t) * scale
            else:
                due = revisit.due
            run.intervals.append(revisit.interval)
            run.periods.append(revisit.period)
        due = min(max(due, t + 1.0), horizon)
        run.fresh_time += _fresh(process, t, due)
        seen_version = version
        t = due
    return run


def _fresh(process: ChangeProcess, fetched: float, until: float) -> float:
    """Seconds in [fetched, until) during which the copy fetched at ``fetched`` is current."""
    i = bisect.bisect_right(process.times, fetched)
    nxt = process.times[i] if i < len(process.times) else math.inf
    return min(nxt, until) - fetched


def population(n: int, seed: int, periodic_share: float = 0.25) -> list[tuple[str, float]]:
    """``n`` pages: Poisson with mean periods log-uniform from 1 hour to 30 days, and a
    ``periodic_share`` of periodic pages (hourly, 6-hourly, daily, weekly)."""
    rng = random.Random(seed)
    pages = []
    for _ in range(n):
        if rng.random() < periodic_share:
            pages.append(("periodic", rng.choice([3600.0, 6 * 3600.0, DAY, 7 * DAY])))
        else:
            pages.append(("poisson", math.exp(rng.uniform(math.log(3600), math.log(30 * DAY)))))
    return pages


def quantiles(values: list[float], qs: tuple[float, ...] = (0.05, 0.5, 0.95)) -> list[float]:
    if not values:
        return [math.nan] * len(qs)
    s = sorted(values)
    return [s[min(len(s) - 1, int(q * len(s)))] for q in qs]


Runner = Callable[[ChangeProcess, float], Run]
