"""A standalone HBase on this machine: HMaster (with its embedded ZooKeeper and a
RegionServer) and HBase's Thrift1 gateway, from jars that Maven resolves.

Everything lives under one *home* directory::

    <home>/conf/hbase-site.xml   local mode, data under <home>/data, web UIs off
    <home>/data/                 hbase.rootdir, ZooKeeper's and HBase's tmp dirs
    <home>/logs/<process>.log    master.log, thrift.log (stdout and stderr of each JVM)
    <home>/state.json            ports, transports and process ids of what runs

The jars come from ``pom.xml`` next to this module (``mvn dependency:build-classpath``);
the classpath is cached per pom in ``~/.cache/webcrawl`` and re-resolved when a jar is
gone.  ``bin/hbase`` is ours to play: the JVM flags JDK 17 needs are in ``JVM_FLAGS``.

Every socket is bound to 127.0.0.1.  A gateway is ready when ``tables()`` answers
through it, not when its port opens (it opens before HBase can serve).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
MASTER = "org.apache.hadoop.hbase.master.HMaster"
THRIFT = "org.apache.hadoop.hbase.thrift.ThriftServer"
# bin/hbase's add_jdk11_jvm_flags (HBase 2.6), and IPv4 as bin/hbase always asks
JVM_FLAGS = (
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules",
    "jdk.unsupported",
    *[
        f"--add-opens=java.base/{p}=ALL-UNNAMED"
        for p in (
            "java.io",
            "java.nio",
            "sun.nio.ch",
            "java.lang",
            "jdk.internal.ref",
            "java.lang.reflect",
            "java.util",
            "java.util.concurrent",
        )
    ],
    *[
        f"--add-exports={m}=ALL-UNNAMED"
        for m in (
            "java.base/jdk.internal.misc",
            "java.security.jgss/sun.security.krb5",
            "java.base/sun.net.dns",
            "java.base/sun.net.util",
        )
    ],
    "-Djava.net.preferIPv4Stack=true",
    "-XX:+UseG1GC",
)
# the JVMs this process started, by pid: polled (so reaped) rather than left to be
# garbage-collected while they run (a ResourceWarning); `webcrawl hbase start` exits
# and leaves them running, which is the point
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
MASTER_HEAP = "1g"
THRIFT_HEAP = "256m"


class LocalHBaseError(RuntimeError):
    """The local HBase could not be set up, started or reached (the message says why)."""


@dataclass
class Gateway:
    """One Thrift1 server: where it listens and how it speaks."""

    port: int
    transport: str = "buffered"
    protocol: str = "binary"
    read_timeout: float | None = None  # seconds an idle client socket is kept (HBase: 60)
    pid: int | None = None

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``happybase.Connection``/``ConnectionPool``."""
        return {
            "host": HOST,
            "port": self.port,
            "transport": self.transport,
            "protocol": self.protocol,
        }

    def store_url(self, table_prefix: str | None = "crawl") -> str:
        query = [f"table_prefix={table_prefix}"] if table_prefix else []
        if (self.transport, self.protocol) != ("buffered", "binary"):
            query += [f"transport={self.transport}", f"protocol={self.protocol}"]
        return f"hbase://{HOST}:{self.port}" + ("?" + "&".join(query) if query else "")


@dataclass
class State:
    zookeeper_port: int = 0
    master_pid: int | None = None
    gateways: dict[str, Gateway] = field(default_factory=dict)


# -- the jars -----------------------------------------------------------------------


def pom_path() -> Path:
    return Path(str(resources.files("webcrawl.localhbase").joinpath("pom.xml")))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "webcrawl"


def classpath(mvn: str | None = None, quiet: bool = True) -> str:
    """The jars of HBase's Thrift server and its dependencies, resolved by Maven."""
    pom = pom_path()
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    cached = cache_dir() / f"hbase-classpath-{digest}.txt"
    if cached.exists():
        jars = cached.read_text().strip()
        if jars and all(Path(j).exists() for j in jars.split(os.pathsep)):
            return jars
    mvn = mvn or shutil.which("mvn")
    if not mvn:
        raise LocalHBaseError(
            "Maven (mvn) is not installed; it resolves HBase's jars from "
            "Maven Central (Debian: apt-get install maven)"
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    command = [
        mvn,
        "-B",
        *(["-q"] if quiet else []),
        "-f",
        str(pom),
        "dependency:build-classpath",
        f"-Dmdep.outputFile={tmp}",
    ]
    logger.info("Resolving HBase's jars with Maven (the first time downloads ~130 MB)")
    done = subprocess.run(command, capture_output=quiet, text=True, check=False)
    if done.returncode != 0 or not tmp.exists():
        tail = "\n".join(((done.stdout or "") + (done.stderr or "")).splitlines()[-15:])
        raise LocalHBaseError(f"{' '.join(command)} failed (exit {done.returncode}):\n{tail}")
    tmp.replace(cached)
    return cached.read_text().strip()


def java_command() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise LocalHBaseError(
            "Java is not installed (HBase 2.6 runs on JDK 11 or 17; "
            "Debian: apt-get install openjdk-17-jre-headless)"
        )
    return java


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def _running(pid: int | None) -> bool:
    if not pid:
        return False
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# -- the processes ----------------------------------------------------------------------


class LocalHBase:
    """A standalone HBase whose files are all under ``home``."""

    def __init__(self, home: str | Path) -> None:
        self.home = Path(home).resolve()
        self.conf = self.home / "conf"
        self.data = self.home / "data"
        self.logs = self.home / "logs"
        self._state_file = self.home / "state.json"

    # state ---------------------------------------------------------------------------

    def state(self) -> State:
        try:
            raw = json.loads(self._state_file.read_text())
        except (OSError, ValueError):
            return State()
        gateways = {name: Gateway(**g) for name, g in raw.get("gateways", {}).items()}
        return State(raw.get("zookeeper_port", 0), raw.get("master_pid"), gateways)

    def _save(self, state: State) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(self._state_file)

    def _ours(self, pid: int | None) -> bool:
        """Whether ``pid`` is a live JVM this home started (a stale pid is someone else)."""
        if not pid:
            return False
        child = _CHILDREN.get(pid)
        if child is not None:  # started by this process: its exit status says
            if child.poll() is None:
                return True
            del _CHILDREN[pid]
            return False
        try:  # started by another process (`webcrawl hbase start`): ask /proc
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return status != "Z" and f"-Dwebcrawl.hbase.home={self.home}".encode() in cmdline

    def gateway(self, name: str = "thrift") -> Gateway:
        gateway = self.state().gateways.get(name)
        if gateway is None:
            raise LocalHBaseError(f"no Thrift gateway {name!r} was started in {self.home}")
        return gateway

    # start ---------------------------------------------------------------------------

    def _write_conf(self, zookeeper_port: int) -> None:
        self.conf.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        site = {
            "hbase.cluster.distributed": "false",
            "hbase.rootdir": (self.data / "hbase").as_uri(),
            "hbase.tmp.dir": str(self.data / "tmp"),
            "hbase.zookeeper.property.dataDir": str(self.data / "zookeeper"),
            "hbase.zookeeper.quorum": HOST,
            "hbase.zookeeper.property.clientPort": str(zookeeper_port),
            # the WAL refuses a filesystem without hflush/hsync otherwise (local mode)
            "hbase.unsafe.stream.capability.enforce": "false",
            "hbase.master.info.port": "-1",
            "hbase.regionserver.info.port": "-1",
            "hbase.thrift.info.port": "-1",
            # one name for master and RegionServer ("Master passed us a different hostname")
            "hbase.master.hostname": HOST,
            "hbase.unsafe.regionserver.hostname": HOST,
            "hbase.master.ipc.address": HOST,
            "hbase.regionserver.ipc.address": HOST,
            "hbase.master.port": "0",
            "hbase.regionserver.port": "0",
        }
        props = "".join(
            f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
            for k, v in site.items()
        )
        (self.conf / "hbase-site.xml").write_text(
            f'<?xml version="1.0"?>\n<!-- written by webcrawl hbase start -->\n'
            f"<configuration>\n{props}</configuration>\n"
        )
        log4j = resources.files("webcrawl.localhbase").joinpath("log4j2.properties")
        (self.conf / "log4j2.properties").write_text(log4j.read_text())

    def _spawn(self, name: str, heap: str, main: str, args: list[str]) -> int:
        jars = classpath()
        command = [
            java_command(),
            f"-Xmx{heap}",
            *JVM_FLAGS,
            f"-Dwebcrawl.hbase.home={self.home}",
            f"-Dlog4j2.configurationFile={(self.conf / 'log4j2.properties').as_uri()}",
            f"-Dhbase.log.dir={self.logs}",
            f"-Djava.io.tmpdir={self.data / 'tmp'}",
            "-cp",
            f"{self.conf}{os.pathsep}{jars}",
            main,
            *args,
        ]
        (self.data / "tmp").mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} start {name}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _CHILDREN[proc.pid] = proc
        return proc.pid

    def start_master(self) -> int:
        """HMaster in local mode (ZooKeeper, master and RegionServer in one JVM)."""
        state = self.state()
        if self._ours(state.master_pid):
            return state.master_pid  # type: ignore[return-value]
        # ZooKeeper's port: the same one again (the gateways know it), unless taken
        if not state.zookeeper_port or port_open(state.zookeeper_port):
            state.zookeeper_port = free_port()
        self._write_conf(state.zookeeper_port)
        state.master_pid = self._spawn("master", MASTER_HEAP, MASTER, ["start"])
        self._save(state)
        return state.master_pid

    def start_gateway(
        self,
        name: str = "thrift",
        port: int | None = None,
        transport: str | None = None,
        protocol: str | None = None,
        read_timeout: float | None = None,
    ) -> Gateway:
        """A Thrift1 gateway on 127.0.0.1:``port``.  Restarted, a gateway keeps what it
        had unless told otherwise; new, it gets a free port and buffered+binary."""
        state = self.state()
        old = state.gateways.get(name)
        if old is not None and self._ours(old.pid):
            return old
        before = old or Gateway(0)
        gateway = Gateway(
            port or before.port or free_port(),
            transport or before.transport,
            protocol or before.protocol,
            read_timeout if read_timeout is not None else before.read_timeout,
        )
        if gateway.transport not in ("buffered", "framed") or gateway.protocol not in (
            "binary",
            "compact",
        ):
            raise LocalHBaseError(
                f"transport must be buffered or framed and protocol binary "
                f"or compact, got {gateway.transport}+{gateway.protocol}"
            )
        if port_open(gateway.port):
            raise LocalHBaseError(f"port {gateway.port} on {HOST} is in use by another process")
        args = ["-b", HOST, "-p", str(gateway.port), "--infoport", "-1"]
        args += ["-f"] if gateway.transport == "framed" else []
        args += ["-c"] if gateway.protocol == "compact" else []
        if gateway.read_timeout is not None:
            args += ["--readTimeout", str(int(gateway.read_timeout * 1000))]
        gateway.pid = self._spawn(name, THRIFT_HEAP, THRIFT, [*args, "start"])
        state.gateways[name] = gateway
        self._save(state)
        return gateway

    def start(
        self,
        port: int | None = 9090,
        transport: str | None = None,
        protocol: str | None = None,
        timeout: float = 300.0,
    ) -> Gateway:
        """Master and the ``thrift`` gateway, then wait until HBase answers through it.
        A port in use fails before anything starts; what this call started is stopped
        again when it fails."""
        state = self.state()
        running = state.gateways.get("thrift")
        if not (running and self._ours(running.pid)) and port and port_open(port):
            raise LocalHBaseError(f"port {port} on {HOST} is in use by another process (--port)")
        was_running = self._ours(state.master_pid)
        try:
            self.start_master()
            gateway = self.start_gateway("thrift", port, transport, protocol)
            self.wait_ready("thrift", timeout)
        except BaseException:
            if not was_running:
                self.stop()
            raise
        return gateway

    def wait_ready(self, name: str = "thrift", timeout: float = 300.0) -> float:
        """Seconds until ``tables()`` answers through gateway ``name``; a JVM that dies
        meanwhile, or ``timeout``, is a LocalHBaseError with the end of its log."""
        import happybase

        gateway = self.gateway(name)
        began = time.monotonic()
        last = ""
        while True:
            for what, pid in (("master", self.state().master_pid), (name, gateway.pid)):
                if not self._ours(pid):
                    raise LocalHBaseError(
                        f"the HBase {what} process exited while starting; "
                        f"the end of its log:\n{self.log_tail(what)}"
                    )
            if port_open(gateway.port):
                conn = happybase.Connection(
                    HOST,
                    gateway.port,
                    timeout=10_000,
                    transport=gateway.transport,
                    protocol=gateway.protocol,
                    autoconnect=False,
                )
                try:
                    conn.open()
                    conn.tables()
                    return time.monotonic() - began
                except Exception as exc:  # not ready yet: the server says why
                    last = f"{type(exc).__name__}: {exc}"
                finally:
                    conn.close()
            if time.monotonic() - began > timeout:
                raise LocalHBaseError(
                    f"HBase did not answer through {HOST}:{gateway.port} "
                    f"within {timeout:.0f} s (last: {last or 'port closed'})"
                    f"; see {self.logs}"
                )
            time.sleep(0.5)

    # stop ----------------------------------------------------------------------------

    def _signal(self, pid: int | None, sig: int) -> bool:
        if not self._ours(pid):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)  # type: ignore[arg-type]
        return True

    def _wait_gone(self, pid: int | None, timeout: float) -> bool:
        """Wait for ``pid`` (known to be ours) to exit: an exiting JVM's cmdline reads
        empty long before its files and ports are released."""
        deadline = time.monotonic() + timeout
        while _running(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def stop_gateway(self, name: str = "thrift", kill: bool = False) -> None:
        pid = self.state().gateways.get(name, Gateway(0)).pid
        self._stop(pid, kill, 30.0)

    def stop_master(self, kill: bool = False) -> None:
        """SIGTERM: the RegionServer closes its regions (memstores flushed), the master
        and ZooKeeper stop; ``kill`` is a crash (SIGKILL): the WAL is replayed on start."""
        self._stop(self.state().master_pid, kill, 120.0)

    def _stop(self, pid: int | None, kill: bool, timeout: float) -> None:
        if not self._signal(pid, signal.SIGKILL if kill else signal.SIGTERM):
            return
        if not self._wait_gone(pid, timeout):
            logger.warning("HBase process %s did not stop in %.0f s: killed", pid, timeout)
            self._signal(pid, signal.SIGKILL)
            self._wait_gone(pid, 10.0)

    def stop(self) -> None:
        """Gateways first (no new calls), then the master."""
        for name in self.state().gateways:
            self.stop_gateway(name)
        self.stop_master()

    # report --------------------------------------------------------------------------

    def processes(self) -> Iterator[tuple[str, int | None, bool]]:
        state = self.state()
        yield "master", state.master_pid, self._ours(state.master_pid)
        for name, gateway in state.gateways.items():
            yield name, gateway.pid, self._ours(gateway.pid)

    def memory(self) -> dict[str, int]:
        """Resident memory of each running process, in bytes."""
        sizes = {}
        for name, pid, alive in self.processes():
            if alive:
                with contextlib.suppress(OSError):
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            sizes[name] = int(line.split()[1]) * 1024
        return sizes

    def log_tail(self, name: str, lines: int = 20) -> str:
        try:
            text = (self.logs / f"{name}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
