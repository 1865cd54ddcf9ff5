"""The sitemap slots of a worker (webcrawl/sitemaps/slots.py), with an explicit clock."""

import pytest

from webcrawl.sitemaps.slots import SitemapSlots


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_at_most_limit_held_and_a_token_keeps_its_slot():
    slots = SitemapSlots(2, stale_after=60, clock=Clock())
    a = slots.acquire(None)
    b = slots.acquire(None)
    assert a is not None and b is not None and a != b
    assert slots.acquire(None) is None  # full
    assert slots.acquire(a) == a  # a redirect or retry of a's request: still a's
    slots.release(a)
    c = slots.acquire(None)
    assert c is not None and c not in (a, b)
    assert slots.acquire(a) is None  # a released slot is not a's any more
    assert slots.held == 2


def test_release_is_idempotent_and_ignores_none():
    slots = SitemapSlots(1, stale_after=60, clock=Clock())
    token = slots.acquire(None)
    slots.release(token)
    slots.release(token)
    slots.release(None)
    assert slots.held == 0 and slots.acquire(None) is not None


def test_a_slot_lost_with_its_request_is_taken_back_when_stale():
    clock = Clock()
    slots = SitemapSlots(1, stale_after=60, clock=clock)
    assert slots.acquire(None) is not None
    clock.now += 59
    assert slots.acquire(None) is None
    clock.now += 2
    assert slots.acquire(None) is not None


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        SitemapSlots(0, stale_after=60)


def test_another_workers_token_is_none_of_this_ones():
    ours, theirs = SitemapSlots(2, stale_after=60), SitemapSlots(2, stale_after=60)
    foreign = theirs.acquire(None)  # a request that went through Redis with it
    mine = ours.acquire(None)
    got = ours.acquire(foreign)
    assert got not in (None, foreign, mine) and ours.held == 2
    ours.release(foreign)  # releases nothing of ours
    assert ours.held == 2


def test_one_host_holds_one_slot_at_most():
    slots = SitemapSlots(3, stale_after=60, clock=Clock())
    a = slots.acquire(None, "http://hangs.example")
    assert a is not None
    assert slots.acquire(None, "http://hangs.example") is None  # its other sitemaps wait
    assert slots.acquire(a, "http://hangs.example") == a  # (its own, again: a redirect)
    assert slots.acquire(None, "http://other.example") is not None
    slots.release(a)
    assert slots.acquire(None, "http://hangs.example") is not None
