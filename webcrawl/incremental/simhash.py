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
- it builds every shingle as a Python string, hashes every distinct one
  and joins the digests ``weight`` times over.  Here, when the text is in
  the Basic Multilingual Plane (nearly always), each shingle is packed into
  one 64-bit integer (4 x 16-bit code points) by numpy and counted with
  ``np.unique``; distinct shingles are hashed once per process (a bounded
  cache: pages of one site share most of their shingles) and the votes are
  one matrix product.  Other texts take the same steps on strings.

``benchmarks``: ``python -m tools.bench simhash`` compares both on real page texts.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter

import numpy as np

BITS = 64
_TOKEN = re.compile(r"[\w\u4e00-\u9fcc]+")
_WIDTH = 4
_CACHE_LIMIT = 1 << 19  # distinct string shingles kept hashed (~70 MB at the limit)
_KEY_CACHE_LIMIT = 1 << 21  # distinct packed shingles kept hashed (16 bytes each: 32 MB)
_digests: dict[str, bytes] = {}  # shingle -> feature hash
try:  # CPython's built-in MD5: twice as fast as OpenSSL's on 4-character inputs
    from _md5 import md5 as _md5
except ImportError:  # an interpreter built without it
    _md5 = hashlib.md5


def shingles(text: str) -> list[str]:
    """The package's features: 4-character shingles of the lower-cased word characters."""
    content = "".join(_TOKEN.findall(text.lower()))
    return [content[i : i + _WIDTH] for i in range(max(len(content) - _WIDTH + 1, 1))]


def simhash(text: str) -> int:
    """The 64-bit SimHash of ``text`` (== ``simhash.Simhash(text).value``)."""
    codes = np.frombuffer(text.lower().encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if len(codes) and int(codes.max()) <= 0xFFFF:  # every shingle packs into one 64-bit key
        kept = codes[_word_table()[codes]]  # what the tokeniser's regex keeps
        if len(kept) >= _WIDTH:
            c = kept.astype(np.uint64)
            keys = (c[:-3] << 48) | (c[1:-2] << 32) | (c[2:-1] << 16) | c[3:]
            distinct, counts = np.unique(keys, return_counts=True)
            return _vote(_key_cache.rows(distinct), counts)
    return simhash_of_features(Counter(shingles(text)))


@functools.cache
def _word_table() -> np.ndarray:
    """For each code point of the Basic Multilingual Plane, whether ``_TOKEN`` keeps it."""
    one = re.compile(_TOKEN.pattern[:-1])  # the character class, without "+"
    kept = (one.match(chr(c)) is not None for c in range(0x10000))
    return np.fromiter(kept, dtype=bool, count=0x10000)


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
    weights = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    return _vote(np.frombuffer(joined, dtype=np.uint8).reshape(-1, 8), weights)


class _KeyCache:
    """Feature hashes of shingles packed into 64-bit keys, looked up by numpy.

    A dict of a million Python ints costs ~0.2 us per lookup (memory-bound),
    which made lookups most of the work on a warm cache; here the bulk lives
    in a sorted key array searched with ``np.searchsorted`` (one call per
    page) and only keys new since the last merge go through a dict.  The
    recent keys are merged in when they reach a sixteenth of the sorted ones
    (amortised O(1) per key); past the limit the cache restarts from them.
    """

    def __init__(self, limit: int, min_merge: int = 4096) -> None:
        self.limit, self.min_merge = limit, min_merge
        self.clear()

    def clear(self) -> None:
        self.keys = np.empty(0, dtype=np.uint64)  # sorted
        self.digests = np.empty((0, 8), dtype=np.uint8)  # row i: hash of keys[i]
        self.recent: dict[int, bytes] = {}

    def __len__(self) -> int:
        return len(self.keys) + len(self.recent)

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """Digest rows (8 bytes each) of the shingles packed as the distinct ``keys``."""
        out = np.empty((len(keys), 8), dtype=np.uint8)
        rest = np.arange(len(keys))
        if len(self.keys):
            at = np.searchsorted(self.keys, keys)
            at[at == len(self.keys)] = 0
            hit = self.keys[at] == keys
            out[hit] = self.digests[at[hit]]
            rest = np.flatnonzero(~hit)
        if len(rest):
            recent, wanted = self.recent, keys[rest]
            found = list(map(recent.get, wanted.tolist()))
            missing = [j for j, digest in enumerate(found) if digest is None]
            if missing:  # unpack the keys into one string of 4-character shingles
                packed = wanted[missing]
                units = np.stack([(packed >> s) & 0xFFFF for s in (48, 32, 16, 0)], axis=1)
                text = units.astype(np.uint32).tobytes().decode("utf-32-le")
                md5 = _md5
                for n, (j, key) in enumerate(zip(missing, packed.tolist(), strict=True)):
                    shingle = text[4 * n : 4 * n + 4].encode("utf-8")
                    found[j] = recent[key] = md5(shingle).digest()[-8:]
            out[rest] = np.frombuffer(b"".join(found), dtype=np.uint8).reshape(-1, 8)
            if len(recent) > max(self.min_merge, len(self.keys) // 16):
                self._merge()
        return out

    def _merge(self) -> None:
        keys = np.fromiter(self.recent, dtype=np.uint64, count=len(self.recent))
        digests = np.frombuffer(b"".join(self.recent.values()), dtype=np.uint8).reshape(-1, 8)
        order = np.argsort(keys)
        keys, digests = keys[order], digests[order]
        if len(self) <= self.limit:  # one linear merge of two sorted runs
            at = np.searchsorted(self.keys, keys)
            keys = np.insert(self.keys, at, keys)
            digests = np.insert(self.digests, at, digests, axis=0)
        self.keys, self.digests, self.recent = keys, digests, {}


_key_cache = _KeyCache(_KEY_CACHE_LIMIT)


def clear_cache() -> None:
    """Forget the cached feature hashes (for benchmarks; the cache bounds itself)."""
    _digests.clear()
    _key_cache.clear()


# _BITS[v, b]: bit b (most significant first) of the byte value v
_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float64)
_COLUMN = np.arange(8, dtype=np.intp) * 256  # digest byte c counts in bins c*256 .. c*256+255


def _vote(digests: np.ndarray, weights: np.ndarray) -> int:
    """Bit ``b`` is set when the weights of the features with bit ``b`` in their hash
    (rows of ``digests``, 8 big-endian bytes each) exceed half the total weight.

    The weights are summed per value of each digest byte (a bincount), then per
    bit.  Not ``weights @ bits``: that is a BLAS call, and OpenBLAS's worker
    threads spin after it, costing the crawler about a quarter of a second core.
    """
    total = int(weights.sum())
    # float64 sums are exact up to 2**53: far beyond any page's shingle count
    per_byte = np.bincount(
        (digests + _COLUMN).ravel(),
        minlength=8 * 256,
        weights=np.repeat(weights.astype(np.float64), 8),
    )
    votes = np.einsum("cv,vb->cb", per_byte.reshape(8, 256), _BITS).ravel()  # no BLAS
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
