"""Prometheus metrics of a worker (a running one is read in tests/test_monitor.py, beside the
monitor's page, so that one crawl serves both)."""

import urllib.request

from conftest import run_crawl
from prometheus_client.parser import text_string_to_metric_families

from webcrawl.metrics import stats_metrics, status_class


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {s.name + str(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip


def test_stats_map_to_metrics_with_few_labels():
    stats = {"downloader/response_status_count/200": 7, "downloader/response_status_count/301": 1,
             "downloader/response_status_count/404": 2, "store/rows": 9, "store/batches": 3,
             "store/write_seconds": 0.3, "change/changed": 2, "change/unchanged": 5}  # fmt: skip
    families = {f.name: f for f in stats_metrics(stats)}
    pages = {s.labels["status_class"]: s.value for s in families["webcrawl_pages_fetched"].samples}
    assert pages == {"2xx": 7, "3xx": 1, "4xx": 2}
    assert families["webcrawl_items_stored"].samples[0].value == 9
    write = {s.name: s.value for s in families["webcrawl_store_write_seconds"].samples}
    assert write == {
        "webcrawl_store_write_seconds_count": 3,
        "webcrawl_store_write_seconds_sum": 0.3,
    }
    assert families["webcrawl_revisits_done"].samples[0].value == 7
    assert status_class("999") == "other" and status_class("20") == "other"


def test_bad_metrics_settings_fail_at_start_with_their_name(tmp_path):
    result = run_crawl(["http://127.0.0.2:1/"], tmp_path / "data", "WEBCRAWL_METRICS_PORT=9",
                       "WEBCRAWL_METRICS_BIND=localhost")  # fmt: skip
    assert result.returncode != 0
    assert "WEBCRAWL_METRICS_BIND must be an IP address" in result.stderr
    result = run_crawl(["http://127.0.0.2:1/"], tmp_path / "data", "WEBCRAWL_METRICS_PORT=-1")
    assert "WEBCRAWL_METRICS_PORT must be" in result.stderr
