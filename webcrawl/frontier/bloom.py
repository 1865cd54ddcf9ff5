"""Bloom filter sizing and bit positions, for a dupefilter kept in a plain Redis string.

For ``capacity`` items at false-positive rate ``p`` a Bloom filter needs
``m = -capacity * ln(p) / ln(2)**2`` bits and ``k = m / capacity * ln(2)``
hash functions: at p = 0.1 % that is 14.4 bits (1.8 bytes) per item and
k = 10, against ~67 bytes per URL for an exact set of fingerprints.  The k
positions come from one 20-byte request fingerprint by double hashing
(Kirsch and Mitzenmacher): ``h1 + i * h2 mod m``.  One Redis string holds at
most 2**32 bits (512 MiB): about 300 million URLs at 0.1 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_BITS = 2**32


@dataclass(frozen=True)
class BloomParams:
    capacity: int
    error_rate: float

    def __post_init__(self) -> None:
        if self.capacity <= 0:
            raise ValueError(f"BLOOM capacity must be positive, got {self.capacity}")
        if not 0 < self.error_rate < 1:
            raise ValueError(f"BLOOM error rate must be between 0 and 1, got {self.error_rate}")
        if self.bits > MAX_BITS:
            raise ValueError(
                f"a Bloom filter for {self.capacity} items at {self.error_rate} needs "
                f"{self.bits} bits, more than one Redis string holds ({MAX_BITS})"
            )

    @property
    def bits(self) -> int:
        return math.ceil(-self.capacity * math.log(self.error_rate) / math.log(2) ** 2)

    @property
    def hashes(self) -> int:
        return max(1, round(self.bits / self.capacity * math.log(2)))

    def offsets(self, fingerprint: bytes) -> list[int]:
        """The bit positions of a fingerprint (at least 16 bytes, e.g. SHA-1)."""
        if len(fingerprint) < 16:
            raise ValueError("a Bloom fingerprint needs at least 16 bytes")
        h1 = int.from_bytes(fingerprint[:8], "big")
        h2 = int.from_bytes(fingerprint[8:16], "big") | 1
        m = self.bits
        return [(h1 + i * h2) % m for i in range(self.hashes)]

    def false_positive_rate(self, count: float) -> float:
        """The chance that a URL the filter has not taken is taken for seen, once it holds
        ``count`` URLs (``error_rate`` at ``capacity``)."""
        return (1 - math.exp(-self.hashes * count / self.bits)) ** self.hashes

    def expected_false_positives(self, count: float) -> float:
        """New URLs expected to have been taken for seen (and so never crawled) while the
        filter took ``count`` URLs.  Each was tested against the filter as it was then:
        before the n-th insertion, rate/(1 - rate) false positives are expected at the
        filter's rate then; their sum over n, by Simpson's rule."""
        if count <= 0:
            return 0.0

        def per_insertion(n: float) -> float:
            rate = min(self.false_positive_rate(n), 0.999)
            return rate / (1 - rate)

        steps = 256
        h = count / steps
        inner = sum((4 if i % 2 else 2) * per_insertion(i * h) for i in range(1, steps))
        return (per_insertion(0) + inner + per_insertion(count)) * h / 3

    def estimated_count(self, bits_set: int) -> int:
        """Items in a filter with ``bits_set`` ones (Swamidass and Baldi)."""
        m, k = self.bits, self.hashes
        if bits_set >= m:
            return self.capacity
        return round(-m / k * math.log(1 - bits_set / m))
