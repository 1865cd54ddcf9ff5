"""The crawl's address policy, one per crawler, built from its settings.

The download handler enforces it; the spider adds its seeds' hosts to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from webcrawl.safety.addresses import AddressPolicy, host_port, parse_networks

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def address_policy(crawler: Crawler) -> AddressPolicy:
    """The crawler's policy (made on first use from ``WEBCRAWL_ALLOWED_NETWORKS``; a bad
    network fails the crawl at start with the setting's name)."""
    policy = getattr(crawler, "_webcrawl_address_policy", None)
    if policy is None:
        allowed = parse_networks(crawler.settings.getlist("WEBCRAWL_ALLOWED_NETWORKS"))
        policy = AddressPolicy(allowed)
        crawler._webcrawl_address_policy = policy  # type: ignore[attr-defined]
    return policy


def url_hosts(urls: Iterable[str]) -> set[tuple[str, int]]:
    """``(host, port)`` of each URL, as :class:`AddressPolicy` compares them."""
    hosts = set()
    for url in urls:
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            continue
        if parts.hostname:
            hosts.add(host_port(parts.hostname, port, parts.scheme))
    return hosts
