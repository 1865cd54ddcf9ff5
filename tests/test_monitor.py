"""`webcrawl monitor` against a running crawl, seen in a real browser (headless Chromium,
Debian's, driven by Playwright), and its crawl-wide metrics parsed by prometheus-client."""

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import redis
from conftest import ROOT, crawl_env, free_port
from prometheus_client.parser import text_string_to_metric_families

from webcrawl.frontier.embedded_redis import EmbeddedRedis
from webcrawl.frontier.keys import CrawlKeys
from webcrawl.monitor.server import HostCheck
from webcrawl.settings import defaults

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def monitor(data, *args):
    cmd = [
        sys.executable,
        "-m",
        "webcrawl.cli",
        "monitor",
        "-s",
        f"WEBCRAWL_DATA_DIR={data}",
        *args,
    ]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=crawl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def served_port(log_path, deadline):
    """The port a worker says it serves its metrics on (waited for in its log)."""
    while True:
        found = re.search(
            r"Serving Prometheus metrics on http://[^/]+:(\d+)/", log_path.read_text()
        )
        if found:
            return int(found.group(1))
        assert time.monotonic() < deadline, "the worker never said where it serves metrics"
        time.sleep(0.3)


def scrape_worker(port, deadline):
    """A worker's metrics as {name[labels]: value} (retried until it serves them)."""
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            return {
                s.name + str(sorted(s.labels.items())): s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
            }
        except OSError:
            assert time.monotonic() < deadline, "the worker serves no metrics"
            time.sleep(0.3)


def failed(proc):
    """The stderr of a monitor that must exit with an error."""
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    return err


def start_monitor(data, port, deadline):
    """The monitor, once the crawl exists (it refuses a crawl that does not)."""
    while True:
        proc = monitor(data, "--port", str(port), "--interval", "0.5")
        line = proc.stdout.readline()
        if "webcrawl monitor: crawl 'web'" in line:
            return proc
        _, err = proc.communicate(timeout=10)
        assert "there is no crawl 'web'" in err
        assert time.monotonic() < deadline, "the crawl never appeared"
        time.sleep(0.3)


@pytest.mark.e2e
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium; CI has it)",
)
def test_the_page_shows_the_workers_and_the_count_grows(slow_demo, tmp_path, crawls):
    from playwright.sync_api import sync_playwright

    data, port, metrics = tmp_path / "data", free_port(), free_port()
    mon = None
    with socket.socket() as taken:  # another worker of the machine holds the metrics port
        taken.bind(("127.0.0.1", metrics))
        taken.listen()
        crawl = crawls.start(
            slow_demo.seeds,
            data,
            "FRONTIER_HOST_DELAY=0.3",
            "STATUS_HEARTBEAT_INTERVAL=0.5",
            f"METRICS_PORT={metrics}",
        )
        try:
            mon = start_monitor(data, port, time.monotonic() + 60)
            # the next free port up (another process may hold metrics + 1); a busy machine
            served = served_port(crawl.log, time.monotonic() + 60)
            worker = [scrape_worker(served, time.monotonic() + 60)]
        except BaseException:  # no monitor left running into the next test
            if mon is not None:
                mon.kill()
                mon.communicate(timeout=10)
            raise
    errors: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"http://127.0.0.1:{port}/")
            # (polled from here: the page's CSP forbids the eval wait_for_function needs)
            page.wait_for_selector("#workers tbody tr", timeout=30_000)
            assert page.inner_text("#crawl") == "web"
            assert page.inner_text("#alive") == "1"
            assert "busy" in page.inner_text("#workers") or "idle" in page.inner_text("#workers")
            first = stored_on(page)
            deadline = time.monotonic() + 30
            while stored_on(page) <= first and time.monotonic() < deadline:
                time.sleep(0.2)
            assert stored_on(page) > first
            page.wait_for_selector(
                '#line[points]:not([points=""])', state="attached", timeout=30_000
            )
            page.screenshot(path=str(tmp_path / "monitor.png"), full_page=True)
            worker.append(scrape_worker(served, time.monotonic() + 10))
            browser.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            families = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
        # a page that rebound its own name to 127.0.0.1 reads nothing (DNS rebinding)
        hosts = (f"evil.example:{port}", f"127.0.0.1:{port}", f"localhost:{port}")
        answers = {host: get_with_host(port, "/api/status", host) for host in hosts}
        # and a worker's own metrics server, the same
        answers["worker"] = get_with_host(served, "/metrics", f"rebound.example:{served}")
    finally:
        mon.terminate()
        mon.communicate(timeout=10)
    log = crawls.finish(crawl)
    assert errors == []  # the page runs under its Content-Security-Policy
    assert answers[f"evil.example:{port}"][0] == 421
    assert answers["worker"][0] == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        status, headers = answers[host]
        assert status == 200
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert served > metrics
    # the worker's own metrics: moved off the taken port, and said so; they grow too
    said = f"Serving Prometheus metrics on http://127.0.0.1:{served}/metrics (port {metrics}"
    assert said in log
    key = "webcrawl_pages_fetched_total[('status_class', '2xx')]"
    assert worker[1][key] > worker[0].get(key, 0)
    assert worker[1]["process_resident_memory_bytes[]"] > 10_000_000
    assert "process_cpu_seconds_total[]" in worker[1]
    assert worker[1]["webcrawl_frontier_round_trips_total[]"] > 0
    assert (tmp_path / "monitor.png").stat().st_size > 10_000
    assert families["webcrawl_crawl_workers_alive"].samples[0].value == 1
    assert len(families["webcrawl_crawl_queued"].samples) == defaults.FRONTIER_SHARDS  # a shard
    assert families["webcrawl_crawl_stored_pages"].samples[0].value > 0


def stored_on(page) -> int:
    return int(page.inner_text("#stored").replace(",", "") or 0)


def get_with_host(port: int, path: str, host: str) -> tuple[int, dict[str, str]]:
    """GET ``path`` from the monitor on 127.0.0.1 with the Host header ``host``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers={"Host": host})
        response = connection.getresponse()
        response.read()
        return response.status, dict(response.getheaders())
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("bind", "names", "host", "answered"),
    [
        ("127.0.0.1", [], "127.0.0.1:8410", True),
        ("127.0.0.1", [], "127.0.0.1", True),
        ("127.0.0.1", [], "localhost:8410", True),
        ("127.0.0.1", [], "LOCALHOST.:8410", True),
        ("127.0.0.1", [], "rebound.example:8410", False),
        ("127.0.0.1", [], "127.0.0.2:8410", False),
        ("127.0.0.1", [], "", False),
        ("127.0.0.1", ["crawl.corp"], "crawl.corp:8410", True),
        ("::1", [], "[::1]:8410", True),
        ("::1", [], "[::2]:8410", False),
        ("0.0.0.0", [], "10.1.2.3:8410", True),  # any address: rebinding needs a name
        ("0.0.0.0", [], "localhost:8410", True),  # a local agent scraping localhost
        ("0.0.0.0", ["crawl.corp"], "crawl.corp", True),
    ],
)
def test_the_page_answers_only_hosts_that_name_it(bind, names, host, answered):
    assert HostCheck(bind, names).allows(host) is answered


def test_bad_input_gets_a_clear_message(tmp_path, redis_server):
    data = tmp_path / "data"
    assert "there is no crawl 'nosuch'" in failed(
        monitor(data, "--crawl", "nosuch", "-s", f"REDIS_URL={redis_server.url}")
    )
    assert "is not a local address" in failed(monitor(data, "--bind", "0.0.0.0"))
    assert "is not an IP address" in failed(monitor(data, "--bind", "localhost"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        redis_server.client().hset(CrawlKeys("web", 16).meta, "shards", 16)  # a crawl exists
        err = failed(monitor(data, "--port", str(port), "-s", f"REDIS_URL={redis_server.url}"))
    assert f"cannot listen on 127.0.0.1 port {port}" in err


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopped_by_a_signal_it_shuts_its_embedded_redis_down(tmp_path, sig):
    """Ctrl-C, or a service manager's stop (SIGTERM), ends the monitor cleanly, and the
    embedded Redis it started stops with it (a SIGTERM used to leave it running)."""
    data = tmp_path / "data"
    embedded = EmbeddedRedis(data)
    client = embedded.client()
    embedded.join(client)
    client.hset(CrawlKeys("web", 16).meta, "shards", 16)  # a crawl exists
    assert embedded.leave(client)  # the server stopped: the monitor starts it again
    proc = monitor(data, "--port", str(free_port()))
    assert "webcrawl monitor: crawl 'web'" in proc.stdout.readline()
    probe = embedded.client()
    assert probe.ping()  # running, for the monitor
    probe.close()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    deadline = time.monotonic() + 5  # the server's own exit may take a moment (CI saw one)
    while (left_running := _answers(embedded)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left_running:  # not left behind by a failed test either
        with contextlib.suppress(redis.ConnectionError):
            embedded.client().shutdown(nosave=True)
    assert proc.returncode == 0, err
    assert not left_running


def _answers(embedded):
    try:
        return embedded.client().ping()
    except (OSError, redis.ConnectionError):
        return False


TRUST = {
    "http://127.0.0.2:8001": "30 1 240",  # trusted
    "http://127.0.0.3:8002": "0.5 37.5 900",  # distrusted (halved past the window)
    "http://127.0.0.4:8003": "1 1 3",  # unknown: too few tested
}


def monitor_on(redis_server, tmp_path, *args):
    """A monitor of a crawl 'web' that exists in the session's Redis (no worker)."""
    client = redis_server.client()
    client.hset(CrawlKeys("web", 16).meta, "shards", 16)
    port = free_port()
    proc = monitor(
        tmp_path / "data", "--port", str(port), "-s", f"REDIS_URL={redis_server.url}", *args
    )
    assert "webcrawl monitor: crawl 'web'" in proc.stdout.readline()
    return proc, port


def api_status(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10) as r:
        return json.loads(r.read())


def test_the_api_shows_hosts_sitemap_trust_and_says_when_it_cannot_read_it(redis_server, tmp_path):
    client = redis_server.client()
    client.hset(CrawlKeys("web", 16).sitemap_trust, mapping=TRUST)
    proc, port = monitor_on(redis_server, tmp_path, "--interval", "0.2", "--top", "2")
    try:
        answer = api_status(port)
        trust = answer["status"]["sitemap_trust"]
        assert answer["error"] is None
        assert (trust["hosts"], trust["distrusted"], trust["trusted"], trust["unknown"]) == (
            3,
            1,
            1,
            1,
        )
        assert [(h["host"], h["state"]) for h in trust["listed"]] == [
            ("http://127.0.0.3:8002", "distrusted"),
            ("http://127.0.0.2:8001", "trusted"),
        ]
        # a record that cannot be read is an error on the page, not "no trust recorded"
        client.set(CrawlKeys("web", 16).sitemap_trust, "not a hash")
        deadline = time.monotonic() + 10
        while not (answer := api_status(port))["error"]:
            assert time.monotonic() < deadline, "the monitor never said it could not read"
            time.sleep(0.1)
        assert "WRONGTYPE" in answer["error"]
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


@pytest.mark.e2e
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Debian's chromium (apt-get install chromium; CI has it)",
)
def test_the_page_shows_hosts_sitemap_trust(redis_server, tmp_path):
    from playwright.sync_api import sync_playwright

    redis_server.client().hset(CrawlKeys("web", 16).sitemap_trust, mapping=TRUST)
    proc, port = monitor_on(redis_server, tmp_path, "--top", "2")
    errors: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#trust-hosts tbody tr", timeout=30_000)
            summary = page.inner_text("#trust")
            rows = [
                [cell.inner_text() for cell in row.query_selector_all("td")]
                for row in page.query_selector_all("#trust-hosts tbody tr")
            ]
            more = page.inner_text("#trust-more")
            browser.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert errors == []
    assert summary == (
        "Lastmod trust of 3 hosts: 1 distrusted, 1 trusted, 1 unknown "
        "(too few claims tested); distrusted first:"
    )
    assert rows == [
        ["http://127.0.0.3:8002", "distrusted", "900", "0.5", "37.5", "0.04"],
        ["http://127.0.0.2:8001", "trusted", "240", "30", "1", "0.94"],
    ]
    assert more == "and 1 more"
