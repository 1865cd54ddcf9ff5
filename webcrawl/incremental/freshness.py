"""How up to date the stored pages are, expected from the revisit model's change rates.

Each page changes as a Poisson process of rate ``l`` (what
:func:`webcrawl.incremental.revisit.estimate_rate` learns from its visits)
and is fetched every ``I`` seconds (the interval the model chose).

- **fresh share**: a page fetched ``a`` seconds ago is still as stored with
  probability ``exp(-l a)``; the expected share of fresh pages is the mean
  of that over the pages (Cho and Garcia-Molina's freshness).
- **missed changes per hour**: between two visits ``I`` apart a page
  changes ``l I`` times on average, and a visit sees at most one of them
  (it tells "changed" or not): ``l I - (1 - exp(-l I))`` changes go unseen
  per interval, so ``(l I - 1 + exp(-l I)) / I`` per second.  A crawl that
  revisits every page as often as it changes misses few; one that visits
  a fast page daily misses nearly all of its changes.

Pure functions of the pages' (rate, last visit, interval) and ``now``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from webcrawl.incremental.revisit import RevisitParams, plan, visits_from_history


@dataclass(frozen=True)
class Freshness:
    pages: int  # pages with a change-rate estimate
    fresh_share: float  # expected share still as stored (1.0 when there are none)
    missed_per_hour: float  # expected changes per hour that no visit will see
    changes_per_hour: float  # expected changes per hour over all those pages


def freshness(pages: Iterable[tuple[float, float, float]], now: float) -> Freshness:
    """The expected freshness of pages given as (change rate per second, last visit
    time, revisit interval in seconds)."""
    n, fresh, missed, changes = 0, 0.0, 0.0, 0.0
    for rate, last, interval in pages:
        if rate < 0 or interval <= 0:
            raise ValueError(
                f"a page needs a rate >= 0 and an interval > 0, got {rate}, {interval}"
            )
        n += 1
        fresh += math.exp(-rate * max(0.0, now - last))
        x = rate * interval
        # x - 1 + exp(-x), without the cancellation of small x (its series: x^2/2 - ...)
        unseen = x * x / 2 - x**3 / 6 + x**4 / 24 if x < 1e-3 else x - 1 + math.exp(-x)
        missed += unseen / interval
        changes += rate
    return Freshness(n, fresh / n if n else 1.0, missed * 3600, changes * 3600)


def page_rates(
    histories: Iterable[Sequence[Sequence]], now: float, params: RevisitParams
) -> Iterator[tuple[float, float, float]]:
    """(change rate, last visit, interval) of each stored page's visit history (the
    store's ``visits``), as the revisit policy estimates them; pages never visited are
    skipped."""
    for history in histories:
        visits = visits_from_history(history)
        if not visits:
            continue
        revisit = plan(visits, now, params)
        yield 1.0 / revisit.period, visits[-1].at, revisit.interval
