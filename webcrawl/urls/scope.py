"""Which links a crawl follows: its seeds' hosts, their domains, or everything.

- ``host``: the seeds' ``host[:port]`` exactly (the default).
- ``domain``: the seeds' registered domains (``docs.example.co.uk`` and
  ``www.example.co.uk`` are both ``example.co.uk``), from the public suffix
  list bundled with tldextract; it is never fetched at run time, so scope
  works offline.  IP addresses are their own domain.
- ``broad``: every http(s) URL.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from urllib.parse import urlsplit

MODES = ("host", "domain", "broad")


@functools.cache
def _extractor():
    import tldextract

    # suffix_list_urls=() -> the snapshot shipped in the package, no network.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def scope_key(url: str, mode: str) -> str:
    """The key ``url`` is compared on under ``mode`` ("" for broad)."""
    if mode == "broad":
        return ""
    parts = urlsplit(url)
    if mode == "host":
        host = (parts.hostname or "").lower()
        if ":" in host:
            host = f"[{host}]"
        default = {"http": 80, "https": 443}.get(parts.scheme)
        return host if parts.port in (None, default) else f"{host}:{parts.port}"
    if mode == "domain":
        host = (parts.hostname or "").lower()
        ext = _extractor()(host)
        return ext.top_domain_under_public_suffix or host
    raise ValueError(f"unknown scope mode {mode!r}; expected one of {', '.join(MODES)}")


class Scope:
    """The set of scope keys a crawl follows links into."""

    def __init__(self, mode: str, keys: Iterable[str] = ()) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown scope mode {mode!r}; expected one of {', '.join(MODES)}")
        self.mode = mode
        self.keys: set[str] = set(keys)

    def key(self, url: str) -> str:
        return scope_key(url, self.mode)

    def add_urls(self, urls: Iterable[str]) -> set[str]:
        """Put the URLs' keys in scope; return the keys that were new."""
        new = {self.key(u) for u in urls} - self.keys
        self.keys |= new
        return new

    def allows(self, url: str) -> bool:
        return self.mode == "broad" or self.key(url) in self.keys

    def allows_canonical(self, url: str) -> bool:
        """:meth:`allows` for a URL made by ``canonical_url`` (whose ``host[:port]`` is
        already lower-case, without a default port): read, not parsed."""
        if self.mode == "broad":
            return True
        netloc = url.split("/", 3)[2]
        if self.mode == "host":
            return netloc in self.keys
        return _domain_of_netloc(netloc) in self.keys


@functools.lru_cache(maxsize=65536)
def _domain_of_netloc(netloc: str) -> str:
    return scope_key(f"http://{netloc}/", "domain")
