"""One way to reach the crawl's Redis: ``REDIS_URL`` if set, else the embedded one."""

from __future__ import annotations

import logging

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry
from scrapy.settings import BaseSettings

from webcrawl.embedded_redis import EmbeddedRedis

logger = logging.getLogger(__name__)


class RoundTrips:
    """Round trips to Redis made by this process (one send per command or pipeline)."""

    count = 0


class _Counting:
    """Mixed into a redis-py connection class: count every send (one per round trip)."""

    def send_packed_command(self, command: object, check_health: bool = True) -> None:
        RoundTrips.count += 1
        super().send_packed_command(command, check_health)  # type: ignore[misc]


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

    def __init__(self, url: str | None, data_dir: str, params: dict | None = None) -> None:
        params = dict(params or {})
        # Commands run on the reactor thread: fail within a second and let the
        # caller retry later, rather than redis-py's default of up to ~7 s of
        # back-off that would freeze every download.
        params.setdefault("retry", Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 2))
        params.setdefault("socket_timeout", 10)
        self.embedded = None if url else EmbeddedRedis(data_dir)
        if self.embedded is not None:
            self.client = self.embedded.client(**params)
            self.description = f"embedded Redis at {self.embedded.socket_path}"
        else:
            params.setdefault("socket_connect_timeout", 5)
            self.client = redis.Redis.from_url(url, **params)
            self.description = f"Redis at {_redact(url)}"
        # count round trips (connections are made lazily, so none exists yet); a
        # TLS or custom connection class is left as it is
        pool = self.client.connection_pool
        counting = {redis.Connection: _CountingConnection,
                    redis.UnixDomainSocketConnection: _CountingUnixConnection}  # fmt: skip
        pool.connection_class = counting.get(pool.connection_class, pool.connection_class)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> CrawlRedis:
        url = settings.get("REDIS_URL") or None
        if url is not None and not isinstance(url, str):
            raise ValueError(f"REDIS_URL must be a redis:// URL string, got {url!r}")
        if url is None and not settings.getbool("WEBCRAWL_EMBEDDED_REDIS"):
            raise ValueError(
                "REDIS_URL is not set and WEBCRAWL_EMBEDDED_REDIS is False: set REDIS_URL "
                "(environment or -s REDIS_URL=redis://host:6379/0) so workers share one Redis"
            )
        return cls(url, settings.get("WEBCRAWL_DATA_DIR"), settings.getdict("REDIS_PARAMS"))

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
