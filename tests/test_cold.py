"""Cold frontier keys: they sort as the host queue pops, and one host's prefix is its own."""

import random

import pytest

from webcrawl.frontier.cold import PRIORITY_LIMIT, cold_key, host_prefix, parse_cold_key


def test_keys_sort_by_priority_highest_first_then_arrival():
    rng = random.Random(7)
    queued = [(rng.randint(-1000, 1000), seq) for seq in rng.sample(range(10**6), 500)]
    host = "www.example.org:8080"
    keys = [cold_key("c", 5, host, prio, seq, claim="7") for prio, seq in queued]
    assert [parse_cold_key(k)[3:5] for k in sorted(keys)] == sorted(
        queued, key=lambda ps: (-ps[0], ps[1])
    )
    assert parse_cold_key(keys[0]) == ("c", 5, "www.example.org:8080", *queued[0], "7")
    ends = ((PRIORITY_LIMIT - 1, 0), (0, 10**16 - 1), (-PRIORITY_LIMIT + 1, 3))
    extremes = [cold_key("c", 0, "h", p, s, claim="1") for p, s in ends]
    assert sorted(extremes) == extremes


def test_a_host_prefix_covers_its_own_keys_only():
    keys = [
        cold_key("c", s, h, 0, 1, claim="1")
        for s in (1, 2)
        for h in ("a.example", "a.example:81", "ab")
    ]
    assert [k for k in keys if k.startswith(host_prefix("c", 1, "a.example"))] == [
        cold_key("c", 1, "a.example", 0, 1, claim="1")
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("c", 0, "a/b", 0, 1), "not a host key"),
        (("c", 0, "", 0, 1), "not a host key"),
        (("c", 70000, "a", 0, 1), "shard 70000 out of range"),
        (("c", 0, "a", PRIORITY_LIMIT, 1), "priority .* out of range"),
        (("c", 0, "a", 0, -1), "sequence number -1 out of range"),
        (("a/b", 0, "a", 0, 1), "not a crawl name"),
        (("c", 0, "a", 0, 1, "x/y"), "not a claim"),
        (("c", 0, "a", 0, 1, ""), "not a claim"),
    ],
)
def test_bad_keys_are_refused(args, message):
    *args, claim = args if len(args) == 6 else (*args, "1")
    with pytest.raises(ValueError, match=message):
        cold_key(*args, claim=claim)
