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
    assert memory.reserve(a, 6 * MiB) and memory.used == 6 * MiB
    assert not memory.reserve(b, 5 * MiB)  # does not fit beside a's
    assert memory.reserve(b, 4 * MiB) and memory.used == 10 * MiB
    assert memory.reserve(a, 3 * MiB) and memory.held_by(a) == 6 * MiB  # never less
    assert memory.admit(None, "http://c") is None  # all taken: the others wait
    assert memory.admit(a, "http://a") == a  # a redirect or retry of a's request: a's
    memory.release(a)
    c = memory.admit(None, "http://c")
    assert c is not None and c not in (a, b)
    assert memory.admit(a, "http://a") not in (None, a)  # released: not a's any more
    assert not memory.reserve(a, 1)  # a released token holds nothing


def test_a_sitemap_with_no_answer_yet_holds_nothing():
    """Hosts whose sitemaps hang hold no memory: the others' still fit."""
    memory = SitemapMemory(4 * MiB, stale_after=600, clock=Clock())
    hanging = [memory.admit(None, f"http://hangs{i}.example") for i in range(50)]
    assert None not in hanging and memory.used == 0
    ok = memory.admit(None, "http://ok.example")
    assert ok is not None and memory.reserve(ok, 3 * MiB)


def test_one_host_has_one_sitemap_in_flight():
    memory = SitemapMemory(100 * MiB, stale_after=60, clock=Clock())
    a = memory.admit(None, "http://many.example")
    assert a is not None
    assert memory.admit(None, "http://many.example") is None  # its other sitemaps wait
    assert memory.admit(a, "http://many.example") == a
    memory.release(a)
    assert memory.admit(None, "http://many.example") is not None


def test_a_sitemap_alone_always_fits_and_bytes_in_memory_are_forced():
    memory = SitemapMemory(1 * MiB, stale_after=60, clock=Clock())
    big = memory.admit(None, "http://big")
    assert memory.reserve(big, 50 * MiB)  # alone: the bound may be below one file
    small = memory.admit(None, "http://small")
    assert small is None  # all taken
    memory.release(big)
    small = memory.admit(None, "http://small")
    other = memory.admit(None, "http://other")
    assert memory.reserve(small, MiB // 2) and not memory.reserve(other, MiB)
    # a body decoded bigger than its download is in memory already: counted as it is
    assert memory.reserve(other, 2 * MiB, force=True) and memory.used == 2 * MiB + MiB // 2


def test_release_is_idempotent_and_ignores_none():
    memory = SitemapMemory(1, stale_after=60, clock=Clock())
    token = memory.admit(None, "http://a")
    memory.release(token)
    memory.release(token)
    memory.release(None)
    assert memory.held == 0 and memory.admit(None, "http://a") is not None
    assert not memory.reserve(None, 1) and memory.held_by(None) == 0


def test_a_share_lost_with_its_request_is_taken_back_when_stale():
    clock = Clock()
    memory = SitemapMemory(1, stale_after=60, clock=clock)
    lost = memory.admit(None, "http://a")
    assert memory.reserve(lost, 5)
    clock.now += 59
    assert memory.admit(None, "http://b") is None
    clock.now += 2
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
            st.sampled_from(["admit", "reserve", "release"]),
            st.integers(0, 5),
            st.integers(0, 2000),
        ),
        max_size=60,
    ),
)
def test_only_a_lone_sitemap_or_bytes_in_memory_go_past_the_limit(limit, steps):
    memory = SitemapMemory(limit, stale_after=1e9, clock=Clock())
    tokens: list = [None] * 6
    forced = False
    for op, i, size in steps:
        if op == "admit":
            tokens[i] = memory.admit(tokens[i], f"http://h{i}") or tokens[i]
        elif op == "reserve":
            force = size % 7 == 0
            if memory.reserve(tokens[i], size, force=force) and force:
                forced = True
        else:
            memory.release(tokens[i])
        if not forced:
            assert (
                memory.used <= limit
                or memory.held == 1
                or max(memory.held_by(t) for t in tokens) == memory.used
            )
        assert memory.held <= 6  # one a host
