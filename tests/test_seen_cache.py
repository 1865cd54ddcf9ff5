"""The worker's bounded cache of keys known to be in the crawl's seen set."""

from webcrawl.frontier.known import SeenCache


def test_the_cache_knows_the_last_half_of_its_size_always_and_never_much_more():
    cache = SeenCache(10)
    for start in range(0, 100, 2):
        cache.update([start, start + 1])
        assert all(k in cache for k in range(max(0, start - 3), start + 2))  # the last 5
        assert len(cache) <= 10
    assert 0 not in cache and 99 in cache


def test_a_batch_past_the_half_is_known_whole():
    cache = SeenCache(4)
    cache.update(range(7))
    assert all(k in cache for k in range(7))
    cache.update([7])
    assert 7 in cache and 6 in cache  # the big batch is the older generation now
    cache.update([8, 9])
    assert 6 not in cache and {7, 8, 9} <= {k for k in range(10) if k in cache}


def test_a_cache_of_one_knows_its_last_batch():
    cache = SeenCache(1)
    cache.update([b"a"])
    assert b"a" in cache
    cache.update([b"b"])
    assert b"b" in cache and b"a" not in cache
