"""``webcrawl monitor``: the crawl's state on a web page that updates itself.

    webcrawl monitor                      # http://127.0.0.1:8410/
    webcrawl monitor --crawl demo -s WEBCRAWL_DATA_DIR=demo-data --port 9000

One thread samples the crawl every ``--interval`` seconds (what
``webcrawl status --json`` shows: Redis and the store, one round trip per
Redis node, and the sitemap trust records a thousand hosts at a time) and keeps
the last ten minutes; the page (HTML, CSS and JavaScript served from this package:
no build step, nothing fetched from elsewhere) asks for the latest sample every
second.  ``/metrics`` exports the crawl-wide figures for Prometheus, once for the
whole crawl: queued per shard, leased, seen, stored, failed, dead paths, workers
alive, revisits, and the expected freshness of the stored pages.

A web page open in the operator's browser can point a name of its own at
127.0.0.1 (DNS rebinding) and read the page's API as same-origin: so only
requests whose ``Host`` names the bind address (any IP address when bound to all
of them: rebinding needs a name), ``localhost``, or a name
given with ``--allowed-host`` are answered; others get 421.  Every answer says
``nosniff`` and a Content-Security-Policy that allows only the page's own script,
style and API.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from webcrawl.incremental.freshness import freshness, page_rates

logger = logging.getLogger(__name__)

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "monitor.js": "text/javascript",
    "monitor.css": "text/css",
}
HISTORY = 300  # samples kept (ten minutes at the default interval)
FRESHNESS_ROWS = 20_000  # stored pages read for the freshness estimate, at most
FRESHNESS_EVERY = 15.0  # seconds between two freshness estimates


class Sampler:
    """The latest status of the crawl, and (time, stored, fetched) of recent samples."""

    def __init__(self, collect: Any, rows: Any, params: Any, interval: float) -> None:
        self.collect, self.rows, self.params, self.interval = collect, rows, params, interval
        self.latest: dict[str, Any] = {}
        self.history: deque[tuple[float, int, int]] = deque(maxlen=HISTORY)
        self.fresh: dict[str, Any] = {}
        self._fresh_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def sample(self) -> None:
        try:
            status = self.collect()
            # at most every FRESHNESS_EVERY seconds, once there is an estimate to show
            if not self.fresh.get("pages") or time.monotonic() - self._fresh_at > FRESHNESS_EVERY:
                f = freshness(
                    page_rates(self.rows(FRESHNESS_ROWS), status["now"], self.params), status["now"]
                )
                self.fresh = {
                    "pages": f.pages,
                    "fresh_share": f.fresh_share,
                    "missed_per_hour": f.missed_per_hour,
                    "changes_per_hour": f.changes_per_hour,
                }
                self._fresh_at = time.monotonic()
            status["freshness"] = self.fresh
            fetched = sum(w.get("pages", 0) for w in status["workers"])
            self.history.append((status["now"], status["stored"], fetched))
            status["history"] = list(self.history)
            self.latest, self.error = status, None
        except Exception as exc:  # Redis or the store away: say so on the page, go on
            self.error = f"{type(exc).__name__}: {exc}"
            logger.warning("Could not read the crawl's state: %s", self.error)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        """Sample now, then every ``interval`` seconds on a thread of its own."""
        self.sample()
        self._thread = threading.Thread(target=self._run, name="webcrawl-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling, and wait for a sample under way: the connection it holds would
        keep the embedded Redis running once the monitor leaves it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class _CrawlMetrics:
    """Crawl-wide figures of the latest sample, for Prometheus."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    def collect(self) -> Any:
        s = self.sampler.latest
        if not s:
            return
        labels = ["crawl"]
        crawl = [s["crawl"]]
        queued = GaugeMetricFamily(
            "webcrawl_crawl_queued",
            "Requests queued, per frontier shard",
            labels=["crawl", "shard"],
        )
        for shard, n in enumerate(s["queued_per_shard"]):
            queued.add_metric([s["crawl"], str(shard)], n)
        yield queued
        for name, text, value in [
            (
                "webcrawl_crawl_queued_in_store",
                "Requests queued in the store's cold tier",
                s["queued_in_store"],
            ),
            ("webcrawl_crawl_leased", "Requests handed to workers and not finished", s["leased"]),
            ("webcrawl_crawl_seen", "URLs the crawl has seen", s["seen"]),
            ("webcrawl_crawl_stored_pages", "Pages in the store", s["stored"]),
            ("webcrawl_crawl_failed", "Requests that failed for good", s["failed"]),
            (
                "webcrawl_crawl_dead_paths",
                "Paths the failed-path filter holds dead",
                len(s["dead_paths"]),
            ),
            ("webcrawl_crawl_workers_alive", "Workers with a live heartbeat", len(s["workers"])),
            ("webcrawl_crawl_revisits_scheduled", "Revisits scheduled", s["revisits_scheduled"]),
            ("webcrawl_crawl_revisits_due", "Revisits due now", s["revisit_due"]),
        ]:
            family = GaugeMetricFamily(name, text, labels=labels)
            family.add_metric(crawl, value)
            yield family
        fresh = s.get("freshness") or {}
        if fresh.get("pages"):
            for name, text, key in [
                (
                    "webcrawl_crawl_fresh_share",
                    "Expected share of stored pages still as "
                    "stored (from the revisit model's change rates)",
                    "fresh_share",
                ),
                (
                    "webcrawl_crawl_missed_changes_per_hour",
                    "Expected page changes per hour that no visit will see",
                    "missed_per_hour",
                ),
            ]:
                family = GaugeMetricFamily(name, text, labels=labels)
                family.add_metric(crawl, fresh[key])
                yield family


# what each answer says: no sniffing, no framing, nothing but the page's own files
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class HostCheck:
    """Which ``Host`` headers a server bound to ``bind`` answers (see the module)."""

    def __init__(self, bind: str, names: list[str] = ()) -> None:
        self.bind = ipaddress.ip_address(bind)
        # localhost: no page of another origin can make a browser send it
        self.names = {n.strip().lower().rstrip(".") for n in names if n.strip()} | {"localhost"}

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        host = header.strip().lower()
        if host.startswith("["):  # [::1]:8410
            host = host[1 : host.find("]")] if "]" in host else host
        elif host.count(":") == 1:
            host = host.partition(":")[0]
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host.rstrip(".") in self.names
        return address == self.bind or self.bind.is_unspecified


def handler(
    sampler: Sampler, registry: CollectorRegistry, hosts: HostCheck
) -> type[BaseHTTPRequestHandler]:
    static = resources.files("webcrawl.monitor") / "static"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not hosts.allows(self.headers.get("Host")):
                self._send(421, "text/plain", b"misdirected request: unknown Host\n")
                return
            path = self.path.split("?", 1)[0]
            if path == "/":
                path = "/static/index.html"
            if path == "/api/status":
                body = json.dumps({"status": sampler.latest, "error": sampler.error}).encode()
                self._send(200, "application/json", body)
            elif path == "/metrics":
                self._send(200, "text/plain; version=0.0.4", generate_latest(registry))
            elif path.startswith("/static/") and path[8:] in STATIC:
                self._send(200, STATIC[path[8:]], (static / path[8:]).read_bytes())
            else:
                self._send(404, "text/plain", b"not found\n")

        def _send(self, code: int, content_type: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s %s", self.address_string(), format % args)

    return Handler


def check_bind(bind: str, public: bool) -> None:
    """A bind address must be an IP address, and a loopback one unless ``public``."""
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        raise SystemExit(
            f"webcrawl monitor: --bind {bind!r} is not an IP address (127.0.0.1, ::1, 0.0.0.0)"
        ) from None
    if not address.is_loopback and not public:
        raise SystemExit(
            f"webcrawl monitor: --bind {bind} is not a local address: anyone "
            "who reaches it sees the crawl's state; add --public if that is "
            "meant"
        )


def serve(sampler: Sampler, bind: str, port: int, names: list[str] = ()) -> ThreadingHTTPServer:
    """The page's server on ``bind``, answering the Host names :class:`HostCheck` allows
    (``names``: more, from ``--allowed-host``)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_CrawlMetrics(sampler))
    try:
        answer = handler(sampler, registry, HostCheck(bind, names))
        server = ThreadingHTTPServer((bind, port), answer)
    except OSError as exc:
        raise SystemExit(
            f"webcrawl monitor: cannot listen on {bind} port {port} ({exc.strerror}"
            "): choose another with --port"
        ) from None
    server.daemon_threads = True
    return server
