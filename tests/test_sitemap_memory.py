"""The sitemap memory of a worker (webcrawl/sitemaps/memory.py), with an explicit clock."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webcrawl.sitemaps.memory import SitemapMemory

MiB = 1 << 20


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bytes_held_stay_within_the_limit_and_a_token_keeps_its_share():
    memory = SitemapMemory(10 * MiB, stale_after=60, clock=Clock())
    a = memory.admit(None, "http://a")
    b = memory.admit(None, "http://b")
    assert a is not None and b is not None and a != b
    assert memory.hold(a, 6 * MiB) and memory.used == 6 * MiB
    assert not memory.hold(b, 5 * MiB)  # does not fit beside a's
    assert memory.hold(b, 4 * MiB) and memory.used == 10 * MiB
    assert memory.admit(None, "http://c") is None  # all taken: the others wait
    assert memory.admit(a, "http://a") == a  # a redirect or retry of a's request: a's
    assert memory.hold(a, 1 * MiB) and memory.used == 5 * MiB  # (its body: smaller)
    memory.release(a)
    c = memory.admit(None, "http://c")
    assert c is not None and c not in (a, b)
    assert memory.admit(a, "http://a") not in (None, a)  # released: not a's any more
    assert not memory.hold(a, 1)  # a released token holds nothing


def test_a_sitemap_with_no_answer_yet_holds_nothing():
    """Hosts whose sitemaps hang, or announce a size and stall, hold no memory."""
    memory = SitemapMemory(4 * MiB, stale_after=600, clock=Clock())
    hanging = [memory.admit(None, f"http://hangs{i}.example") for i in range(50)]
    assert None not in hanging and memory.used == 0
    ok = memory.admit(None, "http://ok.example")
    assert ok is not None and memory.hold(ok, 3 * MiB)


def test_one_host_has_one_sitemap_in_flight():
    memory = SitemapMemory(100 * MiB, stale_after=60, clock=Clock())
    a = memory.admit(None, "http://many.example")
    assert a is not None
    assert memory.admit(None, "http://many.example") is None  # its other sitemaps wait
    assert memory.host_busy("http://many.example")  # (they wait HOST_WAIT, not WAIT)
    assert not memory.host_busy("http://other.example")
    assert memory.admit(a, "http://many.example") == a
    memory.release(a)
    assert not memory.host_busy("http://many.example")
    assert memory.admit(None, "http://many.example") is not None


def test_a_sitemap_alone_always_fits_and_bytes_in_memory_are_forced():
    memory = SitemapMemory(1 * MiB, stale_after=60, clock=Clock())
    big = memory.admit(None, "http://big")
    assert memory.hold(big, 50 * MiB)  # alone: the bound may be below one file
    assert memory.admit(None, "http://small") is None  # all taken
    memory.release(big)
    small = memory.admit(None, "http://small")
    other = memory.admit(None, "http://other")
    assert memory.hold(small, MiB // 2) and not memory.hold(other, MiB)
    # bytes in memory already (a body that came in whole): counted as they are
    assert memory.hold(other, 2 * MiB, force=True) and memory.used == 2 * MiB + MiB // 2


def test_a_stopped_sitemap_claims_its_memory_and_the_others_wait_until_it_fits():
    clock = Clock()
    memory = SitemapMemory(10 * MiB, stale_after=600, clock=clock, claim_ttl=15)
    smalls = [memory.admit(None, f"http://s{i}") for i in range(3)]
    for token in smalls:
        assert memory.hold(token, 3 * MiB)
    big = memory.admit(None, "http://big")
    assert memory.hold(big, MiB) and not memory.hold(big, 2 * MiB)  # 9 + 2 > 10
    memory.stopped(big, "http://big/sitemap.xml", 8 * MiB, most=50 * MiB)
    assert memory.used == 17 * MiB  # (its claim is held as a share of its own)
    # a claim is not a sitemap in flight: its host's sitemaps wait for the memory
    # (WAIT), not for a busy host (HOST_WAIT)
    assert not memory.host_busy("http://big")
    memory.release(smalls[0])  # 6 MiB held: room for a small one, not beside the claim
    assert memory.admit(None, "http://s9") is None  # drains for the claimant
    assert memory.admit(None, "http://big", "http://big/sitemap.xml") is None  # 6 + 8
    memory.release(smalls[1])  # 3 + 8 claimed: over, still
    assert memory.admit(None, "http://s9") is None
    memory.release(smalls[2])
    token = memory.admit(None, "http://big", "http://big/sitemap.xml")
    assert token is not None and memory.held_by(token) == 8 * MiB  # held for it
    small = memory.admit(None, "http://s9")  # beside it
    assert small is not None and memory.hold(small, 2 * MiB)
    assert not memory.hold(small, 3 * MiB)


def test_others_are_admitted_and_grow_beside_a_claim():
    memory = SitemapMemory(10 * MiB, stale_after=600, clock=Clock(), claim_ttl=15)
    a = memory.admit(None, "http://a")
    assert memory.hold(a, 9 * MiB)
    big = memory.admit(None, "http://big")
    assert not memory.hold(big, 2 * MiB)
    memory.stopped(big, "http://big/s.xml", 4 * MiB, most=50 * MiB)
    memory.release(a)
    other = memory.admit(None, "http://o")  # 4 claimed: room beside it
    assert other is not None and memory.hold(other, 6 * MiB) and not memory.hold(other, 7 * MiB)
    assert memory.admit(None, "http://big") is None  # its host waits for its claimant


def test_a_claim_whose_sitemap_does_not_come_back_lapses_and_one_stopped_twice_claims_all():
    clock = Clock()
    memory = SitemapMemory(10 * MiB, stale_after=600, clock=clock, claim_ttl=15)
    other = memory.admit(None, "http://o")
    assert memory.hold(other, 9 * MiB)
    big = memory.admit(None, "http://big")
    assert not memory.hold(big, 2 * MiB)
    memory.stopped(big, "http://big/s.xml", 10 * MiB, most=50 * MiB)  # (another worker
    memory.release(other)  # takes it)
    assert memory.admit(None, "http://new") is None
    clock.now += 16
    new = memory.admit(None, "http://new")
    assert new is not None and memory.used == 0  # lapsed
    assert memory.hold(new, 9 * MiB)
    again = memory.admit(None, "http://big", "http://big/s.xml")
    assert not memory.hold(again, 2 * MiB)
    memory.stopped(again, "http://big/s.xml", 4 * MiB, most=50 * MiB)  # stopped before:
    assert memory.used == 59 * MiB  # all it may take, not twice again


def test_release_is_idempotent_and_ignores_none():
    memory = SitemapMemory(1, stale_after=60, clock=Clock())
    token = memory.admit(None, "http://a")
    memory.release(token)
    memory.release(token)
    memory.release(None)
    assert memory.held == 0 and memory.admit(None, "http://a") is not None
    assert not memory.hold(None, 1) and memory.held_by(None) == 0


def test_a_share_without_a_sign_of_life_is_taken_back_when_stale():
    clock = Clock()
    memory = SitemapMemory(1, stale_after=60, clock=clock)
    lost = memory.admit(None, "http://a")
    assert memory.hold(lost, 5)
    clock.now += 50
    assert memory.hold(lost, 6)  # alive: bytes came
    clock.now += 50
    memory.touch([lost, None, "another's"])  # alive: waits for its turn to be read
    clock.now += 50
    assert memory.admit(None, "http://b") is None  # 50 s since its last sign of life
    clock.now += 11
    assert memory.admit(None, "http://b") is not None and memory.used == 0


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        SitemapMemory(0, stale_after=60)


def test_another_workers_token_is_none_of_this_ones():
    ours, theirs = SitemapMemory(9, stale_after=60), SitemapMemory(9, stale_after=60)
    foreign = theirs.admit(None, "http://a")  # a request that went through Redis with it
    mine = ours.admit(None, "http://b")
    got = ours.admit(foreign, "http://a")
    assert got not in (None, foreign, mine) and ours.held == 2
    ours.release(foreign)  # releases nothing of ours
    assert ours.held == 2


@given(
    st.integers(1, 1000),
    st.lists(
        st.tuples(
            st.sampled_from(["admit", "hold", "release", "stopped", "tick"]),
            st.integers(0, 5),
            st.integers(0, 2000),
        ),
        max_size=60,
    ),
)
def test_only_a_lone_sitemap_a_claimant_or_bytes_in_memory_go_past_the_limit(limit, steps):
    clock = Clock()
    memory = SitemapMemory(limit, stale_after=1e9, clock=clock, claim_ttl=30)
    tokens: list = [None] * 6
    beyond = False  # bytes let in past the limit on purpose (in memory already, claimed)
    for op, i, size in steps:
        if op == "admit":
            before = memory.used
            tokens[i] = memory.admit(tokens[i], f"http://h{i}", f"http://h{i}/s") or tokens[i]
            beyond |= memory.used > before
        elif op == "hold":
            force = size % 7 == 0
            beyond |= memory.hold(tokens[i], size, force=force) and force
        elif op == "stopped":
            memory.stopped(tokens[i], f"http://h{i}/s", size, most=2 * limit)
            beyond = True  # (a claim may ask more than the limit: it waits alone)
        elif op == "release":
            memory.release(tokens[i])
        else:
            clock.now += size / 50
        if not beyond:
            held = [memory.held_by(t) for t in tokens]
            assert memory.used <= limit or max(held) == memory.used
        assert memory.held <= 6  # one a host


def test_a_sitemap_whose_host_stays_busy_waits_longer_each_time():
    from webcrawl.middlewares.sitemaps import HOST_WAIT, WAIT, host_wait

    waits = [host_wait(n) for n in range(6)]
    assert waits[0] == HOST_WAIT < waits[1] < waits[2] < WAIT
    assert waits[3:] == [WAIT] * 3 and host_wait(10**6) == WAIT
