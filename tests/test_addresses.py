"""The address policy (webcrawl/safety/addresses.py): plain logic, no network."""

from __future__ import annotations

import ipaddress

import pytest

from webcrawl.safety.addresses import (
    AddressPolicy,
    BadNetworkError,
    host_port,
    parse_networks,
    seed_binding,
    special_use,
)
from webcrawl.safety.policy import url_hosts


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.1.2", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata services
        ("100.64.0.1", "shared (CGNAT)"),
        ("100.127.255.254", "shared (CGNAT)"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.10", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fd12:3456::1", "private (unique local)"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("::ffff:127.0.0.1", "loopback, as ::ffff:7f00:1"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local, as ::ffff:a9fe:a9fe"),
        ("64:ff9b::a00:1", "private, as 64:ff9b::a00:1"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::1", "loopback, as 2002:7f00:1::1"),  # 6to4 of 127.0.0.1
        ("::127.0.0.1", "loopback, as ::7f00:1"),  # IPv4-compatible
    ],
)
def test_special_addresses_are_refused_with_the_reason(address, why):
    assert special_use(address) == why


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "100.63.255.255",
        "100.128.0.0",
        "172.32.0.1",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_global_addresses_are_allowed(address):
    assert special_use(address) is None


def test_every_ipv4_address_python_calls_non_global_is_refused_too():
    """Our table covers what ipaddress.is_global excludes (sampled over the space)."""
    for n in range(0, 2**32, 2**32 // 20011):
        ip = ipaddress.IPv4Address(n)
        if not ip.is_global:
            assert special_use(ip) is not None, ip


def test_allowed_networks_and_seed_bindings():
    policy = AddressPolicy(parse_networks(["10.20.0.0/16", "fd00:1::/64", " "]))
    assert policy.check("10.20.3.4", "wiki.corp", 80) is None
    assert policy.check("::ffff:10.20.3.4", "wiki.corp", 80) is None  # mapped: the IPv4 rule
    assert policy.check("fd00:1::5", "wiki.corp", 443) is None
    assert policy.check("10.21.0.1", "other.corp", 80) == "10.21.0.1 is private"
    assert policy.check("8.8.8.8", "dns.google", 443) is None
    for key in url_hosts(["http://127.0.0.2:8080/", "https://Intranet/start"]):
        policy.bind(key, seed_binding(key[0], ["192.168.0.9"]))
    assert policy.check("127.0.0.2", "127.0.0.2", 8080) is None
    # the seed's address, not its port
    assert policy.check("127.0.0.2", "127.0.0.2", 6379) == "127.0.0.2 is loopback"
    assert policy.check("192.168.0.9", "intranet", 443) is None
    assert policy.check("192.168.0.9", "intranet", 80) is not None
    # the name now answers another special-use address: refused, saying what it was bound to
    assert policy.check("169.254.169.254", "intranet", 443) == (
        "169.254.169.254 is link-local (the seed's host was at 192.168.0.9 when the crawl "
        "was seeded)"
    )
    assert policy.check("127.0.0.1", "intranet", 443) is not None


def test_a_seed_name_bound_to_a_public_address_gets_no_special_use_one_later():
    policy = AddressPolicy()
    policy.bind(("blog.example.org", 80), seed_binding("blog.example.org", ["93.184.216.34"]))
    assert policy.check("93.184.216.34", "blog.example.org", 80) is None
    assert policy.check("169.254.169.254", "blog.example.org", 80) is not None
    assert policy.check("127.0.0.1", "blog.example.org", 80) is not None


def test_a_seed_binding_is_its_literal_address_whatever_it_is_said_to_resolve_to():
    assert seed_binding("0x7f.2", ["10.0.0.1"]) == ["127.0.0.2"]
    assert seed_binding("[fe80::1%eth0]", []) == ["fe80::1"]
    assert seed_binding("intranet", ["10.0.0.2", "10.0.0.1", "10.0.0.1", "junk"]) == [
        "10.0.0.1",
        "10.0.0.2",
    ]


def test_refused_hosts_are_looked_up_again_before_refusing():
    asked = []

    def refresh():
        asked.append(1)
        return {("127.0.0.3", 8080): ["127.0.0.3"]}

    policy = AddressPolicy(refresh=refresh)
    assert policy.check("127.0.0.3", "127.0.0.3", 8080) is None
    assert policy.check("127.0.0.3", "127.0.0.3", 8080) is None
    assert len(asked) == 1  # known now: not asked again
    assert policy.check("127.0.0.1", "localhost", 6379) == "127.0.0.1 is loopback"


def test_a_trusted_host_is_allowed_at_any_address():
    policy = AddressPolicy()
    policy.trust({("proxy.corp", 3128)})
    assert policy.check("10.1.1.1", "proxy.corp", 3128, proxy=True) is None
    assert policy.check("10.1.1.1", "proxy.corp", 3129, proxy=True) is not None
    # as a proxy only: its own pages (squid's cache manager) are not fetched directly
    assert policy.check("10.1.1.1", "proxy.corp", 3128) is not None


def test_an_ipv4_mapped_binding_allows_the_ipv4_address_a_resolver_connects_to():
    policy = AddressPolicy()
    policy.bind(("::ffff:127.0.0.2", 8080), seed_binding("[::ffff:127.0.0.2]", []))
    assert policy.check("127.0.0.2", "::ffff:127.0.0.2", 8080) is None
    assert policy.check("::ffff:127.0.0.2", "::ffff:127.0.0.2", 8080) is None
    assert policy.check("127.0.0.3", "::ffff:127.0.0.2", 8080) is not None


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "intranet", "10.0.0.0/8,"])
def test_a_bad_network_names_the_setting(bad):
    with pytest.raises(BadNetworkError, match="ADDRESSES_ALLOWED_NETWORKS"):
        parse_networks([bad])


def test_host_port_normalises_case_brackets_and_default_ports():
    assert host_port("[::1]", None) == ("::1", 80)
    assert host_port("Example.COM", None, "https") == ("example.com", 443)
    assert url_hosts(["http://[::1]:8080/x", "http://h:bad/"]) == {("::1", 8080)}


def test_the_environments_proxies_are_read_as_scrapy_reads_them(monkeypatch):
    """Found by a review: a proxy without a scheme (``127.0.0.1:3128``) is http to
    Scrapy; it was not trusted, and every request through it was refused."""
    from scrapy.utils.test import get_crawler

    from webcrawl.safety.policy import address_policy

    monkeypatch.setenv("http_proxy", "127.0.0.1:3128")
    monkeypatch.setenv("https_proxy", "https://Proxy.corp:8443")
    policy = address_policy(get_crawler(settings_dict={"ADDRESSES_ALLOWED_NETWORKS": []}))
    assert policy.trusted >= {("127.0.0.1", 3128), ("proxy.corp", 8443)}
    assert policy.check("127.0.0.1", "127.0.0.1", 3128, proxy=True) is None
