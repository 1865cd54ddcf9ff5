"""One way to reach the crawl's Redis: ``REDIS_URL`` if set, else the embedded one.

``REDIS_URL`` may name one Redis (``redis://``, ``rediss://``, ``unix://``) or a
Redis Cluster (``redis+cluster://host:port[,host:port...]``, or
``rediss+cluster://`` with TLS): every worker then uses redis-py's cluster
client, which finds every node from any one of them.
"""

from __future__ import annotations

import logging
import time

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import ClusterNode, ClusterPipeline
from redis.exceptions import RedisClusterException
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


CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


class ClusterUnavailable(redis.ConnectionError):
    """No node of the Redis Cluster could answer (it is failing over, or down)."""


def _unavailable(exc: RedisClusterException) -> ClusterUnavailable:
    return ClusterUnavailable(f"Redis Cluster unavailable: {exc}")


class _Pipeline(ClusterPipeline):
    def execute(self, raise_on_error: bool = True) -> list:
        try:
            return super().execute(raise_on_error)
        except RedisClusterException as exc:
            raise _unavailable(exc) from exc


class CrawlCluster(redis.RedisCluster):
    """redis-py's cluster client whose "no node reachable" errors are Redis errors.

    redis-py raises ``RedisClusterException``, which is not a ``RedisError``, when
    it cannot read the slot map (every node it asked is down or refuses while a
    failover runs, ~0.5 s with Redis 6.2).  Every caller of ours treats a
    ``RedisError`` as an outage to wait out; this one would escape them and stop
    the crawl's loops.  ``tests/test_redis_cluster.py`` kills a master mid-crawl.
    """

    def execute_command(self, *args: object, **kwargs: object) -> object:
        try:
            return super().execute_command(*args, **kwargs)
        except RedisClusterException as exc:
            raise _unavailable(exc) from exc

    def pipeline(self, transaction: object = None, shard_hint: object = None) -> ClusterPipeline:
        pipe = super().pipeline(transaction, shard_hint)
        pipe.__class__ = _Pipeline  # the same object, with execute() converting errors
        return pipe


class RedisSetupError(redis.ConnectionError):
    """``REDIS_URL`` names something workers cannot use as it says (a cluster that is
    not one, a cluster node addressed as a single Redis)."""


def cluster_nodes(url: str) -> tuple[str, list[tuple[str, int]]]:
    """A ``redis+cluster://`` URL as the ``redis://`` URL of its first node (with the
    credentials and options) and every node named, ``(host, port)``."""
    scheme, _, rest = url.partition("://")
    auth, at, hosts_part = rest.rpartition("@")
    netloc, sep, tail = hosts_part.partition("/")
    if not sep:
        netloc, qsep, query = hosts_part.partition("?")
        tail = f"?{query}" if qsep else ""
    else:
        tail = "/" + tail
    nodes = []
    for item in netloc.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not port.isdigit() or not host:
            raise ValueError(
                f"REDIS_URL: {_redact(url)}: expected host:port[,host:port...], "
                f"got {item.strip()!r}"
            )
        nodes.append((host.strip("[]"), int(port)))
    first = f"{scheme.replace('+cluster', '')}://{auth}{at}{nodes[0][0]}:{nodes[0][1]}{tail}"
    return first, nodes


class CrawlRedis:
    """A Redis client plus what it takes to open and close it.

    Constructing it does no I/O.  :meth:`open` starts or joins the embedded
    server (no-op for ``REDIS_URL``), connects to a cluster, and checks that
    the URL's kind matches the server's; :meth:`close` leaves it.  A cluster's
    client exists only after :meth:`open` (redis-py's finds the nodes when made).
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
        self.url = url
        self.params = params
        self.cluster = bool(url) and url.partition("://")[0].lower() in CLUSTER_SCHEMES
        self.embedded = None if url else EmbeddedRedis(data_dir)
        self.client: redis.Redis | redis.RedisCluster | None = None
        if self.cluster:
            cluster_nodes(url)  # a malformed URL fails here, before any I/O
            self.description = f"Redis Cluster at {_redact(url)}"
            return
        if self.embedded is not None:
            self.client = self.embedded.client(**params)
            self.description = f"embedded Redis at {self.embedded.socket_path}"
        else:
            self.client = redis.Redis.from_url(url, **params)
            self.description = f"Redis at {_redact(url)}"
        # count round trips (connections are made lazily, so none exists yet); a
        # TLS or custom connection class is left as it is
        assert self.client is not None
        pool = self.client.connection_pool
        counting = {
            redis.Connection: _CountingConnection,
            redis.UnixDomainSocketConnection: _CountingUnixConnection,
        }
        pool.connection_class = counting.get(pool.connection_class, pool.connection_class)

    @classmethod
    def from_settings(cls, settings: BaseSettings, timeout: float | None = None) -> CrawlRedis:
        """The crawl's Redis; calls time out after ``FRONTIER_REDIS_TIMEOUT`` (a worker's
        reactor must not stall) unless ``timeout`` says otherwise (the CLI's commands)."""
        url = settings.get("REDIS_URL") or None
        if url is not None and not isinstance(url, str):
            raise ValueError(f"REDIS_URL must be a redis:// URL string, got {url!r}")
        if url is None and not settings.getbool("REDIS_EMBEDDED"):
            raise ValueError(
                "REDIS_URL is not set and REDIS_EMBEDDED is False: set REDIS_URL "
                "(environment or -s REDIS_URL=redis://host:6379/0) so workers share one Redis"
            )
        if timeout is None:
            timeout = positive_float(settings, "FRONTIER_REDIS_TIMEOUT")
        return cls(
            url, settings.get("WEBCRAWL_DATA_DIR"), settings.getdict("REDIS_PARAMS"), timeout
        )

    def open(self) -> None:
        if self.embedded is not None:
            self.embedded.join(self.client)
            return
        if self.cluster:
            self.client = self._open_cluster()
            return
        try:
            self.client.ping()
            enabled = self.client.info("cluster").get("cluster_enabled")
        except redis.RedisError as exc:
            raise redis.ConnectionError(f"cannot reach {self.description}: {exc}") from exc
        if enabled in (1, "1"):
            raise RedisSetupError(
                f"REDIS_URL {_redact(self.url)} is a node of a Redis Cluster: it serves only "
                f"its own slots; use redis+cluster://{_redact(self.url).partition('://')[2]} "
                "so that workers reach every shard"
            )

    def _open_cluster(self) -> CrawlCluster:
        first, nodes = cluster_nodes(self.url)
        params = dict(self.params)
        # the cluster client retries on its own level; its nodes' connections may not
        retry = params.pop("retry")
        params.setdefault("connection_class", _CountingConnection)
        if first.startswith("rediss:"):
            params.pop("connection_class")
        try:
            client = CrawlCluster(
                url=first,
                startup_nodes=[ClusterNode(h, p) for h, p in nodes[1:]],
                retry=retry,
                **params,
            )
            client.ping()
        except RedisClusterException as exc:
            if "not enabled" in str(exc):
                raise RedisSetupError(
                    f"REDIS_URL {_redact(self.url)} names a Redis Cluster, but the server "
                    "there is a single Redis (cluster_enabled:0): use redis://"
                    f"{_redact(self.url).partition('://')[2].split(',')[0]}"
                ) from None
            raise redis.ConnectionError(f"cannot reach {self.description}: {exc}") from exc
        except redis.RedisError as exc:
            raise redis.ConnectionError(f"cannot reach {self.description}: {exc}") from exc
        return client

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.leave(self.client)
        elif self.cluster:
            if self.client is not None:
                self.client.close()
        else:
            self.client.connection_pool.disconnect()


def _redact(url: str) -> str:
    """``url`` without its password, for logs."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rpartition('@')[2]}"
