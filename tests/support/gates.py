"""Workers whose every outside call (Redis, the store) waits for a controller's word.

Each simulated worker runs its operations on a thread of its own.  Before each call
to Redis or the store the thread stops at its :class:`Gate`; the controller then
lets the call through, makes it fail (before it reaches the server, or after: the
server did it but the answer is lost), or crashes the worker there (kill -9: a
:class:`Crash` unwinds the thread through every ``except Exception``, and the worker
object is thrown away with its memory).  Only one thread runs at a time, so a
seed chooses the interleaving exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import redis
from redis.commands.core import Script

from webcrawl.frontier import scripts
from webcrawl.store.base import StoreError

# script SHA -> its name, for the call log
_SCRIPTS = {s.sha: s.name for s in vars(scripts).values() if isinstance(s, scripts.Script)}

GO, FAIL_BEFORE, FAIL_AFTER, CRASH = "go", "fail before", "fail after", "crash"


class Crash(BaseException):
    """kill -9 of a simulated worker."""


class Gate:
    """The meeting point of one worker thread and the controller."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cv = threading.Condition()
        self.waiting: str | None = None  # the call the worker waits to make
        self._verdict: str | None = None
        self.busy = False  # running an operation
        self.calls = 0  # calls made (or failed) so far
        self.log: list[str] = []
        self._task: Callable[[], Any] | None = None
        self.outcome: Any = None  # what the last operation returned or raised
        self.crashed = False
        self._killed = False  # set with the crash verdict, before the thread has unwound
        self.sibling: Gate | None = None  # the gate of the process's other thread
        self._thread = threading.Thread(target=self._loop, name=f"sim-{name}", daemon=True)
        self._thread.start()

    # -- the worker's side ---------------------------------------------------

    def call(self, what: str, func: Callable[[], Any], error: Callable[[str], Exception]) -> Any:
        if self._killed:  # a dead process makes no more calls (its finally blocks neither)
            raise Crash(what)
        with self._cv:
            self.waiting = what
            self._cv.notify_all()
            while self._verdict is None:
                self._cv.wait()
            verdict, self._verdict, self.waiting = self._verdict, None, None
            self.calls += 1
            self.log.append(f"{verdict}: {what}")
        if verdict == CRASH:
            self._killed = True
            if self.sibling is not None:  # the other thread of the process dies with it
                self.sibling._killed = True
            raise Crash(what)
        if verdict == FAIL_BEFORE:
            raise error(what)
        result = func()
        if verdict == FAIL_AFTER:
            raise error(what)
        return result

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._task is None:
                    self._cv.wait()
                task = self._task
            try:
                self.outcome = task()
            except Crash:
                self.crashed = True
                self.outcome = None
            except BaseException as exc:  # an operation's own error: the test reads it
                self.outcome = exc
            with self._cv:
                self._task = None
                self.busy = False
                self._cv.notify_all()
            if self.crashed:
                return

    # -- the controller's side -------------------------------------------------

    def start(self, task: Callable[[], Any]) -> None:
        """Start an operation; returns when it waits at its first call or has ended."""
        with self._cv:
            assert not self.busy and not self.crashed
            self.busy, self._task, self.outcome = True, task, None
            self._cv.notify_all()
            self._settle()

    def decide(self, verdict: str) -> None:
        """Let the waiting call go (or fail, or crash); returns when the worker waits at
        its next call or its operation has ended."""
        with self._cv:
            assert self.waiting is not None
            self._verdict = verdict
            self._cv.notify_all()
            while self._verdict is not None:
                self._cv.wait()
            self._settle()

    def _settle(self) -> None:
        while self.busy and self.waiting is None:
            if not self._cv.wait(timeout=30):
                raise TimeoutError(f"worker {self.name} neither waits nor ends")


class Replica:
    """The one replica of the simulation's Redis, emulated: what it has is a copy of the
    master as of the last time it caught up.

    A real replica on loopback has every write within a millisecond and cannot be made
    to lag on cue; ``tests/test_replica_model.py`` holds this model to a real one whose
    link to its master is held up by a proxy.  Redis replicates asynchronously: a
    ``WAIT`` that counts the replica means it has every write made before it (it caught
    up), unless the replica ``lags`` (``WAIT`` then counts none); a failover makes the
    master what the replica has, and every write since its last catch-up is lost.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.lagging = False
        self.failovers = 0
        self._copy: list[tuple[bytes, int, bytes]] = []
        self.catch_up()

    def catch_up(self) -> None:
        """The replica has every write made so far."""
        keys = list(self.client.scan_iter(count=1000))
        pipe = self.client.pipeline()  # (only the controller's thread runs now)
        for key in keys:
            pipe.pttl(key).dump(key)
        replies = pipe.execute()
        self._copy = [(key, replies[2 * i], replies[2 * i + 1]) for i, key in enumerate(keys)]

    def wait(self) -> int:
        """The reply of ``WAIT 1``: the replicas that have every write so far."""
        if self.lagging:
            return 0
        self.catch_up()
        return 1

    def fail_over(self) -> None:
        """The master dies and its replica takes over, with what it had (and no scripts:
        they are not replicated)."""
        c = self.client
        c.flushall()
        c.script_flush()
        for key, ttl, dump in self._copy:
            c.restore(key, max(0, ttl), dump)
        self.failovers += 1


class Process:
    """The gates of one worker process: its main thread's and its mover thread's (the
    scheduler's spills, refills and store writes run there, in order).  A call passes
    the gate of the thread making it; a kill at either gate kills both threads."""

    def __init__(self, name: str) -> None:
        self.main = Gate(name)
        self.mover = Gate(f"{name}-mover")
        self.main.sibling, self.mover.sibling = self.mover, self.main

    @property
    def gates(self) -> tuple[Gate, Gate]:
        return self.main, self.mover

    @property
    def crashed(self) -> bool:
        return self.main.crashed or self.mover.crashed

    def call(self, what: str, func: Callable[[], Any], error: Callable[[str], Exception]) -> Any:
        mover = threading.current_thread() is self.mover._thread
        return (self.mover if mover else self.main).call(what, func, error)


class _GatedPipeline:
    def __init__(self, pipe: Any, gate: Gate | Process, replica: Replica | None) -> None:
        self._pipe, self._gate, self._replica = pipe, gate, replica

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipe, name)

    def execute(self, raise_on_error: bool = True) -> Any:
        commands = [
            _SCRIPTS.get(c[0][1], c[0][1]) if c[0][0] == "EVALSHA" else str(c[0][0])
            for c in self._pipe.command_stack
        ]

        wait = bool(commands) and commands[-1] == "WAIT" and self._replica is not None
        if wait:  # the real server has no replica: its WAIT would sleep out the timeout
            stack = self._pipe.command_stack
            stack[-1] = (("WAIT", 0, 0), stack[-1][1])

        def execute() -> Any:
            replies = self._pipe.execute(raise_on_error=raise_on_error)
            if wait:
                replies[-1] = self._replica.wait()
            return replies

        what = "redis pipeline: " + ", ".join(commands)
        return self._gate.call(what, execute, redis.ConnectionError)


# client attributes that are not calls to the server
_LOCAL = {
    "get_encoder",
    "get_connection_kwargs",
    "connection_pool",
    "response_callbacks",
    "get_node_from_key",
}


class GatedRedis:
    """A redis-py client whose every command (and pipeline) passes the gate."""

    def __init__(
        self, client: redis.Redis, gate: Gate | Process, replica: Replica | None = None
    ) -> None:
        self._client, self._gate, self._replica = client, gate, replica

    def pipeline(self, transaction: bool = False) -> _GatedPipeline:
        pipe = self._client.pipeline(transaction=transaction)
        return _GatedPipeline(pipe, self._gate, self._replica)

    def register_script(self, script: str) -> Script:
        return Script(self, script)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name in _LOCAL or name.startswith("_") or not callable(attr):
            return attr

        def gated(*args: Any, **kwargs: Any) -> Any:
            what = f"redis {name} {' '.join(str(a)[:60] for a in args[:2])}"
            return self._gate.call(what, lambda: attr(*args, **kwargs), redis.ConnectionError)

        return gated


class GatedCluster(GatedRedis):
    """A redis-py cluster client whose every command passes the gate, and so does every
    command of the node clients it hands out (the frontier's pipelines go to those)."""

    def get_redis_connection(self, node: Any) -> GatedRedis:
        return GatedRedis(self._client.get_redis_connection(node), self._gate, self._replica)


class GatedStore:
    """A store whose frontier calls pass the gate."""

    def __init__(self, store: Any, gate: Gate | Process) -> None:
        self._store, self._gate = store, gate

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not name.startswith("frontier_"):
            return attr

        def gated(*args: Any, **kwargs: Any) -> Any:
            first = args[0] if args else ""
            what = f"store {name} {first if isinstance(first, str) else len(first)}"
            return self._gate.call(what, lambda: attr(*args, **kwargs), StoreError)

        return gated
