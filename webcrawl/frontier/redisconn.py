"""One way to reach the crawl's Redis: ``REDIS_URL`` if set, else the embedded one."""

from __future__ import annotations

import logging
import time

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry
from scrapy.settings import BaseSettings

from webcrawl.frontier.embedded_redis import EmbeddedRedis
from webcrawl.settings_check import positive_float

logger = logging.getLogger(__name__)


class RoundTrips:
    """Round trips to Redis made by this process (one send per command or pipeline),
    and when the last one failed (``time.monotonic()``): whatever stalled while Redis
    did not answer, a download timing out included, is not the crawled site's fault."""

    count = 0
    last_error = float("-inf")


class _Counting:
    """Mixed into a redis-py connection class: count every send (one per round trip)
    and note the time of every failed send or read."""

    def send_packed_command(self, command: object, check_health: bool = True) -> None:
        RoundTrips.count += 1
        try:
            super().send_packed_command(command, check_health)  # type: ignore[misc]
        except (redis.ConnectionError, redis.TimeoutError):
            RoundTrips.last_error = time.monotonic()
            raise

    def read_response(self, *args: object, **kwargs: object) -> object:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except (redis.ConnectionError, redis.TimeoutError):
            RoundTrips.last_error = time.monotonic()
            raise


class _CountingConnection(_Counting, redis.Connection):
    pass


class _CountingUnixConnection(_Counting, redis.UnixDomainSocketConnection):
    pass


class CrawlRedis:
    """A Redis client plus what it takes to open and close it.

    Constructing it does no I/O.  :meth:`open` starts or joins the embedded
    server (no-op for ``REDIS_URL``) and checks the connection; :meth:`close`
    leaves it.
    """

    def __init__(
        self, url: str | None, data_dir: str, params: dict | None = None, timeout: float = 10.0
    ) -> None:
        params = dict(params or {})
        # Workers call Redis on the reactor thread: a call to a Redis that stopped
        # answering must fail within ``timeout`` (twice, with one retry on a fresh
        # connection) and let the caller retry later, rather than redis-py's default
        # retries of a 10 s timeout that would freeze every download for ~30 s.
        params.setdefault("retry", Retry(ExponentialWithJitterBackoff(base=0.02, cap=0.05), 1))
        params.setdefault("socket_timeout", timeout)
        params.setdefault("socket_connect_timeout", timeout)
        self.embedded = None if url else EmbeddedRedis(data_dir)
        if self.embedded is not None:
            self.client = self.embedded.client(**params)
            self.description = f"embedded Redis at {self.embedded.socket_path}"
        else:
            self.client = redis.Redis.from_url(url, **params)
            self.description = f"Redis at {_redact(url)}"
        # count round trips (connections are made lazily, so none exists yet); a
        # TLS or custom connection class is left as it is
        pool = self.client.connection_pool
        counting = {redis.Connection: _CountingConnection,
                    redis.UnixDomainSocketConnection: _CountingUnixConnection}  # fmt: skip
        pool.connection_class = counting.get(pool.connection_class, pool.connection_class)

    @classmethod
    def from_settings(cls, settings: BaseSettings, timeout: float | None = None) -> CrawlRedis:
        """The crawl's Redis; calls time out after ``FRONTIER_REDIS_TIMEOUT`` (a worker's
        reactor must not stall) unless ``timeout`` says otherwise (the CLI's commands)."""
        url = settings.get("REDIS_URL") or None
        if url is not None and not isinstance(url, str):
            raise ValueError(f"REDIS_URL must be a redis:// URL string, got {url!r}")
        if url is None and not settings.getbool("WEBCRAWL_EMBEDDED_REDIS"):
            raise ValueError(
                "REDIS_URL is not set and WEBCRAWL_EMBEDDED_REDIS is False: set REDIS_URL "
                "(environment or -s REDIS_URL=redis://host:6379/0) so workers share one Redis"
            )
        if timeout is None:
            timeout = positive_float(settings, "FRONTIER_REDIS_TIMEOUT")
        return cls(url, settings.get("WEBCRAWL_DATA_DIR"), settings.getdict("REDIS_PARAMS"),
                   timeout)  # fmt: skip

    def open(self) -> None:
        if self.embedded is not None:
            self.embedded.join(self.client)
            return
        try:
            self.client.ping()
        except redis.RedisError as exc:
            raise redis.ConnectionError(f"cannot reach {self.description}: {exc}") from exc

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.leave(self.client)
        else:
            self.client.connection_pool.disconnect()


def _redact(url: str) -> str:
    """``url`` without its password, for logs."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"
