"""The Bloom-filter dupefilter: sizing, positions, and a crawl through it."""

import hashlib

import pytest
from conftest import read_items, run_crawl

from webcrawl.frontier.bloom import BloomParams


def test_sizing_matches_the_formulas():
    params = BloomParams(1_000_000, 0.001)
    assert params.bits == 14_377_588  # 14.4 bits = 1.8 bytes per item
    assert params.hashes == 10
    assert BloomParams(1000, 0.01).hashes == 7


@pytest.mark.parametrize(
    ("capacity", "rate", "message"),
    [(0, 0.01, "capacity must be positive"), (10, 0, "between 0 and 1"),
     (10**12, 0.001, "more than one Redis string holds")],
)  # fmt: skip
def test_bad_parameters(capacity, rate, message):
    with pytest.raises(ValueError, match=message):
        BloomParams(capacity, rate)


def test_offsets_are_stable_distinct_and_in_range():
    params = BloomParams(10_000, 0.001)
    fp = hashlib.sha1(b"http://example.com/").digest()
    offsets = params.offsets(fp)
    assert offsets == params.offsets(fp)
    assert len(set(offsets)) == params.hashes
    assert all(0 <= o < params.bits for o in offsets)


def test_false_positive_rate_and_count_estimate(redis_client):
    """Fill a filter to capacity in a real Redis and measure what it claims."""
    params = BloomParams(20_000, 0.01)
    key = "t:bloom"
    pipe = redis_client.pipeline(transaction=False)
    for i in range(params.capacity):
        for offset in params.offsets(hashlib.sha1(f"in-{i}".encode()).digest()):
            pipe.setbit(key, offset, 1)
    pipe.execute()
    false_positives = 0
    trials = 20_000
    for i in range(trials):
        offsets = params.offsets(hashlib.sha1(f"out-{i}".encode()).digest())
        pipe = redis_client.pipeline(transaction=False)
        for offset in offsets:
            pipe.getbit(key, offset)
        false_positives += all(pipe.execute())
    assert false_positives / trials < 0.015  # 1 % configured
    estimate = params.estimated_count(redis_client.bitcount(key))
    assert abs(estimate - params.capacity) / params.capacity < 0.02
    # m / 8 bytes (1.2 per item at 1 %), plus Redis's allocation slack on small strings
    assert redis_client.memory_usage(key) < params.bits / 8 * 1.35


def test_a_crawl_with_the_bloom_dupefilter(demo, tmp_path):
    result = run_crawl(
        demo.seeds, tmp_path / "data",
        "DUPEFILTER_CLASS=webcrawl.frontier.dupefilter.RedisBloomDupeFilter",
        "BLOOM_CAPACITY=100000", items=tmp_path / "items.jsonl",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    urls = [i["url"] for i in read_items(tmp_path / "items.jsonl")]
    assert sorted(urls) == sorted(demo.web.reachable())
    assert max(demo.page_fetches().values()) == 1
