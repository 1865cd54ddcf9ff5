"""64-bit SimHash fingerprints, bit-identical to the ``simhash`` package's ``Simhash(text)``.

The package (1e0n/simhash 2.1.2) lower-cases the text, keeps the characters
matching ``[\\w\\u4e00-\\u9fcc]+`` (joined with nothing between them), takes
every 4-character shingle as a feature weighted by its count, hashes each
feature with MD5 (the digest's last 8 bytes, big-endian) and sets bit ``b``
of the fingerprint when the weighted votes for ``b`` exceed half the total
weight.  Two of its costs and one of its bugs are why we compute it
ourselves:

- under numpy 2 it raises ``OverflowError`` when a feature occurs 256 times
  or more (``uint8 array * 256``): long pages with repeated boilerplate
  crash it.  Here votes are summed in int64, so any count works (the
  result is what the package computes under numpy 1 for counts < 256);
- it hashes every distinct feature in Python and joins the digests
  ``weight`` times over.  Here distinct shingles are hashed once per
  process (a bounded cache: pages of one site share most of their
  shingles) and the votes are one matrix product in numpy.

``benchmarks``: ``webcrawl bench simhash`` compares both on real page texts.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

import numpy as np

BITS = 64
_TOKEN = re.compile(r"[\w\u4e00-\u9fcc]+")
_WIDTH = 4
_CACHE_LIMIT = 1 << 19  # distinct shingles kept hashed (~70 MB at the limit)
_digests: dict[str, bytes] = {}
_md5 = hashlib.md5


def shingles(text: str) -> list[str]:
    """The package's features: 4-character shingles of the lower-cased word characters."""
    content = "".join(_TOKEN.findall(text.lower()))
    return [content[i : i + _WIDTH] for i in range(max(len(content) - _WIDTH + 1, 1))]


def simhash(text: str) -> int:
    """The 64-bit SimHash of ``text`` (== ``simhash.Simhash(text).value``)."""
    counts = Counter(shingles(text))
    return simhash_of_features(counts)


def simhash_of_features(counts: Counter[str] | dict[str, int]) -> int:
    """The SimHash of features with integer weights (the package's dict form)."""
    digests = _digests
    missing = [f for f in counts if f not in digests]
    if missing:
        if len(digests) + len(missing) > _CACHE_LIMIT:
            digests.clear()
        for feature in missing:
            digests[feature] = _md5(feature.encode("utf-8")).digest()[-8:]
    joined = b"".join([digests[f] for f in counts])
    bits = np.unpackbits(np.frombuffer(joined, dtype=np.uint8)).reshape(-1, BITS)
    weights = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    total = int(weights.sum())
    if weights.max(initial=0) == 1:
        votes = bits.sum(axis=0, dtype=np.int64)
    else:
        votes = weights @ bits.astype(np.int64)
    return int.from_bytes(np.packbits(votes > total / 2).tobytes(), "big")


def distance(a: int, b: int) -> int:
    """Hamming distance of two 64-bit fingerprints."""
    return ((a ^ b) & 0xFFFF_FFFF_FFFF_FFFF).bit_count()


def to_signed(value: int) -> int:
    """A fingerprint as a signed 64-bit integer (for stores with signed integer columns)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def from_signed(value: int) -> int:
    """Inverse of :func:`to_signed`."""
    return value + (1 << 64) if value < 0 else value
