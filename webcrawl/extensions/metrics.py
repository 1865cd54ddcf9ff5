"""Serve this worker's Prometheus metrics on ``METRICS_PORT`` (off: 0).

    scrapy crawl web -s METRICS_PORT=9410 ...
    curl http://127.0.0.1:9410/metrics

The metrics are the worker's Scrapy stats, mapped by
:func:`webcrawl.metrics.stats_metrics` when Prometheus scrapes (nothing is
counted twice, and a page costs nothing more), and its CPU and memory
(prometheus-client's process collector).  The server listens on
``METRICS_BIND`` (127.0.0.1; an address that is not loopback needs
``METRICS_PUBLIC``, as ``webcrawl monitor --public``) and answers only
``Host`` headers naming its address, ``localhost``, or a name of
``METRICS_ALLOWED_HOSTS`` (the one Prometheus scrapes it by); another worker on the machine
already on the port moves this one up, within ``METRICS_PORT_RANGE``
ports, and the log says where it went.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import threading
from typing import Any
from wsgiref.simple_server import make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler  # its own server's
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from webcrawl.metrics import http_url, stats_metrics
from webcrawl.monitor.server import HostCheck
from webcrawl.settings_check import non_negative_int, positive_int

logger = logging.getLogger(__name__)


class _Stats:
    """The collector: the last snapshot of the stats (taken on the reactor's thread; the
    server answers on its own)."""

    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = {}

    def collect(self) -> Any:
        return stats_metrics(self.snapshot)


class MetricsExporter:
    def __init__(
        self, crawler: Crawler, port: int, bind: str, ports: int, names: list[str] = ()
    ) -> None:
        self.stats = crawler.stats
        self.collector = _Stats()
        registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)
        registry.register(self.collector)
        self.server, self.port = serve(registry, bind, port, ports, names)
        self.url = http_url(bind, self.port, "/metrics")
        moved = f" (port {port} was taken)" if self.port != port else ""
        logger.info("Serving Prometheus metrics on %s%s", self.url, moved)
        self._refresh = task.LoopingCall(self.refresh)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> MetricsExporter:
        settings = crawler.settings
        port = non_negative_int(settings, "METRICS_PORT")
        if not port:
            raise NotConfigured
        bind = str(settings.get("METRICS_BIND") or "")
        try:
            ipaddress.ip_address(bind)
        except ValueError:
            raise ValueError(
                f"METRICS_BIND must be an IP address to listen on "
                f"(127.0.0.1, 0.0.0.0, ::1), got {bind!r}"
            ) from None
        if not ipaddress.ip_address(bind).is_loopback and not settings.getbool("METRICS_PUBLIC"):
            raise ValueError(
                f"METRICS_BIND {bind} is not a local address: anyone who reaches it "
                "reads this worker's stats; set METRICS_PUBLIC=True if that is meant"
            )
        ports = positive_int(settings, "METRICS_PORT_RANGE")
        names = settings.getlist("METRICS_ALLOWED_HOSTS")
        exporter = cls(crawler, port, bind, ports, names)
        crawler.signals.connect(exporter.opened, signal=signals.spider_opened)
        crawler.signals.connect(exporter.closed, signal=signals.engine_stopped)
        return exporter

    def refresh(self) -> None:
        self.collector.snapshot = dict(self.stats.get_stats())

    def opened(self, spider: Any) -> None:
        self._refresh.start(1.0, now=True)

    def closed(self) -> None:
        if self._refresh.running:
            self._refresh.stop()
        self.server.shutdown()
        self.server.server_close()


def _start(registry: CollectorRegistry, bind: str, port: int, names: list[str]) -> Any:
    """prometheus-client's server (as its ``start_http_server``) answering only the Host
    headers that name it (or ``names``), as ``webcrawl monitor`` does (:class:`HostCheck`:
    a web page in the operator's browser cannot rebind its name to it and read the
    stats)."""
    hosts, metrics = HostCheck(bind, names), make_wsgi_app(registry)

    def app(environ: dict, start_response: Any) -> Any:
        if not hosts.allows(environ.get("HTTP_HOST")):
            start_response("421 Misdirected Request", [("Content-Type", "text/plain")])
            return [b"misdirected request: unknown Host\n"]
        return metrics(environ, start_response)

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in bind else socket.AF_INET

    server = make_server(bind, port, app, Server, handler_class=_SilentHandler)
    threading.Thread(target=server.serve_forever, name="webcrawl-metrics", daemon=True).start()
    return server


def serve(
    registry: CollectorRegistry, bind: str, port: int, ports: int, names: list[str] = ()
) -> tuple[Any, int]:
    """Start the metrics server on the first free port of ``port`` .. ``port + ports - 1``."""
    last = port + ports - 1
    for candidate in range(port, min(last, 65535) + 1):
        try:
            server = _start(registry, bind, candidate, list(names))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise ValueError(f"METRICS_BIND {bind}: cannot listen there ({exc})") from None
            continue
        return server, candidate
    raise ValueError(
        f"METRICS_PORT: ports {port} to {last} are all in use (raise "
        "METRICS_PORT_RANGE, or choose another port)"
    )
