"""The simulation's emulated replica (:class:`support.gates.Replica`) agrees with a real one.

The real one is a redis-server replicating its master through a link that the test
holds up (``redis_pair``), then the master is killed (-9) and the replica promoted:
what a ``WAIT`` confirmed survives, what it did not is lost, and ``WAIT`` said which,
as the model says.
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from conftest import _server
from support.gates import Replica


def scenario(
    master: redis.Redis,
    wait: Callable[[], int],
    lag: Callable[[], None],
    fail_over: Callable[[], redis.Redis],
) -> tuple:
    master.set("a", 1)
    master.hset("h", "x", 1)
    first = wait()
    lag()
    master.set("b", 2)
    master.incr("a")
    master.hdel("h", "x")
    second = wait()
    after = fail_over()
    return first, second, after.get("a"), after.get("b"), after.hgetall("h")


def test_a_failover_keeps_what_wait_confirmed_and_loses_the_rest_as_the_model_does(
    redis_pair, tmp_path
):
    m = redis_pair.master.client()
    real = scenario(
        m, lambda: m.execute_command("WAIT", 1, 500), redis_pair.link.hold, redis_pair.fail_over
    )

    server = _server(tmp_path / "model")
    server.start()
    try:
        client = server.client()
        model = Replica(client)

        def lag() -> None:
            model.lagging = True

        def fail_over() -> redis.Redis:
            model.fail_over()
            return client

        modelled = scenario(client, model.wait, lag, fail_over)
    finally:
        server.stop()
    assert real == (1, 0, b"1", None, {b"x": b"1"})
    assert modelled == real
