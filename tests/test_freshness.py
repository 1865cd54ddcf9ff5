"""Expected freshness (webcrawl.incremental.freshness) against simulated Poisson pages."""

import math
import random
from itertools import pairwise

import pytest

from webcrawl.incremental.freshness import freshness, page_rates


def test_one_page_by_hand():
    hour = 3600.0
    f = freshness([(1 / hour, 1000.0 - hour, hour)], now=1000.0)
    assert f.pages == 1
    assert f.fresh_share == pytest.approx(math.exp(-1))
    assert f.missed_per_hour == pytest.approx(math.exp(-1))  # 1 - (1 - e^-1) per hour
    assert f.changes_per_hour == pytest.approx(1.0)


def test_no_pages_is_all_fresh_and_bad_input_is_refused():
    assert freshness([], now=0).fresh_share == 1.0
    with pytest.raises(ValueError, match="interval > 0"):
        freshness([(0.1, 0.0, 0.0)], now=1.0)


def test_tiny_rates_do_not_cancel_to_zero_or_below():
    f = freshness([(1e-12, 0.0, 60.0)], now=60.0)
    assert 0 < f.missed_per_hour < 1e-15 and f.fresh_share == pytest.approx(1.0)


def test_agrees_with_a_simulation_of_poisson_pages():
    """Pages changing at random (Poisson), each visited every interval for 200 hours: the
    changes no visit saw, and the pages unchanged since their last visit, as counted."""
    rng = random.Random(3)
    horizon = 200 * 3600.0  # a multiple of every interval
    now = horizon - 450.0  # within an interval of every page
    pages, missed, fresh = [], 0, 0
    for _ in range(400):
        rate = rng.choice([1 / 600, 1 / 3600, 1 / 86400])
        interval = rng.choice([900.0, 3600.0, 7200.0])
        changes, t = [], rng.expovariate(rate)
        while t < horizon:
            changes.append(t)
            t += rng.expovariate(rate)
        visits = [i * interval for i in range(int(horizon // interval) + 1)]
        for a, b in pairwise(visits):
            missed += max(0, sum(1 for c in changes if a < c <= b) - 1)
        last = max(v for v in visits if v <= now)
        fresh += not any(last < c <= now for c in changes)
        pages.append((rate, last, interval))
    expected = freshness(pages, now)
    assert missed / 200 == pytest.approx(expected.missed_per_hour, rel=0.05)
    assert fresh / len(pages) == pytest.approx(expected.fresh_share, abs=0.08)


def test_rates_come_from_the_revisit_policy():
    from webcrawl.incremental.revisit import RevisitParams, Visit, history_entry

    params = RevisitParams(min_interval=60.0, max_interval=86400.0)
    changed_hourly = [history_entry(Visit(i * 3600.0, i > 0 or None)) for i in range(20)]
    rates = list(page_rates([changed_hourly, []], 20 * 3600.0, params))
    assert len(rates) == 1  # a page without visits has no estimate
    rate, last, interval = rates[0]
    assert last == 19 * 3600.0 and 60.0 <= interval <= 86400.0
    assert rate > 1 / 3600.0  # changed at every hourly visit: at least hourly
