"""Run Lua steps (and plain commands) on the frontier's shards: one pipeline per Redis node.

On one Redis (embedded or a server) every shard is on the one node, so a
step over several shards is one pipeline.  On a Redis Cluster, calls are
grouped by the node that serves their shard's slot (each shard's keys share
one hash tag); each group is one pipeline on that node.

A call fails alone: a node that is down or failing over, a slot that moved
(``MOVED``: the slot map is refreshed and the call is sent again to its new
node at once) or is migrating (``ASK``, ``TRYAGAIN``: left for the caller to
retry) gives that call an exception in its place, and the others' results
stand.  Scripts are sent by SHA; a node that lacks one (a new node, a
promoted replica, a restarted server) gets it loaded and the call sent again
(a script that was not found did not run).

``wait_replicas`` > 0 appends ``WAIT`` to every group whose calls ``confirm``
asks for: its calls are ``confirmed`` only when that many replicas have the
writes (Redis replicates asynchronously, and a master that dies before its
replicas have a write loses it in the failover).  A node with fewer replicas
connected is asked for those it has, except by ``strict`` calls: a move that
deletes the store's copy next waits for every replica asked for (a replica cut
off now may be promoted later, without the move).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import redis
from redis.exceptions import MovedError, NoScriptError, RedisClusterException, RedisError

from webcrawl.frontier.keys import CrawlKeys

logger = logging.getLogger(__name__)

# how a node's pipeline went: answered; answered, but WAIT fell short; the node failed
_OK, _UNCONFIRMED, _NODE_DOWN = "ok", "unconfirmed", "node down"


class Lua:
    """A Lua script, called by its SHA1."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


@dataclass
class Call:
    """One call on one shard: a script, or a plain command (its name) on ``keys``."""

    shard: int
    script: Lua | str
    keys: Sequence[str]
    args: Sequence[object]
    confirm: bool = False  # its writes must reach FRONTIER_REDIS_WAIT_REPLICAS replicas
    # ... all of them, even those not connected now: what follows the call destroys the
    # only other copy (a store row), and a replica cut off now may be promoted later
    strict: bool = False
    result: object = None
    error: Exception | None = None
    confirmed: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class _Group:
    client: redis.Redis
    calls: list[Call] = field(default_factory=list)


def is_cluster(client: object) -> bool:
    """Whether ``client`` routes keys to the nodes of a Redis Cluster (redis-py's cluster
    client, or a wrapper of it: the frontier's simulation gates every call)."""
    return callable(getattr(client, "get_node_from_key", None))


class ShardRouter:
    """Sends script calls to the node of their shard."""

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        keys: CrawlKeys,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ) -> None:
        self.client = client
        self.keys = keys
        self.cluster = is_cluster(client)
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = max(1, int(wait_timeout * 1000))
        self.unconfirmed = 0  # groups whose WAIT fell short
        self._replicas: dict[int, tuple[int, float]] = {}  # node client -> (replicas, when)
        self._refreshed = float("-inf")
        self._alone_logged: set[int] = set()
        self._pool: ThreadPoolExecutor | None = None  # sends to several nodes at once

    def close(self) -> None:
        """Stop the threads that send to several nodes at once (if any were started)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def node_of(self, shard: int) -> redis.Redis:
        """The client of the node serving ``shard`` (the client itself on one Redis)."""
        if not self.cluster:
            return self.client  # type: ignore[return-value]
        node = self.client.get_node_from_key(self.keys.shard(shard).prefix)
        return self.client.get_redis_connection(node)

    def run(self, calls: Sequence[Call]) -> Sequence[Call]:
        """Run ``calls`` (one round trip per node); each gets its ``result`` or ``error``."""
        pending = list(calls)
        for attempt in range(2):
            moved = self._run_once(pending)
            if not moved:
                break
            self.refresh(force=True)
            if attempt == 0:
                for call in moved:
                    call.error = None
                pending = moved
        return calls

    def _run_once(self, calls: Sequence[Call]) -> list[Call]:
        groups: dict[int, _Group] = {}
        for call in calls:
            try:
                client = self.node_of(call.shard)
            except (RedisClusterException, RedisError) as exc:  # slot not covered: failing over
                call.error = exc
                continue
            groups.setdefault(id(client), _Group(client)).calls.append(call)
        outcomes = self._run_groups(list(groups.values()))
        if any(outcome == _NODE_DOWN for outcome in outcomes):
            self.refresh()
        self.unconfirmed += outcomes.count(_UNCONFIRMED)
        return [c for c in calls if isinstance(c.error, MovedError)]

    def _run_groups(self, groups: list[_Group]) -> list[str]:
        """Each node's pipeline; on several nodes, all at once (one round-trip time for
        the step, not one per node: redis-py's pipelines block, so one thread each)."""
        if len(groups) <= 1:
            return [self._run_group(g) for g in groups]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="webcrawl-shards")
        others = [self._pool.submit(self._run_group, g) for g in groups[1:]]
        first = self._run_group(groups[0])
        return [first, *(f.result() for f in others)]

    def _run_group(self, group: _Group) -> str:
        """Send one node's calls; returns _OK, _UNCONFIRMED (WAIT fell short) or
        _NODE_DOWN (every call failed with the node)."""
        calls = group.calls
        try:
            strict = any(c.strict for c in calls)
            wait = self._wait_for(group.client, strict) if any(c.confirm for c in calls) else 0
            replies = self._exchange(group.client, calls, wait)
        except RedisError as exc:  # the node is down, or timed out: every call of it failed
            for call in calls:
                call.error = exc
            down = self.cluster and not isinstance(exc, redis.TimeoutError)
            return _NODE_DOWN if down else _OK
        for call, reply in zip(calls, replies, strict=False):
            if isinstance(reply, Exception):
                call.error = reply
            else:
                call.result = reply
        if not wait:
            return _OK
        reached = replies[-1]
        confirmed = isinstance(reached, int) and reached >= wait
        for call in calls:
            call.confirmed = confirmed or not call.confirm
        return _OK if confirmed else _UNCONFIRMED

    def _wait_for(self, client: redis.Redis, strict: bool = False) -> int:
        """Replicas to WAIT for on ``client``'s node: FRONTIER_REDIS_WAIT_REPLICAS, but,
        unless ``strict``, no more than it has (a replica promoted after its master died
        has none until one is added: waiting would only stall every step for the
        timeout, and leave every lease to expire)."""
        if self.wait_replicas <= 0:
            return 0
        now = time.monotonic()
        known = self._replicas.get(id(client))
        if known is None or now - known[1] > 5.0:
            count = int(client.info("replication").get("connected_slaves", 0))
            known = self._replicas[id(client)] = (count, now)
            if count < self.wait_replicas and id(client) not in self._alone_logged:
                self._alone_logged.add(id(client))
                kwargs = client.connection_pool.connection_kwargs
                logger.warning(
                    "Redis node %s:%s has %d of the %d replicas FRONTIER_REDIS_WAIT_"
                    "REPLICAS asks for: its steps are confirmed by %d, and moves "
                    "between Redis and the store wait until it has them all",
                    kwargs.get("host"),
                    kwargs.get("port"),
                    count,
                    self.wait_replicas,
                    count,
                )
        return self.wait_replicas if strict else min(self.wait_replicas, known[0])

    def _exchange(self, client: redis.Redis, calls: Sequence[Call], wait: int) -> list[object]:
        """Replies to ``calls`` (then WAIT's, if ``wait``); scripts the node lacks are
        loaded and their calls sent again (a script that was not found did not run)."""
        replies = self._send(client, calls, wait)
        missing = [c for c, r in zip(calls, replies, strict=False) if isinstance(r, NoScriptError)]
        if missing:
            for script in {id(c.script): c.script for c in missing}.values():
                client.script_load(script.source)
            again = self._send(client, missing, wait)
            for call, reply in zip(missing, again, strict=False):
                replies[calls.index(call)] = reply
            if wait:
                replies[-1] = again[-1]
        return replies

    def _send(self, client: redis.Redis, calls: Sequence[Call], wait: int) -> list[object]:
        pipe = client.pipeline(transaction=False)
        for call in calls:
            if isinstance(call.script, str):
                pipe.execute_command(call.script, *call.keys, *call.args)
            else:
                pipe.execute_command(
                    "EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args
                )
        if wait:
            pipe.execute_command("WAIT", wait, self.wait_timeout_ms)
        return pipe.execute(raise_on_error=False)

    def refresh(self, force: bool = False) -> None:
        """Read the cluster's slot map again: after MOVED (``force``), or after a node
        went away at most twice a second (it makes new connections to every node)."""
        now = time.monotonic()
        if not self.cluster or (now - self._refreshed < 0.5 and not force):
            return
        self._refreshed = now
        self._replicas.clear()
        try:
            self.client.nodes_manager.initialize()
        except (RedisClusterException, RedisError) as exc:
            logger.debug("Could not refresh the Redis Cluster slot map: %s", exc)
