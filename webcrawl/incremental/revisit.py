"""When to fetch a page again: estimate its change rate from its visit history.

Pure functions; the caller passes the history and ``now``.  Inputs:

- a page's visits, oldest first (:class:`Visit`): the fetch time, whether the
  content had changed since the previous visit (SimHash distance above the
  threshold; a 304 is "unchanged"; None for the first visit or when unknown)
  and the Last-Modified time the server sent, if any;
- :class:`RevisitParams`: the interval bounds and the prior.

Output: :class:`Revisit`, the estimated change period, the interval and the
next visit time, with the method that produced them.

The estimators (Cho and Garcia-Molina, "Estimating frequency of change",
ACM TOIT 2003), each with a Gamma prior of ``prior_weight`` pseudo-changes
over ``prior_weight`` mean visit intervals (one change per visit, on the
page's own time scale), so a page with few visits gets a sensible estimate
and all-changed or never-changed histories stay finite; a page with one
visit gets ``initial_interval``:

- **poisson**: visits only tell whether at least one change happened in
  each interval.  For intervals ``t_i`` the log-likelihood of a change rate
  ``l`` is ``sum_changed log(1 - exp(-l t_i)) - l * sum_unchanged t_i``;
  the maximum (posterior mode) is found by Newton's method on its derivative,
  which is decreasing in ``l``, so the root is unique.
- **last-modified**: when the server's Last-Modified agrees with what we
  saw (it moves after a visit exactly when the content changed, in at least
  90 % of the visits that carry it, and is never in the future), each
  changed interval also tells how long the page has stayed unchanged since
  its last change, ``u_i = visit_i - last_modified_i``.  Then the estimate is
  closed-form: ``(changes + a) / (sum u_i + sum_unchanged t_i + b)``.
- **periodic**: when trustworthy Last-Modified times show changes at
  multiples of one period (a daily edition, say), the period is their
  common divisor and the next visit is timed just after the next change.

The interval is the estimated mean change period, bounded by
``min_interval`` and ``max_interval``: the learned interval converges to the
page's real change period rather than oscillating around a fraction of it
as multiplicative rules do (Nutch's AdaptiveFetchSchedule: x0.8 on change,
x1.4 otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class Visit:
    at: float  # fetch time, Unix seconds
    changed: bool | None  # since the previous visit; None: first visit / unknown
    last_modified: float | None = None  # the server's Last-Modified, Unix seconds


@dataclass(frozen=True)
class RevisitParams:
    min_interval: float = 3600.0
    max_interval: float = 30 * 86400.0
    initial_interval: float = 86400.0  # a new page's first interval
    prior_weight: float = 0.5  # pseudo-changes the prior counts for
    history: int = 50  # visits used (the most recent)
    periodic_tolerance: float = 0.05  # relative error allowed for "a multiple of the period"

    def __post_init__(self) -> None:
        if not 0 < self.min_interval <= self.max_interval:
            raise ValueError("need 0 < min_interval <= max_interval")
        if self.initial_interval <= 0 or self.prior_weight <= 0:
            raise ValueError("initial_interval and prior_weight must be positive")


@dataclass(frozen=True)
class Revisit:
    period: float  # estimated mean change period, seconds (unbounded)
    interval: float  # the revisit interval: period within the bounds
    due: float  # next visit, Unix seconds
    method: str  # "prior", "poisson", "last-modified" or "periodic"
    visits: int  # visits the estimate used


def plan(visits: Sequence[Visit], now: float, params: RevisitParams) -> Revisit:
    """The next visit of a page whose visits (oldest first) are ``visits``."""
    visits = list(visits)[-params.history :]
    periodic = _periodic(visits, params) if _lm_trusted(visits) else None
    if periodic is not None:
        period, anchor = periodic
        interval = _bounded(period, params)
        due = now + interval
        if interval == period:  # time the visit just after the next expected change
            nxt = anchor + period * math.ceil((now - anchor) / period + 1e-9)
            due = nxt + min(0.02 * period, params.min_interval)
        return Revisit(period, interval, due, "periodic", len(visits))
    rate, method = estimate_rate(visits, params)
    period = 1.0 / rate
    interval = _bounded(period, params)
    return Revisit(period, interval, now + interval, method, len(visits))


def estimate_rate(visits: Sequence[Visit], params: RevisitParams) -> tuple[float, str]:
    """(changes per second, method) from ``visits``; the prior's rate when they tell nothing."""
    a = params.prior_weight
    intervals = _intervals(visits)
    if not intervals:
        return 1.0 / params.initial_interval, "prior"
    # the prior: ``a`` changes per ``a`` mean visit intervals, i.e. "about one change per
    # visit", on the scale of the page's own visits (a prior on the scale of
    # initial_interval would hold a page that changes every few minutes at hours)
    b = a * sum(t for t, _ in intervals) / len(intervals)
    if _lm_trusted(visits):
        changes, exposure = 0, 0.0
        for prev, visit in pairwise(visits):
            t = visit.at - prev.at
            if t <= 0:
                continue
            lm = visit.last_modified
            if lm is not None and lm > prev.at:
                changes += 1
                exposure += min(t, max(0.0, visit.at - lm))
            elif lm is not None or visit.changed is False:
                exposure += t
            elif visit.changed:  # no Last-Modified on this one: the interval-censored term
                exposure += t / 2
                changes += 1
        return (changes + a) / (exposure + b), "last-modified"
    changed = [t for t, c in intervals if c]
    unchanged = sum(t for t, c in intervals if not c)
    return _poisson_mle(changed, unchanged, a, b), "poisson"


def _poisson_mle(changed: list[float], unchanged: float, a: float, b: float) -> float:
    """The posterior mode of the change rate (see the module docstring)."""

    def slope(rate: float) -> tuple[float, float]:
        g, dg = a / rate - unchanged - b, -a / rate**2
        for t in changed:
            x = rate * t
            if x > 700:
                continue  # t / (e^x - 1) underflows to 0
            em1 = math.expm1(x)
            g += t / em1
            dg -= t * t * (em1 + 1) / (em1 * em1)
        return g, dg

    low, high = 1e-15, None  # slope(low) > 0; slope decreases
    rate = (len(changed) + a) / (sum(changed) + unchanged + b)  # a fair start
    for _ in range(100):
        g, dg = slope(rate)
        if abs(g) * rate < 1e-10 * (a + len(changed)):
            return rate
        if g > 0:
            low = rate
        else:
            high = rate
        step = rate - g / dg
        if not (low < step and (high is None or step < high)):  # Newton left the bracket
            step = math.sqrt(low * high) if high is not None else rate * 4
        rate = step
    return rate


def _intervals(visits: Sequence[Visit]) -> list[tuple[float, bool]]:
    """(length, changed) of each interval between visits whose outcome is known."""
    out = []
    for prev, visit in pairwise(visits):
        t = visit.at - prev.at
        if t > 0 and visit.changed is not None:
            out.append((t, bool(visit.changed)))
    return out


def _lm_trusted(visits: Sequence[Visit]) -> bool:
    """Whether Last-Modified agrees with the observed changes (>= 90 %, 3 visits at least)."""
    agree = total = 0
    for prev, visit in pairwise(visits):
        lm = visit.last_modified
        if lm is None or visit.changed is None:
            continue
        if lm > visit.at + 1:  # in the future: a clock we cannot use
            return False
        total += 1
        agree += (lm > prev.at) == bool(visit.changed)
    return total >= 3 and agree >= 0.9 * total


def _periodic(visits: Sequence[Visit], params: RevisitParams) -> tuple[float, float] | None:
    """(period, last change time) when the recent changes fall on multiples of one period.

    The change times are the Last-Modified values that moved since the
    previous visit (a page's Last-Modified from before our first visit says
    nothing of its rhythm); the last 12 of them are used, so a page that
    turns periodic is recognised once its older, irregular changes age out.
    """
    times = sorted(
        {
            visit.last_modified
            for prev, visit in pairwise(visits)
            if visit.last_modified is not None and visit.last_modified > prev.at
        }
    )[-12:]
    if len(times) < 6:  # five gaps: random (Poisson) gaps rarely all fit one period
        return None
    gaps = [b - a for a, b in pairwise(times)]
    base = min(gaps)
    if base <= 0:
        return None
    steps = [round(g / base) for g in gaps]
    tol = params.periodic_tolerance
    if any(abs(g - k * base) > tol * base for g, k in zip(gaps, steps, strict=True)):
        return None
    period = sum(gaps) / sum(steps)
    return period, times[-1]


def _bounded(period: float, params: RevisitParams) -> float:
    return min(params.max_interval, max(params.min_interval, period))


def visits_from_history(history: Sequence[Sequence]) -> list[Visit]:
    """Visits from a stored history: ``[[at, changed (1/0/None), last_modified|None], ...]``."""
    return [Visit(float(h[0]), None if h[1] is None else bool(h[1]), h[2]) for h in history]


def history_entry(visit: Visit) -> list:
    """The stored (JSON) form of a visit: ``[at, 1|0|None, last_modified|None]``."""
    changed = None if visit.changed is None else int(visit.changed)
    return [round(visit.at, 3), changed, visit.last_modified]
