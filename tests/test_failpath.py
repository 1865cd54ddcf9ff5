"""The failed-path rules of seed 000, pure: no Scrapy, no network, an injected clock."""

import random

import pytest

from webcrawl.failpath import (
    FAIL,
    OK,
    ROBOTS,
    SITE,
    CountsCache,
    FailPathParams,
    FailPathPolicy,
    ProbeRound,
    level_contains,
    level_depth,
    parent_level,
    path_levels,
    probe_rounds,
    site_of,
)

P = FailPathParams()  # the paper's first set: 15 s, 80 s, 4, 7200 s, 3
policy = FailPathPolicy(P)


class Table:
    """A failpaths row with the store's atomic add (a count at or below 0 is removed in
    the same step), recording every write."""

    def __init__(self, counts=None):
        self.counts = dict(counts or {})
        self.writes = []

    def add(self, column, delta):
        value = self.counts.get(column, 0) + delta
        self.writes.append((column, delta))
        if value <= 0:
            self.counts.pop(column, None)
            return 0
        self.counts[column] = value
        return value


# -- path levels ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "levels"),
    [
        ("http://www.aaa.com/bbb/ccc/d.html", [SITE, "/bbb", "/bbb/ccc/"]),  # the paper's example
        ("http://www.aaa.com/bbb/ccc/", [SITE, "/bbb", "/bbb/ccc/"]),
        ("http://www.aaa.com/bbb/", [SITE, "/bbb/"]),
        ("http://www.aaa.com/bbb", [SITE, "/"]),  # a file at the root
        ("http://www.aaa.com/", [SITE, "/"]),
        ("http://www.aaa.com", [SITE, "/"]),
        ("http://h/a/b/c/d.html?x=/y/z", [SITE, "/a", "/a/b", "/a/b/c/"]),
    ],
)
def test_path_levels(url, levels):
    assert path_levels(url) == levels


def test_subtree_and_directory_are_different_levels():
    """/bbb is everything under bbb; /bbb/ only the files directly in it."""
    assert level_contains("/bbb", "http://h/bbb/x.html")
    assert level_contains("/bbb", "http://h/bbb/ccc/x.html")
    assert level_contains("/bbb/", "http://h/bbb/x.html")
    assert not level_contains("/bbb/", "http://h/bbb/ccc/x.html")
    assert not level_contains("/bbb", "http://h/bbbb/x.html")
    assert not level_contains("/bbb", "http://h/bbb")  # the file bbb sits in the root /
    assert level_contains("/", "http://h/bbb") and level_contains("/", "http://h/")
    assert not level_contains("/", "http://h/bbb/x.html")
    assert level_contains(SITE, "http://h/anything/at/all")


def test_parents_climb_to_the_site():
    assert parent_level("/a/b/c/") == "/a/b"
    assert parent_level("/a/b") == "/a"
    assert parent_level("/a") == SITE
    assert parent_level("/a/") == SITE
    assert parent_level("/") == SITE
    assert parent_level(SITE) is None
    for url in ("http://h/a/b/c/d.html", "http://h/x.html", "http://h/a/x"):
        levels = path_levels(url)
        for child, parent in zip(levels[1:], levels, strict=False):
            assert parent_level(child) == parent


def test_levels_sort_highest_first():
    assert level_depth(SITE) < level_depth("/a") < level_depth("/a/b") <= level_depth("/a/b/")


def test_site_row_is_the_reversed_origin():
    assert site_of("http://www.aaa.com/bbb/ccc/d.html") == "com.aaa.www:http"
    assert site_of("https://Example.COM:8443/x") == "com.example:https:8443"


# -- filter and wait -----------------------------------------------------------


def test_filter_drops_only_over_the_threshold():
    levels = path_levels("http://h/a/b/c.html")
    assert policy.blocking_level(levels, {"/a/b/": 4}) is None  # at the threshold: not yet
    assert policy.blocking_level(levels, {"/a/b/": 5}) == "/a/b/"
    assert policy.blocking_level(levels, {"/a": 5, "/a/b/": 9}) == "/a"  # the highest is named
    assert policy.blocking_level(levels, {SITE: 5}) == SITE
    assert policy.blocking_level(levels, {"/x": 99, "/a/b": 99}) is None  # not this URL's levels
    assert policy.blocking_level(levels, {OK: 99, FAIL: 99}) is None


def test_elastic_wait_follows_the_lowest_recorded_level():
    levels = path_levels("http://h/a/b/c.html")  # *, /a, /a/b/
    assert policy.wait(levels, {}) == 15.0
    assert policy.wait(levels, {"/a/b/": 1}) == 15 + 65 * 1 / 4
    assert policy.wait(levels, {"/a/b/": 4}) == 80.0
    assert policy.wait(levels, {"/a": 2}) == 15 + 65 * 2 / 4  # lowest *recorded* level
    assert policy.wait(levels, {"/a": 3, "/a/b/": 1}) == 15 + 65 / 4
    assert policy.wait(levels, {"/a/b/": 40}) == 80.0  # never past the longest wait
    other = FailPathPolicy(FailPathParams(20, 100, 5, 3600, 3))
    assert other.wait(levels, {"/a/b/": 2}) == 20 + 80 * 2 / 5


def test_probe_wait_is_twice_the_shortest_within_the_longest():
    assert policy.probe_wait() == 30.0
    assert FailPathPolicy(FailPathParams(50, 80, 4, 10, 3)).probe_wait() == 80.0


# -- failures and successes ---------------------------------------------------------


def test_failure_increments_the_lowest_level_and_creates_it():
    table = Table()
    assert policy.record_failure(path_levels("http://h/a/b/c.html"), table.add) == {"/a/b/": 1}
    assert table.counts == {"/a/b/": 1}


def test_reaching_the_threshold_increments_the_parent_once():
    levels = path_levels("http://h/a/b/c.html")
    table = Table({"/a/b/": 3})
    assert policy.record_failure(levels, table.add) == {"/a/b/": 4, "/a": 1}
    assert policy.record_failure(levels, table.add) == {"/a/b/": 5}  # past it: parent untouched
    assert table.counts == {"/a/b/": 5, "/a": 1}


def test_the_parent_cascades_when_it_reaches_the_threshold_too():
    """Our choice, documented in webcrawl/failpath/rules.py: the rule applies to the parent's own
    increment, so a site-wide outage climbs to the site level."""
    table = Table({"/a/b/": 3, "/a": 3, SITE: 3})
    written = policy.record_failure(path_levels("http://h/a/b/c.html"), table.add)
    assert written == {"/a/b/": 4, "/a": 4, SITE: 4}


def test_concurrent_failures_propagate_exactly_once():
    """Two workers fail at once from 3: the atomic add returns 4 to one and 5 to the other."""
    table = Table({"/a/b/": 3})
    levels = path_levels("http://h/a/b/c.html")
    policy.record_failure(levels, table.add)
    policy.record_failure(levels, table.add)
    assert table.counts == {"/a/b/": 5, "/a": 1}


def test_a_threshold_of_one_climbs_on_the_first_failure():
    one = FailPathPolicy(FailPathParams(1, 2, 1, 10, 1))
    table = Table()
    assert one.record_failure(path_levels("http://h/a/b.html"), table.add) == {"/a/": 1, SITE: 1}


def test_success_subtracts_the_scale_and_deletes_at_zero():
    levels = path_levels("http://h/a/b.html")  # *, /a/
    table = Table({"/a/": 7})
    assert policy.record_success(levels, table.counts, table.add) == {"/a/": 4}
    assert policy.record_success(levels, table.counts, table.add) == {"/a/": 1}
    assert policy.record_success(levels, table.counts, table.add) == {"/a/": 0}
    assert "/a/" not in table.counts  # below zero: deleted
    table = Table({"/a/": 3})
    policy.record_success(levels, table.counts, table.add)
    assert table.counts == {}  # exactly zero: deleted too
    assert table.writes == [("/a/", -3)]  # one atomic write: subtract and delete


def test_success_on_a_clean_path_writes_nothing():
    table = Table({SITE: 2, "/b/": 3})
    assert policy.record_success(path_levels("http://h/a/b.html"), table.counts, table.add) == {}
    assert table.writes == []  # only the lowest level is decremented, and it has no record


def test_success_lowers_only_the_urls_own_lowest_level_as_the_paper_says():
    """Seed 000: "if the link is fetched within the set time and the failure count of its
    lowest path level is not 0, subtract fetch.success.scale from that count; at or below
    0, delete the column".  Higher levels are left to the failures that raise them and to
    the re-probe that clears them; a success under a level with a record of its own but
    none on the URL's directory changes nothing (though that level sets its wait)."""
    levels = path_levels("http://h/a/b/c.html")  # *, /a, /a/b/
    table = Table({SITE: 5, "/a": 4, "/a/b/": 4})
    assert policy.record_success(levels, table.counts, table.add) == {"/a/b/": 1}
    assert policy.record_success(levels, table.counts, table.add) == {"/a/b/": 0}
    assert table.counts == {SITE: 5, "/a": 4}
    assert policy.record_success(levels, table.counts, table.add) == {}
    assert policy.wait(levels, table.counts) == 80.0  # the wait follows /a
    assert table.writes == [("/a/b/", -3), ("/a/b/", -3)]
    # a failure after successes climbs again from the directory, as before
    assert policy.record_failure(levels, table.add) == {"/a/b/": 1}


def test_site_given_up_below_the_share_of_working_links():
    assert not policy.site_given_up({})
    assert not policy.site_given_up({FAIL: 4})  # too few failures to judge
    assert policy.site_given_up({FAIL: 5})  # nothing works
    # scale 3: given up below 1/4 working
    assert policy.site_given_up({OK: 2, FAIL: 7})  # 22 %
    assert not policy.site_given_up({OK: 3, FAIL: 9})  # exactly 25 %
    assert not policy.site_given_up({OK: 100, FAIL: 50})


def test_the_share_rule_matches_the_counter_drift():
    """The paper's tolerance: with success -scale and failure +1, a directory's count only
    climbs (on average) when fewer than 1/(1+scale) of its links work."""
    rng = random.Random(7)
    for share, climbs in ((0.15, True), (0.40, False)):
        table, levels = Table(), path_levels("http://h/a/x.html")
        for _ in range(400):
            if rng.random() < share:
                policy.record_success(levels, table.counts, table.add)
            else:
                policy.record_failure(levels, table.add)
        assert (table.counts.get("/a/", 0) > P.heighten) is climbs


def test_params_are_checked():
    for bad in (
        {"min_delay": 0},
        {"min_delay": 90},
        {"heighten": 0},
        {"probe_interval": 0},
        {"success_scale": 0},
    ):
        with pytest.raises(ValueError, match="FAILPATH_"):
            FailPathParams(**bad)


# -- the re-probe -------------------------------------------------------------------


def test_probe_levels_highest_first_and_only_over_the_threshold():
    counts = {"/a/b/": 9, SITE: 5, "/a": 6, "/c/": 4, OK: 50, FAIL: 80}
    assert policy.over(counts) == [SITE, "/a", "/a/b/"]
    rounds = probe_rounds(policy, [("s1", counts), ("s2", {"/x/": 2}), ("s3", {})])
    assert [(r.site, r.levels, r.size) for r in rounds] == [("s1", [SITE, "/a", "/a/b/"], 4)]


def links_of(urls):
    return lambda level: [u for u in urls if level_contains(level, u)]


def test_probe_sample_shrinks_by_one_per_level_without_success():
    urls = [f"http://h/a/b/{i}.html" for i in range(10)]
    probe = ProbeRound("s", [SITE, "/a", "/a/b/"], size=4)
    rng = random.Random(1)
    sizes = []
    while (sample := probe.next_sample(links_of(urls), rng)) is not None:
        level, picked = sample
        sizes.append((level, len(picked)))
        assert len(set(picked)) == len(picked) and set(picked) <= set(urls)
        assert not probe.report(level, 0)
    assert sizes == [(SITE, 4), ("/a", 3), ("/a/b/", 2)]
    assert probe.recovered == []


def test_probe_success_recovers_the_level_and_keeps_the_size():
    urls = [f"http://h/a/b/{i}.html" for i in range(10)]
    probe = ProbeRound("s", [SITE, "/a", "/a/b/"], size=4)
    rng = random.Random(1)
    level, _ = probe.next_sample(links_of(urls), rng)
    assert probe.report(level, 1)  # the site answers again
    level, picked = probe.next_sample(links_of(urls), rng)
    assert (level, len(picked)) == ("/a", 4)  # next level, same size
    probe.report(level, 0)
    level, picked = probe.next_sample(links_of(urls), rng)
    assert (level, len(picked)) == ("/a/b/", 3)
    probe.report(level, 2)
    assert probe.next_sample(links_of(urls), rng) is None
    assert probe.recovered == [SITE, "/a/b/"]


def test_probe_stops_when_the_sample_reaches_zero():
    urls = [f"http://h/{d}/x.html" for d in "abcdef"]
    levels = [f"/{d}/" for d in "abcdef"]
    probe = ProbeRound("s", levels, size=2)
    seen = []
    while (sample := probe.next_sample(links_of(urls), random.Random(0))) is not None:
        seen.append(sample[0])
        probe.report(sample[0], 0)
    assert seen == ["/a/", "/b/"]  # sizes 2, 1, then 0: over


def test_probe_skips_levels_with_no_remembered_links():
    probe = ProbeRound("s", ["/a/", "/b/"], size=4)
    sample = probe.next_sample(links_of(["http://h/b/1.html"]), random.Random(0))
    assert sample == ("/b/", ["http://h/b/1.html"])  # /a/ had nothing to sample: no size used
    with pytest.raises(ValueError, match="/b/"):
        probe.report("/a/", 1)


# -- the per-worker cache ---------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_cache_serves_fresh_then_stale_rows():
    clock = Clock()
    cache = CountsCache(ttl=5, clock=clock)
    assert cache.get("s") == (None, True)  # never read: the caller must read the store
    cache.put("s", {"/a/": 2})
    assert cache.get("s") == ({"/a/": 2}, False)
    clock.now += 5
    assert cache.get("s") == ({"/a/": 2}, False)
    clock.now += 0.1
    assert cache.get("s") == ({"/a/": 2}, True)  # stale: still served, refresh due


def test_cache_merges_writes_without_refreshing_the_age():
    clock = Clock()
    cache = CountsCache(ttl=5, clock=clock)
    cache.put("s", {"/a/": 2, "/b/": 1})
    clock.now += 6
    cache.update("s", {"/a/": 3, "/b/": 0, FAIL: 1})
    assert cache.get("s") == ({"/a/": 3, FAIL: 1}, True)  # /b/ deleted; still stale
    cache.drop("s")
    assert cache.get("s") == (None, True)
    cache.update("t", {"/x/": 1})  # a write before any read
    assert cache.get("t") == ({"/x/": 1}, False)


# -- a site whose robots.txt gets no answer -------------------------------------------


def test_an_unanswered_robots_txt_makes_the_site_dead_and_keeps_since_when():
    table = Table({"/a/": 2, OK: 7})
    written = policy.record_unanswered(table.counts, table.add, 1_800_000_000)
    assert written == {FAIL: 1, SITE: P.heighten + 1, ROBOTS: 1_800_000_000}
    assert policy.blocking_level([SITE, "/a/"], table.counts) == SITE
    assert policy.over(table.counts) == [SITE]  # its tallies are no levels to re-probe
    # again, from a stale read (another worker recorded it first): the first time stays,
    # and the site level is not raised twice
    stale = {}
    again = policy.record_unanswered(stale, table.add, 1_800_000_060)
    assert again[ROBOTS] == 1_800_000_000 and table.counts[ROBOTS] == 1_800_000_000
    assert table.counts[SITE] > P.heighten and table.counts[FAIL] == 2
    # from a fresh read: nothing but the failure is written
    table.writes.clear()
    policy.record_unanswered(dict(table.counts), table.add, 1_800_000_120)
    assert table.writes == [(FAIL, 1)]
