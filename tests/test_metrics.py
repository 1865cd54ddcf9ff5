"""Prometheus metrics of a worker (a running one is read in tests/test_monitor.py, beside the
monitor's page, so that one crawl serves both)."""

import socket

import pytest

from webcrawl.metrics import stats_metrics, status_class


def test_stats_map_to_metrics_with_few_labels():
    stats = {
        "downloader/response_status_count/200": 7,
        "downloader/response_status_count/301": 1,
        "downloader/response_status_count/404": 2,
        "store/rows": 9,
        "store/batches": 3,
        "store/write_seconds": 0.3,
        "change/changed": 2,
        "change/unchanged": 5,
    }
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


@pytest.mark.e2e
def test_bad_metrics_settings_fail_at_start_with_their_name(tmp_path, crawls):
    result = crawls.run(
        ["http://127.0.0.2:1/"],
        tmp_path / "data",
        "METRICS_PORT=9",
        "METRICS_BIND=localhost",
    )
    assert result.returncode != 0
    assert "METRICS_BIND must be an IP address" in result.stderr
    result = crawls.run(
        ["http://127.0.0.2:1/"],
        tmp_path / "data",
        "METRICS_PORT=9",
        "METRICS_BIND=0.0.0.0",
    )
    assert result.returncode != 0
    assert "METRICS_BIND 0.0.0.0 is not a local address" in result.stderr
    assert "METRICS_PUBLIC=True" in result.stderr
    result = crawls.run(["http://127.0.0.2:1/"], tmp_path / "data", "METRICS_PORT=-1")
    assert "METRICS_PORT must be" in result.stderr


def test_a_port_range_all_taken_is_refused_with_the_setting_names():
    from prometheus_client import CollectorRegistry

    from webcrawl.extensions.metrics import serve

    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        a.listen()
        port = a.getsockname()[1]
        try:
            b.bind(("127.0.0.1", port + 1))
        except OSError:
            pytest.skip("the next port is someone else's")
        b.listen()
        with pytest.raises(ValueError, match=f"ports {port} to {port + 1} are all in use"):
            serve(CollectorRegistry(), "127.0.0.1", port, 2)
        server, got = serve(CollectorRegistry(), "127.0.0.1", port, 3)
        server.shutdown()
        server.server_close()
    assert got == port + 2
