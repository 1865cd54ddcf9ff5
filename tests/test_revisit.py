"""The revisit policy: estimators on known histories, bounds, periodic pages, convergence."""

import math
import random
import statistics
from itertools import pairwise

import pytest

from webcrawl.incremental.revisit import (
    RevisitParams,
    Visit,
    estimate_rate,
    history_entry,
    plan,
    visits_from_history,
)
from webcrawl.incremental.revisit_sim import DAY, ChangeProcess, NutchAdaptive, simulate

HOUR = 3600.0
WEAK = RevisitParams(min_interval=1, max_interval=1e9, initial_interval=HOUR, prior_weight=1e-6)


def regular(flags, t=HOUR, lm=None):
    """Visits every ``t`` seconds; ``flags``: changed or not since the previous one."""
    visits = [Visit(0.0, None, lm(0.0) if lm else None)]
    for i, changed in enumerate(flags, 1):
        at = i * t
        visits.append(Visit(at, changed, lm(at) if lm else None))
    return visits


def test_first_visit_uses_the_prior():
    params = RevisitParams(initial_interval=DAY)
    r = plan([Visit(1000.0, None)], 1000.0, params)
    assert r.method == "prior" and r.period == pytest.approx(DAY) and r.due == 1000.0 + DAY


@pytest.mark.parametrize(("k", "n"), [(1, 10), (5, 10), (9, 10), (30, 40)])
def test_poisson_mle_on_equal_intervals_has_its_closed_form(k, n):
    # equal intervals t: the MLE solves 1 - exp(-l t) = k / n
    flags = [True] * k + [False] * (n - k)
    rate, method = estimate_rate(regular(flags), WEAK)
    assert method == "poisson"
    assert rate == pytest.approx(-math.log(1 - k / n) / HOUR, rel=1e-3)


def test_poisson_mle_with_irregular_intervals_solves_the_likelihood_equation():
    rng = random.Random(4)
    visits, at = [Visit(0.0, None)], 0.0
    for _ in range(25):
        at += rng.uniform(0.2, 3) * HOUR
        visits.append(Visit(at, rng.random() < 0.5))
    rate, _ = estimate_rate(visits, WEAK)
    changed = [b.at - a.at for a, b in pairwise(visits) if b.changed]
    unchanged = sum(b.at - a.at for a, b in pairwise(visits) if not b.changed)
    slope = sum(t / math.expm1(rate * t) for t in changed) - unchanged
    assert abs(slope) < 1e-6 * unchanged


def test_the_prior_keeps_extreme_histories_finite():
    params = RevisitParams(min_interval=60, max_interval=365 * DAY, initial_interval=DAY)
    all_changed = plan(regular([True] * 10), 10 * HOUR, params)
    never = plan(regular([False] * 10), 10 * HOUR, params)
    assert 0 < all_changed.period < HOUR  # changes faster than we looked
    # ten quiet hours: 0.5 pseudo-changes over 10.5 hours
    assert never.period == pytest.approx((10 * HOUR + 0.5 * HOUR) / 0.5)


def test_trusted_last_modified_gives_the_closed_form():
    # changes at 0.5 h past each odd hour: LM agrees with the observed changes
    def lm(at):
        return max(
            h + 0.5 * HOUR
            for h in [-2 * HOUR] + [i * HOUR for i in range(1, 40, 2)]
            if h + 0.5 * HOUR <= at
        )

    flags = [(i % 2 == 0) for i in range(1, 21)]  # a change seen at every even hour
    visits = regular(flags, lm=lm)
    rate, method = estimate_rate(visits, WEAK)
    assert method == "last-modified"
    # 10 changes, each seen 0.5 h after it happened; 10 quiet hours
    assert rate == pytest.approx(10 / (10 * 0.5 * HOUR + 10 * HOUR), rel=1e-4)


def test_untrusted_last_modified_is_ignored():
    # a dynamic page: Last-Modified is always "now", though the content rarely changes
    visits = regular([False] * 8 + [True] + [False] * 8, lm=lambda at: at)
    assert estimate_rate(visits, WEAK)[1] == "poisson"
    # Last-Modified in the future
    visits = regular([True, False, True, False], lm=lambda at: at + DAY)
    assert estimate_rate(visits, WEAK)[1] == "poisson"


def test_periodic_page_is_timed_just_after_its_next_change():
    period, phase = DAY, 5 * HOUR
    params = RevisitParams(min_interval=60, max_interval=365 * DAY, initial_interval=DAY)
    visits, at, seen = [], 0.0, None
    proc = ChangeProcess("periodic", period, phase, [phase + i * period for i in range(400)])
    for _ in range(15):
        version = proc.version(at)
        visits.append(Visit(at, None if seen is None else version != seen, proc.last_change(at)))
        seen, r = version, plan(visits, at, params)
        at = r.due
    assert r.method == "periodic" and r.period == pytest.approx(period)
    offset = (r.due - phase) % period
    assert 0 < offset <= 60  # a minute after the change


def test_interval_is_bounded():
    params = RevisitParams(min_interval=HOUR, max_interval=DAY, initial_interval=10 * DAY)
    assert plan([Visit(0.0, None)], 0.0, params).interval == DAY
    fast = plan(regular([True] * 30, t=60.0), 1800.0, params)
    assert fast.interval == HOUR and fast.period < HOUR


def test_bad_params_are_refused():
    with pytest.raises(ValueError, match="min_interval"):
        RevisitParams(min_interval=10, max_interval=5)
    with pytest.raises(ValueError, match="prior_weight"):
        RevisitParams(prior_weight=0)


def test_history_round_trip():
    visits = [Visit(1.5, None, None), Visit(3.25, True, 2.0), Visit(7.0, False, 2.0)]
    assert visits_from_history([history_entry(v) for v in visits]) == visits


def test_learned_interval_converges_to_the_true_period_on_poisson_pages():
    params = RevisitParams(min_interval=60, max_interval=365 * DAY, initial_interval=DAY)
    rng = random.Random(11)
    ratios = {True: [], False: []}
    for lm in (True, False):
        for _ in range(150):
            period = math.exp(rng.uniform(math.log(HOUR), math.log(30 * DAY)))
            proc = ChangeProcess.make("poisson", period, 120 * period, rng)
            run = simulate(proc, "ours", 120 * period, params=params, last_modified=lm)
            ratios[lm].append(run.intervals[29] / period)
    for lm, values in ratios.items():
        assert 0.9 <= statistics.median(values) <= 1.1, (lm, statistics.median(values))


def test_nutch_baseline_rules():
    nutch = NutchAdaptive(initial=DAY, sync_rate=0.0)
    nutch.next(0.0, None, None)
    assert nutch.interval == DAY
    nutch.next(DAY, True, None)
    assert nutch.interval == pytest.approx(0.8 * DAY)
    nutch.next(2 * DAY, False, DAY)
    assert nutch.interval == pytest.approx(0.8 * 1.4 * DAY)
