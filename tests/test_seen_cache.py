"""The worker's bounded cache of keys known to be in the crawl's seen set."""

from webcrawl.frontier.known import SeenCache


def test_the_cache_knows_what_it_was_told_and_forgets_the_oldest():
    cache = SeenCache(10)
    for k in range(0, 100, 2):
        cache.update([k, k + 1])
        assert k in cache and k + 1 in cache
        assert len(cache) <= 12  # its size, and the last batch met again
    assert all(k not in cache for k in range(80))


def test_a_batch_past_the_half_is_known_whole():
    cache = SeenCache(4)
    cache.update(range(7))
    assert all(k in cache for k in range(7))


def test_a_cache_of_one_knows_its_last_batch():
    cache = SeenCache(1)
    cache.update([b"a"])
    cache.update([b"b"])
    assert b"b" in cache


def test_what_is_met_again_stays_known_however_much_else_comes():
    cache = SeenCache(10)
    cache.update(["nav"])
    for k in range(100):
        cache.update([k])
        assert "nav" in cache  # met on every page: never forgotten
    assert 0 not in cache


def test_a_key_met_again_is_held_once():
    """A key found in the older generation moves to the newer: the cache holds it once,
    so that it never holds more than its size (and a batch)."""
    cache = SeenCache(10)
    cache.update(range(5))  # the newer is full: it turns older
    assert len(cache) == 5
    assert all(k in cache for k in range(4))  # met again: moved, not copied
    assert len(cache) == 5
    cache.update(range(100, 104))  # the newer fills with what came since
    assert 4 not in cache and all(k in cache for k in range(4))
    assert len(cache) <= 10


def test_a_key_told_again_is_held_once():
    cache = SeenCache(4)
    cache.update([0, 1])  # the newer is full: it turns older
    cache.update([0])
    assert len(cache) == 2 and 0 in cache and 1 in cache
