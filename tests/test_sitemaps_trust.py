"""How far a host's sitemap lastmod is believed: the pure policy, its record in Redis
(real), and the revisit prior of a page a sitemap named."""

import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webcrawl.sitemaps.trust import (
    DISTRUSTED,
    SLACK,
    TRUSTED,
    UNKNOWN,
    HostTrust,
    TrustParams,
    act_on_claims,
    claims_change,
    prior_interval,
)
from webcrawl.sitemaps.trustbook import TrustBook, parse_value

P = TrustParams(min_evidence=5, threshold=0.6, window=20, probes=3)


def replay(outcomes, params=P):
    trust = HostTrust()
    for changed in outcomes:
        trust = trust.record(changed, params)
    return trust


def test_a_host_is_unknown_until_its_claims_are_tested_then_judged_by_them():
    assert replay([]).state(P) == UNKNOWN
    assert replay([True] * 4).state(P) == UNKNOWN
    assert replay([True] * 5).state(P) == TRUSTED
    assert replay([False] * 5).state(P) == DISTRUSTED  # "now" on every entry
    assert replay([True, True, True, True, False]).state(P) == TRUSTED  # (5/7 >= 0.6)
    assert replay([True, True, False, False, False]).state(P) == DISTRUSTED


def test_a_liar_that_reforms_earns_trust_back_and_a_truthful_host_that_starts_lying_loses_it():
    liar = replay([False] * 40)
    assert liar.state(P) == DISTRUSTED and liar.tested <= P.window
    reformed = replay([False] * 40 + [True] * 25)
    assert reformed.state(P) == TRUSTED
    fallen = replay([True] * 40 + [False] * 25)
    assert fallen.state(P) == DISTRUSTED


def test_claims_and_what_each_verdict_does_with_them():
    assert claims_change(1000.0, 900.0, 2000.0)
    assert not claims_change(900.0 + SLACK, 900.0, 2000.0)  # within the slack
    assert not claims_change(5000.0, 900.0, 2000.0)  # in the future: no change we missed
    assert not claims_change(None, 900.0, 2000.0) and not claims_change(1000.0, None, 2000.0)
    assert act_on_claims(50, replay([True] * 10), P) == (50, 0)
    assert act_on_claims(50, replay([False] * 10), P) == (0, 1)  # one probe a read
    assert act_on_claims(50, HostTrust(), P) == (0, 3)
    assert act_on_claims(2, HostTrust(), P) == (0, 2)


def test_the_prior_of_a_new_page_comes_from_its_entry_within_bounds():
    bounds = (3600.0, 30 * 86400.0)
    now = 10_000_000.0
    assert prior_interval(now - 7200, None, now, bounds) == 7200
    assert prior_interval(now - 60, "yearly", now, bounds) == 3600  # lastmod first, bounded
    assert prior_interval(now - 400 * 86400, None, now, bounds) == 30 * 86400
    assert prior_interval(now + 86400, "daily", now, bounds) == 86400  # future lastmod: no
    assert prior_interval(None, "never", now, bounds) == 30 * 86400
    assert prior_interval(None, "sometimes", now, bounds) is None
    assert prior_interval(None, None, now, bounds) is None


def test_params_are_checked():
    for bad in ({"min_evidence": 0}, {"window": 5}, {"threshold": 1.0}, {"probes": -1}):
        try:
            TrustParams(**bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} accepted")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.booleans(), max_size=80))
def test_the_redis_record_agrees_with_the_policy(redis_client, outcomes):
    redis_client.delete("trust")  # (each example starts afresh)
    book = TrustBook(redis_client, "trust", P)
    for changed in outcomes:
        book.record("http://a.example", changed)
    expected = replay(outcomes)
    got = book.read("http://a.example")
    assert abs(got.confirmed - expected.confirmed) < 1e-9
    assert abs(got.refuted - expected.refuted) < 1e-9


def test_workers_recording_at_once_lose_nothing(redis_client):
    redis_client.delete("trust")
    params = TrustParams(window=10_000)
    books = [TrustBook(redis_client, "trust", params) for _ in range(4)]

    def work(book):
        for i in range(200):
            book.record("http://a.example", i % 2 == 0)
        book.add_claims("http://a.example", 7)

    threads = [threading.Thread(target=work, args=(b,)) for b in books]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hosts = list(books[0].hosts())
    assert hosts == [("http://a.example", HostTrust(400.0, 400.0), 28)]


def test_a_bad_stored_value_reads_as_nothing_known():
    assert parse_value(b"garbage") == (HostTrust(), 0)
    assert parse_value(None) == (HostTrust(), 0)
    assert parse_value(b"-1 2 3") == (HostTrust(0.0, 2.0), 3)


def _planned(said, visits=None, changed=None, status=200):
    from scrapy.utils.test import get_crawler

    from webcrawl.page import Page
    from webcrawl.pipelines.revisit import RevisitPipeline
    from webcrawl.settings import defaults

    crawler = get_crawler(settings_dict={k: v for k, v in vars(defaults).items() if k.isupper()})
    pipeline = RevisitPipeline.from_crawler(crawler)
    now = time.time()
    page = Page(
        url="http://a.example/p",
        final_url="http://a.example/p",
        status=status,
        fetched_at=now,
        visits=visits or [[now, None, None]],
        sitemap=said,
        changed=changed,
    )
    pipeline.process_item(page)
    return page, crawler.stats


def test_a_new_pages_prior_shortens_its_first_wait_only_for_a_trusted_host():
    now = time.time()
    recent = {"lastmod": now - 600}  # "changed ten minutes ago"
    page, stats = _planned({**recent, "trusted": True})
    assert page.revisit_interval == 3600 and page.revisit_method == "sitemap"  # the minimum
    page, _ = _planned(recent)  # unknown host: its claim may not shorten the wait
    assert page.revisit_interval == 86400 and page.revisit_method == "prior"
    page, _ = _planned({"lastmod": now - 10 * 86400})  # unchanged for ten days: longer
    assert abs(page.revisit_interval - 10 * 86400) < 5 and page.revisit_method == "sitemap"
    page, _ = _planned({"changefreq": "weekly"})
    assert page.revisit_interval == 7 * 86400
    assert stats.get_value("revisit/method/sitemap") == 1


def test_a_tested_claim_is_counted_by_its_outcome():
    said = {"lastmod": time.time() - 60, "claim": True}
    _, stats = _planned(said, visits=[[1.0, None, None], [2.0, 1, None]])
    assert stats.get_value("sitemap/claims_confirmed") is None  # changed unknown: no verdict
    _, stats = _planned(said, visits=[[1.0, None, None], [2.0, 1, None]], changed=True)
    assert stats.get_value("sitemap/claims_confirmed") == 1
    _, stats = _planned(said, visits=[[1.0, None, None], [2.0, 0, None]], changed=False)
    assert stats.get_value("sitemap/claims_refuted") == 1


def test_an_error_answer_or_a_redirect_tells_nothing_of_another_hosts_claim():
    said = {"lastmod": time.time() - 60, "claim": True}
    visits = [[1.0, None, None], [2.0, 1, None]]
    _, stats = _planned(said, visits=visits, changed=True, status=503)
    assert stats.get_value("sitemap/claims_confirmed") is None  # a 503 is not a change


def test_a_row_with_odd_values_still_makes_a_revisit_page():
    from webcrawl.page import page_of_row

    page = page_of_row(
        {"status": "n/a", "depth": [1], "fetched_at": None, "etag": 5, "content_length": "x"},
        "http://a.example/p",
    )
    assert (page.status, page.depth, page.fetched_at, page.etag) == (0, 0, 0.0, None)
    assert page.content_length is None and page.final_url == "http://a.example/p"
