"""Requests a worker may know by their URL alone, without a fingerprint.

With Scrapy's own ``RequestFingerprinter``, the fingerprint of a filtered GET
without a body is decided by its (canonical) URL, so a hash of the URL stands
for it. Another fingerprinter may tell requests of one URL apart (headers,
meta): then every request goes through the dupefilter, as in Scrapy.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.utils.request import RequestFingerprinter


def by_url(fingerprinter_class: type) -> bool:
    """Whether requests fingerprinted by ``fingerprinter_class`` may be known by URL."""
    return fingerprinter_class is RequestFingerprinter


def url_key(request: Request) -> int | None:
    """The key ``request`` is known by when its URL alone decides it, else None."""
    if request.method == "GET" and not request.body and not request.dont_filter:
        return hash(request.url)
    return None


def url_key_of(url: str) -> int:
    """The key a plain GET of ``url`` is known by (see :func:`url_key`)."""
    return hash(url)
