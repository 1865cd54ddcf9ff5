"""Our SimHash against the simhash package, and where the package breaks."""

import hashlib
import random
import re

import numpy as np
import pytest
import simhash as package

from webcrawl.incremental.simhash import distance, from_signed, shingles, simhash, to_signed

ENGLISH = (
    "The quick brown fox jumps over the lazy dog. Scrapy is a fast high-level web crawling "
    "and web scraping framework, used to crawl websites and extract structured data."
)
CHINESE = (
    "网络爬虫是一种按照一定的规则\uff0c自动地抓取万维网信息的程序或者脚本。"
    "它们被广泛用于互联网搜索引擎。"
)
MIXED = "Ünïcødé İstanbul STRASSE straße — café naïve 東京 2026-11-22 ½ ⅓ ①②"
# beyond the Basic Multilingual Plane (mathematical letters, CJK extension B, emoji):
# these take the string path, not the packed 64-bit shingle keys
ASTRAL = (
    "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522 "  # fraktur
    "\U0001d41b\U0001d428\U0001d425\U0001d41d text "  # bold
    "\U00020000\U00020001\U00020002 and \U0001f600 emoji"  # CJK extension B, an emoji
)


def texts():
    rng = random.Random(7)
    words = (ENGLISH + " " + CHINESE + " " + MIXED).split() + list(CHINESE)
    yield from [
        "",
        "a",
        "ab",
        "abc",
        "abcd",
        "abcde",
        "   ",
        "!!!",
        "A B C D",
        ENGLISH,
        CHINESE,
        MIXED,
        ASTRAL,
        ENGLISH + ASTRAL,
        "𠀀",
        ENGLISH.upper(),
        "x" * 255,
    ]
    for n in (3, 10, 50, 300, 2000):
        for _ in range(8):
            yield " ".join(rng.choice(words) for _ in range(n))


@pytest.mark.parametrize("text", list(texts()))
def test_bit_identical_to_the_package(text):
    assert simhash(text) == package.Simhash(text).value


def reference(text):
    """The package's definition, written out plainly (any weight)."""
    content = "".join(re.findall(r"[\w\u4e00-\u9fcc]+", text.lower()))
    feats = [content[i : i + 4] for i in range(max(len(content) - 3, 1))]
    votes = [0] * 64
    for f in feats:
        h = int.from_bytes(hashlib.md5(f.encode()).digest()[-8:], "big")
        for b in range(64):
            votes[b] += (h >> b) & 1
    return sum(1 << b for b in range(64) if votes[b] > len(feats) / 2)


def test_cached_feature_hashes_stay_right_across_pages_and_cache_resets(monkeypatch):
    import webcrawl.incremental.simhash as module

    rng = random.Random(11)
    words = (ENGLISH + " " + MIXED).split()
    pages = [" ".join(rng.choice(words) for _ in range(200)) for _ in range(20)]
    expected = [package.Simhash(p).value for p in pages]
    # a small cache: merges of recent keys into the sorted array, and restarts
    monkeypatch.setattr(module, "_key_cache", module._KeyCache(9000, min_merge=500))
    assert [simhash(p) for p in pages] == expected
    assert len(module._key_cache.keys) > 0  # merged at least once
    assert [simhash(p) for p in pages] == expected  # now from the cache
    assert len(module._key_cache) <= 9000 + 500 + 1200


def test_features_repeated_256_times_or_more():
    # the package multiplies a uint8 bit array by the weight: numpy 2 raises
    text = "boilerplate " * 300 + ENGLISH
    if int(np.__version__.split(".")[0]) >= 2:
        with pytest.raises(OverflowError):
            package.Simhash(text)
    assert simhash(text) == reference(text)
    assert simhash("a" * 5000) == reference("a" * 5000)


def test_shingles_match_the_package_tokeniser():
    assert shingles("Hello, World!") == package.Simhash("")._tokenize("Hello, World!")
    assert shingles(CHINESE) == package.Simhash("")._tokenize(CHINESE)


def test_distance_and_signed_round_trip():
    a, b = simhash(ENGLISH), simhash(ENGLISH + " One more sentence about foxes.")
    assert distance(a, a) == 0
    assert distance(a, b) == package.Simhash(ENGLISH).distance(
        package.Simhash(ENGLISH + " One more sentence about foxes.")
    )
    assert distance(0, (1 << 64) - 1) == 64
    for value in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, a):
        signed = to_signed(value)
        assert -(1 << 63) <= signed < 1 << 63
        assert from_signed(signed) == value
