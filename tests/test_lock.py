"""RedisLock (webcrawl/frontier/lock.py) on a real Redis and a real Redis Cluster: only
its holder releases or extends it, on Redis's clock and on a simulated one; and a
simulation of several holders (Hypothesis) that checks after every step that at most
one of them believes, rightly, that it holds the lock."""

from __future__ import annotations

import time
import uuid

import pytest
import redis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from webcrawl.frontier.lock import SIMULATED_EXPIRY, RedisLock

KEY = "webcrawl:web:test_lock"


def token_in(client, key: str = KEY) -> str | None:
    """The token of the lock's value (``<token>|<deadline>``), or None when free."""
    value = client.get(key)
    return None if value is None else value.decode().rpartition("|")[0]


def wait_gone(client, key: str = KEY, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while client.exists(key):
        assert time.monotonic() < deadline, "the lock's key never expired"
        time.sleep(0.01)


# -- one holder -------------------------------------------------------------------------


def test_acquire_a_free_lock_hold_it_and_release_it(redis_client):
    a = RedisLock(redis_client, KEY, ttl=30, owner="worker-a")
    b = RedisLock(redis_client, KEY, ttl=30, owner="worker-b")
    assert not a.held and a.deadline is None
    assert a.acquire()
    assert a.held and a.owned()
    assert token_in(redis_client) == a.token and a.token.startswith("worker-a:")
    seconds, micros = redis_client.time()  # the deadline is on Redis's clock
    assert 29 < a.deadline - (seconds + micros / 1e6) <= 30
    assert 29_000 < redis_client.pttl(KEY) <= 30_000  # and Redis expires it then
    assert not b.acquire() and not b.held
    assert not b.release()  # holds nothing: a's lock stays
    assert token_in(redis_client) == a.token
    with pytest.raises(RuntimeError, match="acquired twice"):
        a.acquire()
    assert a.release()
    assert not a.held and redis_client.get(KEY) is None
    assert not a.release() and not a.extend()  # once
    assert b.acquire() and b.release()


def test_tokens_are_fresh_for_each_acquisition(redis_client):
    a = RedisLock(redis_client, KEY, ttl=30)
    assert a.acquire()
    first = a.token
    assert a.release() and a.acquire()
    assert a.token != first and len(a.token) == 32
    assert a.release()
    odd = RedisLock(redis_client, KEY, ttl=30, owner="host|1")  # the value splits at its last |
    other = RedisLock(redis_client, KEY, ttl=30)
    assert odd.acquire() and odd.owned() and not other.acquire()
    assert odd.extend() and odd.release()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="ttl must be positive"):
        RedisLock(redis.Redis(), KEY, ttl=0)
    lock = RedisLock(redis.Redis(), KEY, ttl=1)
    lock.token = "t"  # (no Redis call: the ttl is checked first)
    with pytest.raises(ValueError, match="ttl must be positive"):
        lock.extend(-1)


def test_a_value_without_a_deadline_is_held_until_its_key_expires(redis_client):
    """Whatever else set the key (no ``|deadline``) holds it: nobody takes it early."""
    redis_client.set(KEY, "1", px=200)
    lock = RedisLock(redis_client, KEY, ttl=30)
    assert not lock.acquire()
    assert not lock.acquire(now=1e12)  # however late a simulation is
    wait_gone(redis_client)
    assert lock.acquire()


# -- two holders: an expired lock taken by another is not the first's to free ----------


def test_expired_on_redis_clock_and_retaken(redis_client):
    a = RedisLock(redis_client, KEY, ttl=0.1, owner="a")
    b = RedisLock(redis_client, KEY, ttl=30, owner="b")
    assert a.acquire()
    assert not b.acquire()
    wait_gone(redis_client)  # Redis's own expiry (PX)
    assert a.held  # a does not know yet
    assert b.acquire()
    assert not a.owned() and not a.held  # it asked Redis
    assert token_in(redis_client) == b.token
    assert b.owned()


def test_release_after_expiry_leaves_the_new_holders_lock(redis_client):
    a = RedisLock(redis_client, KEY, ttl=0.1, owner="a")
    b = RedisLock(redis_client, KEY, ttl=30, owner="b")
    assert a.acquire()
    wait_gone(redis_client)
    assert b.acquire()
    assert not a.release()  # too late: b's now
    assert token_in(redis_client) == b.token
    assert not a.extend()
    assert token_in(redis_client) == b.token and redis_client.pttl(KEY) > 29_000
    assert b.release() and redis_client.get(KEY) is None


def test_expired_on_a_simulated_clock_and_retaken(redis_client):
    """A simulation advances ``now``: the lock expires at its deadline, no sleeping."""
    a = RedisLock(redis_client, KEY, ttl=10, owner="a")
    b = RedisLock(redis_client, KEY, ttl=10, owner="b")
    assert a.acquire(now=1000.0)
    assert a.deadline == 1010.0
    assert not b.acquire(now=1005.0)
    assert not b.acquire(now=1010.0)  # still a's at its deadline
    assert b.acquire(now=1010.5)
    assert b.deadline == 1020.5
    assert not a.release(now=1011.0)
    assert token_in(redis_client) == b.token
    assert not a.extend(now=1011.0)  # nor does a push b's deadline
    assert redis_client.get(KEY).decode() == f"{b.token}|1020.5"
    assert b.owned(now=1011.0) and not b.owned(now=1021.0)


def test_a_simulated_lock_lives_a_day_in_real_time(redis_client):
    """A simulated lock's key still expires, after a day (its time may stand still)."""
    lock = RedisLock(redis_client, KEY, ttl=10)
    assert lock.acquire(now=0.0)
    assert (SIMULATED_EXPIRY - 5) * 1000 < redis_client.pttl(KEY) <= SIMULATED_EXPIRY * 1000
    assert lock.extend(20, now=5.0) and lock.deadline == 25.0
    assert redis_client.pttl(KEY) > (SIMULATED_EXPIRY - 5) * 1000
    assert lock.release(now=6.0)


# -- extend ---------------------------------------------------------------------------------


def test_extend_only_while_owned(redis_client):
    a = RedisLock(redis_client, KEY, ttl=0.3, owner="a")
    assert not a.extend()  # not acquired
    assert a.acquire()
    first = a.deadline
    assert a.extend(30)
    assert a.deadline > first + 29
    assert redis_client.pttl(KEY) > 29_000
    assert a.extend()  # back to its own ttl
    assert redis_client.pttl(KEY) <= 300
    wait_gone(redis_client)
    assert not a.extend()  # expired: not revived
    assert not a.held and redis_client.get(KEY) is None


def test_extend_after_a_simulated_expiry_does_not_revive_it(redis_client):
    a = RedisLock(redis_client, KEY, ttl=1)
    b = RedisLock(redis_client, KEY, ttl=1)
    assert a.acquire(now=0.0)
    assert a.extend(now=0.9) and a.deadline == 1.9
    assert not a.extend(now=2.0)  # past its deadline, though its value is still there
    assert not a.held
    assert b.acquire(now=2.0)


def test_release_of_an_expired_lock_nobody_took(redis_client):
    """Not ours any more (False), on either clock; a stale value of ours is tidied away."""
    a = RedisLock(redis_client, KEY, ttl=1)
    assert a.acquire(now=0.0)
    assert not a.release(now=1.5)
    assert redis_client.get(KEY) is None
    short = RedisLock(redis_client, KEY, ttl=0.05)
    assert short.acquire()
    wait_gone(redis_client)
    assert not short.release()


# -- Redis Cluster ------------------------------------------------------------------------------


@pytest.mark.e2e
def test_on_a_redis_cluster(redis_cluster):
    """The same, on a cluster: keys in several slots, on both clocks."""
    nodes = [redis.cluster.ClusterNode(h, p) for h, p in redis_cluster.startup_nodes()]
    client = redis.RedisCluster(startup_nodes=nodes, socket_timeout=5)
    try:
        for i in range(6):  # spread over the masters
            key = f"webcrawl:{{web:{i}}}:lock"
            a = RedisLock(client, key, ttl=10, owner="a")
            b = RedisLock(client, key, ttl=10, owner="b")
            assert a.acquire() and not b.acquire()
            assert a.extend() and a.owned()
            assert a.release() and b.acquire()
            assert b.release()
            assert a.acquire(now=100.0) and not b.acquire(now=110.0)
            assert b.acquire(now=110.5)
            assert not a.release(now=111.0) and not a.extend(now=111.0)
            assert token_in(client, key) == b.token
            assert b.release(now=112.0) and not client.exists(key)
        short = RedisLock(client, "webcrawl:{web:0}:short", ttl=0.1)
        other = RedisLock(client, "webcrawl:{web:0}:short", ttl=10)
        assert short.acquire()
        wait_gone(client, "webcrawl:{web:0}:short")
        assert other.acquire() and not short.release()
        assert token_in(client, "webcrawl:{web:0}:short") == other.token
    finally:
        client.close()


# -- simulation: several holders, every interleaving a seed reaches ----------------------------

TTL = 10.0


class LockMachine(RuleBasedStateMachine):
    """Holders acquire, release, extend and ask, while simulated time moves on.

    The model is the key: whose token it holds and until when.  Each call's answer
    is checked against it, and after every step: at most one holder whose own
    deadline has not passed believes it holds the lock, and Redis names that one.
    """

    client: redis.Redis

    def __init__(self) -> None:
        super().__init__()
        self.key = f"{KEY}:{uuid.uuid4().hex}"
        self.holders = [RedisLock(self.client, self.key, ttl=TTL, owner=f"h{i}") for i in range(3)]
        self.now = 1000.0
        self.token: str | None = None  # the model: the key's token and deadline
        self.deadline = 0.0

    def teardown(self) -> None:
        self.client.delete(self.key)

    def _live(self, token: str | None) -> bool:
        return token is not None and token == self.token and self.deadline >= self.now

    holder = st.integers(0, 2)

    @rule(i=holder)
    def acquire(self, i: int) -> None:
        lock = self.holders[i]
        if lock.held:
            with pytest.raises(RuntimeError):
                lock.acquire(now=self.now)
            return
        free = self.token is None or self.deadline < self.now
        assert lock.acquire(now=self.now) == free
        if free:
            self.token, self.deadline = lock.token, self.now + TTL
            assert lock.deadline == self.deadline

    @rule(i=holder)
    def release(self, i: int) -> None:
        lock = self.holders[i]
        token, ours = lock.token, self._live(lock.token)
        assert lock.release(now=self.now) == ours
        assert not lock.held
        if token is not None and token == self.token:  # its own value goes, live or not
            self.token = None

    @rule(i=holder, ttl=st.sampled_from([0.5, TTL, 30.0]))
    def extend(self, i: int, ttl: float) -> None:
        lock = self.holders[i]
        ours = self._live(lock.token)
        assert lock.extend(ttl, now=self.now) == ours
        assert lock.held == ours
        if ours:
            self.deadline = self.now + ttl
            assert lock.deadline == self.deadline

    @rule(i=holder)
    def owned(self, i: int) -> None:
        lock = self.holders[i]
        ours = self._live(lock.token)
        assert lock.owned(now=self.now) == ours
        assert lock.held == ours

    @rule(dt=st.one_of(st.sampled_from([0.0, 0.5, TTL, TTL + 0.01]), st.floats(0, 40)))
    def advance(self, dt: float) -> None:
        self.now += dt

    @invariant()
    def one_holder_and_redis_names_it(self) -> None:
        believers = [
            h for h in self.holders if h.held and h.deadline is not None and h.deadline >= self.now
        ]
        assert len(believers) <= 1
        assert token_in(self.client, self.key) == self.token
        if believers:
            assert believers[0].token == self.token


def test_simulation_of_holders(redis_client):
    LockMachine.client = redis_client
    run_state_machine_as_test(
        LockMachine, settings=settings(max_examples=150, stateful_step_count=40, deadline=None)
    )
