"""The Bloom-filter dupefilter: sizing, positions, and a crawl through it."""

import hashlib
import json
import subprocess
import sys

import pytest
from conftest import ROOT, crawl_env, read_items
from scrapy.settings import Settings

from webcrawl.frontier.bloom import BloomParams
from webcrawl.frontier.dupefilter import (
    EXACT_LIMIT,
    RedisBloomDupeFilter,
    RedisDupeFilter,
    bloom_params,
    bloom_size,
    dupefilter_class,
    shard_bloom_params,
)


def test_sizing_matches_the_formulas():
    params = BloomParams(1_000_000, 0.001)
    assert params.bits == 14_377_588  # 14.4 bits = 1.8 bytes per item
    assert params.hashes == 10
    assert BloomParams(1000, 0.01).hashes == 7


@pytest.mark.parametrize(
    ("capacity", "rate", "message"),
    [
        (0, 0.01, "capacity must be positive"),
        (10, 0, "between 0 and 1"),
        (10**12, 0.001, "more than one Redis string holds"),
    ],
)
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


@pytest.mark.parametrize(("capacity", "rate"), [(20_000, 0.01), (8_000, 0.05)])
def test_expected_false_positives_agree_with_a_filled_filter(capacity, rate):
    """Fill a filter with new URLs one by one, each tested first as the dupefilter does:
    the ones taken for seen are the false positives ``status`` estimates."""
    params = BloomParams(capacity, rate)
    bits = bytearray(-(-params.bits // 8))
    taken = false_positives = i = 0
    while taken < capacity:
        offsets = params.offsets(hashlib.sha1(b"new-%d" % i).digest())
        i += 1
        if all(bits[o >> 3] >> (o & 7) & 1 for o in offsets):
            false_positives += 1  # a new URL the filter says it has: never crawled
            continue
        for o in offsets:
            bits[o >> 3] |= 1 << (o & 7)
        taken += 1
    expected = params.expected_false_positives(capacity)
    # a count of rare events: within 4 standard deviations (Poisson) of the expectation
    assert abs(false_positives - expected) < 4 * expected**0.5 + 1, (false_positives, expected)
    assert false_positives < rate * capacity  # the rate is reached only at the end
    assert params.expected_false_positives(0) == 0
    assert params.false_positive_rate(capacity) == pytest.approx(rate, rel=0.05)


def settings(**values):
    return Settings(
        {
            "DUPEFILTER_CLASS": "webcrawl.frontier.dupefilter.RedisDupeFilter",
            "FRONTIER_EXPECTED_URLS": 0,
            "BLOOM_CAPACITY": 1000,
            "BLOOM_ERROR_RATE": 0.001,
            **values,
        }
    )


def test_the_expected_url_count_chooses_and_sizes_the_dupefilter():
    assert dupefilter_class(settings()) is RedisDupeFilter
    assert dupefilter_class(settings(FRONTIER_EXPECTED_URLS=EXACT_LIMIT)) is RedisDupeFilter
    beyond = settings(FRONTIER_EXPECTED_URLS=EXACT_LIMIT + 1)
    assert dupefilter_class(beyond) is RedisBloomDupeFilter
    assert bloom_size(beyond) == (EXACT_LIMIT + 1, 0.001)
    assert bloom_size(settings()) == (1000, 0.001)  # not said: BLOOM_CAPACITY
    # asked for by name below the limit: a Bloom filter, sized by the expected count
    named = settings(
        DUPEFILTER_CLASS="webcrawl.frontier.dupefilter.RedisBloomDupeFilter",
        FRONTIER_EXPECTED_URLS=5000,
    )
    assert dupefilter_class(named) is RedisBloomDupeFilter and bloom_size(named)[0] == 5000


@pytest.mark.parametrize(
    ("capacity", "shards", "budget", "per_shard"),
    [
        (10_000_000, 16, 100_000, 1_250_000 + 200_000),  # twice the share, two full hosts
        (10_000_000, 128, 100_000, 2 * 156_250),  # ... but at most twice the share again
        (10_000_000, 128, 0, 156_250),  # no budget: no host's size is known
        (1_000_000, 128, 100_000, 15_625 + 100_000),  # one full host beyond a small share
        (100_000, 16, 100_000, 100_000),  # at most the whole crawl
    ],
)
def test_each_shards_filter_holds_twice_its_share_and_two_hosts_at_their_budget(
    capacity, shards, budget, per_shard
):
    """One host puts at most its budget (FRONTIER_MAX_PAGES_PER_HOST) into its shard's
    filter: a shard's filter has room for two such hosts beyond twice its even share,
    but for one only beyond twice that share again (the filters hold at most four times
    the crawl's capacity, or twice it and a host a shard), so a crawl of 10 million
    URLs over 128 shards (an even share of 78 000) keeps its rate with two hosts at
    100 000 in a shard, and one of a million with one."""
    params = shard_bloom_params(capacity, 0.001, shards, budget)
    assert params.capacity == per_shard
    assert shards * per_shard <= max(4 * capacity, 2 * capacity + shards * budget) + shards
    two_hosts_and_the_share = 2 * budget + capacity // shards
    if budget and capacity >= 10_000_000:
        assert params.false_positive_rate(two_hosts_and_the_share) <= 0.001 / 2


def test_a_bloom_filter_too_large_for_redis_names_the_settings():
    values = {"FRONTIER_SHARDS": 2, "FRONTIER_MAX_PAGES_PER_HOST": 100_000}
    capacity, params = bloom_params(settings(FRONTIER_EXPECTED_URLS=2 * 10**8, **values))
    assert (capacity, params.capacity) == (2 * 10**8, 2 * 10**8)  # 2.9 of 4.3 billion bits
    too_many = settings(FRONTIER_EXPECTED_URLS=10**9, **values)
    with pytest.raises(ValueError, match=r"BLOOM_CAPACITY.*FRONTIER_SHARDS 2.*than one Redis"):
        bloom_params(too_many)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"FRONTIER_EXPECTED_URLS": -1}, "FRONTIER_EXPECTED_URLS must be >= 0"),
        ({"FRONTIER_EXPECTED_URLS": "many"}, "FRONTIER_EXPECTED_URLS must be an integer"),
        (
            {"FRONTIER_EXPECTED_URLS": 10, "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"},
            "FRONTIER_EXPECTED_URLS .10. chooses .* DUPEFILTER_CLASS is 'scrapy.dupefilters",
        ),
        (
            {"DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter"},
            "DUPEFILTER_CLASS must be webcrawl.frontier.dupefilter.RedisDupeFilter",
        ),
    ],
)
def test_bad_dupefilter_settings_fail_with_their_name(values, message):
    with pytest.raises(ValueError, match=message):
        dupefilter_class(settings(**values))


def status(data, *extra):
    cmd = [
        sys.executable,
        "-m",
        "webcrawl.cli",
        "status",
        "--json",
        "-s",
        f"WEBCRAWL_DATA_DIR={data}",
        *extra,
    ]
    result = subprocess.run(
        cmd, cwd=ROOT, env=crawl_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.e2e
def test_a_crawl_with_the_bloom_dupefilter(demo, tmp_path, crawls):
    """A crawl chosen a Bloom filter by its expected size: every page once; status reads the
    filter's size as the crawl recorded it (not its own settings) and estimates the URLs
    lost to false positives; a worker with the exact set is refused, naming both."""
    data = tmp_path / "data"
    bloom = (
        "DUPEFILTER_CLASS=webcrawl.frontier.dupefilter.RedisBloomDupeFilter",
        "FRONTIER_EXPECTED_URLS=100000",
    )
    result = crawls.run(demo.seeds, data, *bloom, items=tmp_path / "items.jsonl")
    assert result.returncode == 0, result.stderr[-2000:]
    urls = [i["url"] for i in read_items(tmp_path / "items.jsonl")]
    assert sorted(urls) == sorted(demo.web.reachable())
    assert max(demo.page_fetches().values()) == 1
    state = status(data, "-s", "BLOOM_CAPACITY=5")  # this command's settings do not matter
    filt = state["dupefilter"]
    assert (filt["kind"], filt["capacity"], filt["error_rate"]) == ("bloom", 100_000, 0.001)
    assert filt["shard_capacity"] == 100_000  # (twice the share and a full host: all of it)
    # estimated from its bits; the crawl also saw URLs it did not store (links to 404s)
    assert len(urls) <= state["seen"] <= 1.2 * len(urls)
    assert filt["false_positives"] == 0  # a few hundred URLs in a filter for 100 000
    assert 0 <= filt["false_positive_rate_now"] < 1e-6
    again = crawls.run(demo.seeds, data)  # the default: the exact set
    assert again.returncode != 0
    assert (
        "was created with a Bloom filter for 100000 URLs at 0.001 false positives (100000 "
        "URLs a shard) as its dupefilter, this worker has an exact set"
    ) in again.stderr


def _prepared_filter(client, shards=4):
    from webcrawl.frontier.keys import CrawlKeys

    filt = RedisBloomDupeFilter(None, shard_bloom_params(100_000, 0.001, shards, 0))
    filt.attach(client, CrawlKeys("prepared", shards))
    return filt


def check_prepare_allocates_each_filter_once_and_keeps_its_bits(client):
    """prepare() makes each shard's bitmap at its full length in one allocation (its
    memory is its length, not twice it), sends a byte a shard, and leaves a filter that
    exists (another worker's, with bits set) as it is."""
    filt = _prepared_filter(client)
    client.setbit(filt.key_for(0), 7, 1)  # another worker's URL
    received = client.info("stats")["total_net_input_bytes"]
    filt.prepare()
    filt.prepare()  # every worker does, at start
    length = -(-filt.params.bits // 8)
    sent = client.info("stats")["total_net_input_bytes"] - received
    assert sent < 2 * 4 * 300 < length  # (the script and the key name, a shard)
    for shard in range(4):
        key = filt.key_for(shard)
        assert client.strlen(key) == (length if shard else 1)  # shard 0 kept as it was
        assert client.memory_usage(key) < length * 1.01 + 100
    assert client.getbit(filt.key_for(0), 7) == 1


def test_prepare_allocates_each_filter_once_and_keeps_its_bits(redis_client):
    check_prepare_allocates_each_filter_once_and_keeps_its_bits(redis_client)
