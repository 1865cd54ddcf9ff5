"""A worker's Prometheus metrics, read from its Scrapy stats.

Every figure a worker exports is already counted in Scrapy's stats (the
components' ``component/what`` keys), so the metrics cost the crawl nothing
per page: :func:`stats_metrics` maps a snapshot of the stats to metric
families when Prometheus scrapes.  The worker's CPU and memory come from
prometheus-client's own process collector.  Crawl-wide figures (queued per
shard, dead paths, workers alive, pages stored, revisits scheduled,
freshness) are not here: ``webcrawl monitor`` exports them once, from Redis
and the store, so that summing over workers never counts them twice.

Labels stay few: a status class (``2xx`` ...), an outcome or a reason
from a fixed set; never a URL or a host.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

# (metric, help, stats key): plain counters
COUNTERS = [
    ("webcrawl_response_bytes", "Bytes of the responses downloaded", "downloader/response_bytes"),
    ("webcrawl_items_stored", "Pages written to the store", "store/rows"),
    ("webcrawl_store_batches", "Batches written to the store", "store/batches"),
    ("webcrawl_store_outages", "Times the store failed and the worker paused", "store/outages"),
    (
        "webcrawl_tier_outages",
        "Times moves between Redis and the store began to fail",
        "frontier/tier_outages",
    ),
    (
        "webcrawl_tier_errors",
        "Moves between Redis and the store that failed (retried)",
        "frontier/tier_errors",
    ),
    (
        "webcrawl_frontier_round_trips",
        "Round trips to the frontier's Redis",
        "frontier/redis_round_trips",
    ),
    (
        "webcrawl_requests_leased",
        "Requests this worker took from the frontier",
        "scheduler/dequeued/redis",
    ),
    (
        "webcrawl_requests_enqueued",
        "New requests this worker added to the frontier",
        "scheduler/enqueued/redis",
    ),
    (
        "webcrawl_requests_retried",
        "Requests sent back to the frontier to be tried again",
        "frontier/requeued",
    ),
    (
        "webcrawl_leases_expired",
        "Leases that ran out and whose requests were queued again: of dead or stalled "
        "workers, and those handed back to wait (webcrawl_requests_retried)",
        "frontier/lease_expired",
    ),
    (
        "webcrawl_failpath_dropped",
        "Requests not sent because their path is dead",
        "failpath/filtered",
    ),
    ("webcrawl_revisits_scheduled", "Revisits planned and scheduled", "revisit/scheduled"),
    ("webcrawl_revisits_due", "Revisits that came due and went to their host queue", "revisit/due"),
    ("webcrawl_changes_detected", "Revisited pages found changed", "change/changed"),
    ("webcrawl_pages_failed", "Requests that failed for good (recorded as failed)", "pages/failed"),
    ("webcrawl_links_found", "Outlinks of the pages parsed", "links/found"),
    (
        "webcrawl_links_known",
        "Outlinks to URLs the crawl already had (no request made)",
        "links/known",
    ),
]
# (metric, help, stats key of the seconds, stats key of the count): summaries
SUMMARIES = [
    (
        "webcrawl_store_write_seconds",
        "Time to write a batch of pages to the store",
        "store/write_seconds",
        "store/batches",
    ),
    (
        "webcrawl_simhash_seconds",
        "Time to fingerprint a page's text (SimHash)",
        "change/simhash_seconds",
        "change/simhashes",
    ),
]
_STATUS_PREFIX = "downloader/response_status_count/"


def status_class(status: str) -> str:
    """``404`` -> ``4xx`` (a label with five values at most, and ``other``)."""
    return f"{status[0]}xx" if len(status) == 3 and status[0] in "12345" else "other"


def stats_metrics(stats: Mapping[str, Any]) -> Iterator[Any]:
    """Metric families of one snapshot of a worker's stats."""
    pages = CounterMetricFamily(
        "webcrawl_pages_fetched", "Responses received, by status class", labels=["status_class"]
    )
    by_class: dict[str, float] = {}
    for key, value in stats.items():
        if key.startswith(_STATUS_PREFIX):
            label = status_class(key[len(_STATUS_PREFIX) :])
            by_class[label] = by_class.get(label, 0) + value
    for label in sorted(by_class):
        pages.add_metric([label], by_class[label])
    yield pages
    for name, text, key in COUNTERS:
        yield CounterMetricFamily(name, text, value=stats.get(key, 0))
    for name, text, seconds, count in SUMMARIES:
        yield SummaryMetricFamily(
            name, text, count_value=stats.get(count, 0), sum_value=stats.get(seconds, 0.0)
        )
    judged = stats.get("change/changed", 0) + stats.get("change/unchanged", 0)
    yield CounterMetricFamily(
        "webcrawl_revisits_done", "Pages fetched again whose change was judged", value=judged
    )
    started = stats.get("start_time")
    if started is not None:
        yield GaugeMetricFamily(
            "webcrawl_worker_start_time_seconds",
            "When this worker's crawl started (Unix time)",
            value=started.timestamp(),
        )


def http_url(bind: str, port: int, path: str = "/") -> str:
    """The URL of a server listening on ``bind`` (an IP address; IPv6 in brackets)."""
    host = f"[{bind}]" if ":" in bind else bind
    return f"http://{host}:{port}{path}"
