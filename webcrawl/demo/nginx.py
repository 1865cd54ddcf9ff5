"""The demo web as static files behind nginx, for benchmarks that need a fast server.

The Twisted demo server answers about 200 pages/s on one core, which is no
faster than one Scrapy worker: on a small machine it, not the crawler, caps
a multi-worker benchmark.  nginx serves the same pages (same URLs, bodies,
content types, redirects and 404s; ETag and Last-Modified are nginx's own)
for a few percent of a core.  Faults, latency and the request log are the
Twisted server's job; this one only serves.

nginx is not a Python dependency: ``apt-get install nginx-light`` (Debian).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from webcrawl.demo.web import DemoWeb


def nginx_binary() -> str | None:
    """Path of the nginx binary (PATH, then /usr/sbin), or None."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


def export(web: DemoWeb, root: Path) -> dict[str, dict[str, str]]:
    """Write every page under ``root/<netloc>/``; return each host's redirects (path -> URL)."""
    redirects: dict[str, dict[str, str]] = {}
    for url, page in web.pages.items():
        parts = urlsplit(url)
        if page.kind == "redirect":
            redirects.setdefault(parts.netloc, {})[parts.path] = str(page.redirect_to)
            continue
        path = root / parts.netloc / parts.path.lstrip("/")
        if parts.path.endswith("/"):
            path = path / "index.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(web.render(page)[0])
    return redirects


def _config(root: Path, sites: dict[str, Path], redirects: dict[str, dict[str, str]]) -> str:
    """nginx.conf serving each netloc of ``sites`` from its directory (``root``: nginx's files)."""
    servers = []
    for netloc, docroot in sites.items():
        moves = "".join(
            f"    location = {path} {{ return 301 {target}; }}\n"
            for path, target in sorted(redirects.get(netloc, {}).items())
        )
        servers.append(
            f"  server {{\n    listen {netloc};\n    root {docroot};\n"
            f"    index index.html;\n{moves}  }}\n"
        )
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read our temp dir
    types = (
        "text/html html htm; text/plain txt; application/pdf pdf; application/json json; "
        "text/css css; application/javascript js; image/png png; image/svg+xml svg;"
    )
    return (
        f"{user}worker_processes 1;\npid {root / 'nginx.pid'};\n"
        f"error_log {root / 'error.log'} warn;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        f"  types {{ {types} }}\n  charset utf-8;\n  charset_types text/html text/plain;\n"
        "  access_log off;\n  keepalive_requests 100000;\n"
        f"  client_body_temp_path {root / 'tmp'};\n  proxy_temp_path {root / 'tmp'};\n"
        f"  fastcgi_temp_path {root / 'tmp'};\n  uwsgi_temp_path {root / 'tmp'};\n"
        f"  scgi_temp_path {root / 'tmp'};\n" + "".join(servers) + "}\n"
    )


def _free_port(hosts: int) -> int:
    """A port free on 127.0.0.2 .. 127.0.0.(hosts+1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
            port = s.getsockname()[1]
        try:
            for i in range(1, hosts):
                with socket.socket() as s:
                    s.bind((f"127.0.0.{2 + i}", port))
            return port
        except OSError:
            continue
    raise RuntimeError("could not find a port free on all demo hosts")


@contextmanager
def nginx_demo_server(hosts: int, pages: int | list[int], seed: int = 0) -> Iterator[dict]:
    """Serve the demo web (``hosts`` seed hosts + one out of scope) with nginx.

    Yields the same address info as :func:`webcrawl.demo.demo_server`.
    """
    port = _free_port(hosts + 1)
    netlocs = [f"127.0.0.{2 + i}:{port}" for i in range(hosts + 1)]
    web = DemoWeb(netlocs, pages, seed)
    with _nginx() as (root, start):
        redirects = export(web, root)
        start({netloc: root / netloc for netloc in netlocs}, redirects)
        yield {
            "hosts": netlocs,
            "seeds": web.seeds(),
            "pages": len(web.pages),
            "seed": seed,
            "pages_per_host": web.sizes,
            "server": "nginx",
        }


@contextmanager
def nginx_site_server(sites: Path | list[Path], hosts: int = 1) -> Iterator[dict]:
    """Serve the static site in each directory of ``sites`` (real ones: documentation,
    say) on ``hosts`` mirrors each, 127.0.0.2, 127.0.0.3, ..., one port.

    Yields hosts, seeds (each mirror's ``/``), pages (HTML files times mirrors)
    and server, like :func:`nginx_demo_server`.
    """
    sites = [sites] if isinstance(sites, Path) else sites
    roots = [Path(os.path.realpath(site)) for site in sites]
    for site, root in zip(sites, roots, strict=True):
        if not (root / "index.html").is_file():
            raise RuntimeError(f"{site} has no index.html: not a static site to crawl")
    html = [sum(1 for p in root.rglob("*") if p.suffix in (".html", ".htm")) for root in roots]
    port = _free_port(hosts * len(roots))
    served = {f"127.0.0.{2 + i}:{port}": roots[i // hosts] for i in range(hosts * len(roots))}
    with _nginx() as (_root, start):
        start(served, {})
        yield {
            "hosts": list(served),
            "seeds": [f"http://{n}/" for n in served],
            "pages": sum(html) * hosts,
            "server": "nginx",
            "site": ", ".join(str(s) for s in sites),
        }


@contextmanager
def _nginx() -> Iterator[tuple[Path, Any]]:
    """A scratch directory and a ``start(sites, redirects)`` that runs nginx over it."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed (apt-get install nginx-light)")
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="webcrawl-nginx-")))
    procs: list[subprocess.Popen] = []

    def start(sites: dict[str, Path], redirects: dict[str, dict[str, str]]) -> None:
        (root / "tmp").mkdir()
        config = root / "nginx.conf"
        config.write_text(_config(root, sites, redirects))
        proc = subprocess.Popen(
            [binary, "-p", str(root), "-c", str(config), "-g", "daemon off;"],
            stderr=subprocess.PIPE,
        )
        procs.append(proc)
        _wait_listening(next(iter(sites)), proc)

    try:
        yield root, start
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def _wait_listening(netloc: str, proc: subprocess.Popen) -> None:
    host, _, port = netloc.rpartition(":")
    for _ in range(250):
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"nginx failed to start (exit {proc.returncode}): {err}")
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nginx did not start listening within 5 s")
