"""Prometheus metrics of a running worker, read back with prometheus-client's parser."""

import contextlib
import socket
import subprocess
import time
import urllib.request

from conftest import ROOT, crawl_cmd, crawl_env, free_port, run_crawl
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


def test_a_running_worker_serves_its_metrics_and_moves_off_a_taken_port(slow_demo, tmp_path):
    port = free_port()
    with socket.socket() as taken:  # another worker of the machine holds the port
        taken.bind(("127.0.0.1", port))
        taken.listen()
        log = tmp_path / "crawl.log"
        with log.open("w") as err:
            proc = subprocess.Popen(
                crawl_cmd(slow_demo.seeds, tmp_path / "data", f"WEBCRAWL_METRICS_PORT={port}",
                          "FRONTIER_HOST_DELAY=0.2"),  # paced: ~15 s
                cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        try:
            samples, deadline = [], time.monotonic() + 90
            while proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(OSError):  # not up yet, or already closing
                    samples.append(scrape(port + 1))
                time.sleep(0.5)
        finally:
            assert proc.wait(120) == 0, log.read_text()[-2000:]
    text = log.read_text()
    assert f"Serving Prometheus metrics on http://127.0.0.1:{port + 1}/metrics (port {port} " \
           "was taken)" in text  # fmt: skip
    key = "webcrawl_pages_fetched_total[('status_class', '2xx')]"
    counts = [sample.get(key, 0) for sample in samples]
    assert len(set(counts)) >= 3, (counts, text[-2000:])  # it grows while the crawl runs
    assert counts == sorted(counts)
    last = samples[-1]
    assert last["process_resident_memory_bytes[]"] > 10_000_000
    assert "process_cpu_seconds_total[]" in last and "webcrawl_frontier_round_trips_total[]" in last
    assert last["webcrawl_items_stored_total[]"] > 0


def test_bad_metrics_settings_fail_at_start_with_their_name(tmp_path):
    result = run_crawl(["http://127.0.0.2:1/"], tmp_path / "data", "WEBCRAWL_METRICS_PORT=9",
                       "WEBCRAWL_METRICS_BIND=localhost")  # fmt: skip
    assert result.returncode != 0
    assert "WEBCRAWL_METRICS_BIND must be an IP address" in result.stderr
    result = run_crawl(["http://127.0.0.2:1/"], tmp_path / "data", "WEBCRAWL_METRICS_PORT=-1")
    assert "WEBCRAWL_METRICS_PORT must be" in result.stderr
