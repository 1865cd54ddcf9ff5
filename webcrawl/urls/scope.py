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
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

MODES = ("host", "domain", "broad")


@functools.cache
def _extractor():
    import tldextract

    # suffix_list_urls=() -> the snapshot shipped in the package, no network.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


# host[:port] of a plain http(s) URL, as a Request's (safe_url_string's) URL has it: a
# registered name or IPv4 address, no user info, an optional port of digits
_PLAIN = re.compile(r"(https?)://([A-Za-z0-9._~%!$&'()*+,;=-]+)(?::([0-9]{1,5}))?(?=[/?#]|\Z)")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def scope_key(url: str, mode: str) -> str:
    """The key ``url`` is compared on under ``mode`` ("" for broad)."""
    if mode == "broad":
        return ""
    if mode == "host":
        plain = _PLAIN.match(url)
        if plain is None:
            return _host_key(url)
        # (what _host_key gives for such a URL, without urlsplit: 0.44 us a URL against
        # 2.85 for URLs urlsplit has not cached)
        scheme, host, port = plain.groups()
        number = None if port is None else int(port)
        if number is not None and number > 65535:
            return _host_key(url)  # (its error)
        host = host.lower()
        return host if number in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{number}"
    if mode == "domain":
        host = (urlsplit(url).hostname or "").lower()
        ext = _extractor()(host)
        return ext.top_domain_under_public_suffix or host
    raise ValueError(f"unknown scope mode {mode!r}; expected one of {', '.join(MODES)}")


def _host_key(url: str) -> str:
    """``host[:port]`` of any URL, by urlsplit: lower case, IPv6 in brackets, the scheme's
    default port left out."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


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
