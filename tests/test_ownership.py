"""Which shards each worker prefers (webcrawl/frontier/ownership.py)."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from webcrawl.frontier.ownership import owned, owners

IDS = st.lists(st.text(alphabet="abc:0123456789", min_size=1, max_size=12), unique=True)


@given(IDS.filter(bool), st.integers(1, 300))
def test_every_shard_has_one_owner_and_shares_are_even(workers, shards):
    live = tuple(sorted(workers))
    out = owners(live, shards)
    assert len(out) == shards and set(out) <= set(live)
    held = Counter(out)
    counts = [held.get(w, 0) for w in live]
    assert max(counts) - min(counts) <= 1  # shards // workers, or one more
    assert all(owned(w, live, shards) == {s for s, o in enumerate(out) if o == w} for w in live)


def test_every_worker_computes_the_same_owners_whatever_order_it_lists_them_in():
    workers = [f"crawler-{i}:{1000 + i}:ab{i}" for i in range(7)]
    mine = [owned(w, workers, 64) for w in workers]
    theirs = [owned(w, list(reversed(workers)), 64) for w in workers]
    assert mine == theirs
    assert frozenset().union(*mine) == set(range(64))
    assert sum(len(m) for m in mine) == 64  # no shard twice


def test_a_worker_joining_or_leaving_moves_few_shards():
    workers = tuple(sorted(f"w{i}:1:x" for i in range(10)))
    before = owners(workers, 256)
    after_leave = owners(workers[1:], 256)
    after_join = owners(tuple(sorted((*workers, "w99:1:x"))), 256)
    # an even share is 25.6 shards: the leaver's move, and a few the caps shift
    assert sum(a != b for a, b in zip(before, after_leave, strict=True)) <= 40
    assert sum(a != b for a, b in zip(before, after_join, strict=True)) <= 40
    assert {s for s, w in enumerate(before) if w == workers[0]} <= {
        s for s, (a, b) in enumerate(zip(before, after_leave, strict=True)) if a != b
    }


def test_a_worker_not_yet_in_the_registry_counts_itself():
    assert owned("new", [], 16) == set(range(16))
    assert len(owned("new", ["old"], 16)) == 8
    assert owners((), 4) == ("", "", "", "")


def test_a_paused_worker_says_it_pops_nothing_so_the_others_take_its_shards():
    """A worker whose engine is paused (a store outage) keeps beating, but its heartbeat
    says it pops nothing: the others own its shards from their next heartbeat, instead of
    leaving its hosts to wait for help that busy workers do not give."""
    from scrapy.core.engine import ExecutionEngine
    from test_scheduler_input import _crawler

    from webcrawl.frontier.scheduler import Scheduler
    from webcrawl.frontier.workers import popping

    crawler = _crawler()
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.one_off = False  # what open() finds for the web spider
    crawler.engine = ExecutionEngine(crawler, spider_closed_callback=lambda _: None)
    assert scheduler.pops()
    crawler.engine.pause()
    assert not scheduler.pops()
    live = [{"id": "a", "pops": True}, {"id": "b", "pops": scheduler.pops()}]
    assert owned("a", popping(live), 16) == set(range(16))
    crawler.engine.unpause()
    assert scheduler.pops()
    scheduler.one_off = True  # scrapy shell
    assert not scheduler.pops()
