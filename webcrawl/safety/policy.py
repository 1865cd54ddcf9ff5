"""The crawl's address policy, one per crawler, built from its settings: the download
handler enforces it; the spider binds its seeds' hosts in it
(:mod:`webcrawl.safety.bindings`) before it yields them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit
from urllib.request import getproxies

from webcrawl.safety.addresses import AddressPolicy, host_port, parse_networks

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def address_policy(crawler: Crawler) -> AddressPolicy:
    """The crawler's policy (made on first use from ``ADDRESSES_ALLOWED_NETWORKS``; a bad
    network fails the crawl at start with the setting's name).  The proxies the
    environment names (``http_proxy``...) are the operator's: trusted."""
    policy = getattr(crawler, "_webcrawl_address_policy", None)
    if policy is None:
        allowed = parse_networks(crawler.settings.getlist("ADDRESSES_ALLOWED_NETWORKS"))
        policy = AddressPolicy(allowed)
        # as Scrapy's HttpProxyMiddleware reads them: a proxy without a scheme is http
        proxies = (_with_scheme(v) for k, v in getproxies().items() if k != "no")
        policy.trust(url_hosts(proxies))
        crawler._webcrawl_address_policy = policy  # type: ignore[attr-defined]
    return policy


def _with_scheme(url: str) -> str:
    """``url`` with ``http://`` when it names no scheme (Scrapy's add_http_if_no_scheme)."""
    if re.match(r"^\w+://", url):
        return url
    return ("http:" if url.startswith("//") else "http://") + url


def url_hosts(urls: Iterable[str]) -> set[tuple[str, int]]:
    """``(host, port)`` of each URL, as :class:`AddressPolicy` compares them."""
    hosts = set()
    for url in urls:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            continue
        if parts.hostname:
            hosts.add(host_port(parts.hostname, port, parts.scheme))
    return hosts
