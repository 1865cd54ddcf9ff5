"""Property tests: every textual form of an IP address a URL's host can take (decimal,
octal, hex, short forms, IPv4-mapped, -compatible and -translated IPv6, NAT64, zone
ids, trailing dots) is judged by the address the system's resolver makes of it.

The resolver here is the C library's own ``getaddrinfo`` with ``AI_NUMERICHOST`` (the
one Twisted's resolvers end in, without a DNS query): what it connects to is what the
policy must judge, and what an IP-literal seed binds.
"""

from __future__ import annotations

import ipaddress
import socket

from hypothesis import example, given
from hypothesis import strategies as st

from webcrawl.safety.addresses import (
    AddressPolicy,
    literal_address,
    seed_binding,
    special_use,
)

SPECIAL_V4 = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
]


@st.composite
def ipv4(draw: st.DrawFn) -> ipaddress.IPv4Address:
    """Mostly special-use addresses (the interesting ones), some public."""
    if draw(st.booleans()):
        net = ipaddress.ip_network(draw(st.sampled_from(SPECIAL_V4)))
        offset = draw(st.integers(0, net.num_addresses - 1))
        return net.network_address + offset
    return ipaddress.IPv4Address(draw(st.integers(0, 2**32 - 1)))


def _part(draw: st.DrawFn, value: int) -> str:
    style = draw(st.sampled_from(["dec", "oct", "hex", "HEX"]))
    if style == "oct":
        return "0" + format(value, "o")
    if style == "hex":
        return "0x" + format(value, "x")
    if style == "HEX":
        return "0X" + format(value, "X")
    return str(value)


@st.composite
def ipv4_form(draw: st.DrawFn, ip: ipaddress.IPv4Address) -> str:
    """``ip`` written in one of the forms inet_aton reads: 1 to 4 parts, each decimal,
    octal or hex, the last one holding the remaining bytes."""
    b = ip.packed
    n = int(ip)
    parts = draw(st.integers(1, 4))
    values = {
        1: [n],
        2: [b[0], n & 0xFFFFFF],
        3: [b[0], b[1], n & 0xFFFF],
        4: list(b),
    }[parts]
    return ".".join(_part(draw, v) for v in values)


@st.composite
def host_form(draw: st.DrawFn) -> tuple[str, ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """(a URL host, the address it denotes to the policy: an IPv6 form's own address)."""
    ip = draw(ipv4())
    kind = draw(
        st.sampled_from(["v4", "mapped", "mapped-hex", "compatible", "translated", "nat64", "zone"])
    )
    if kind == "v4":
        return draw(ipv4_form(ip)), ip
    if kind == "mapped-hex":
        v6 = ipaddress.IPv6Address(f"::ffff:{int(ip) >> 16:x}:{int(ip) & 0xFFFF:x}")
        return f"[{v6.exploded if draw(st.booleans()) else v6.compressed}]", v6
    if kind == "zone":
        v6 = ipaddress.IPv6Address(f"fe80::{int(ip) & 0xFFFF:x}")
        return f"[{v6}%lo]", v6
    prefix = {
        "mapped": "::ffff:",
        "compatible": "::",
        "translated": "::ffff:0:",
        "nat64": "64:ff9b::",
    }[kind]
    v6 = ipaddress.IPv6Address(f"{prefix}{ip}")
    return f"[{prefix}{ip}]", v6


def resolved(host: str) -> str | None:
    """The address the C library's resolver makes of a URL's host, numerically."""
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), 80, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
        )
    except socket.gaierror:
        return None
    return infos[0][4][0]


@given(host_form())
@example(("2130706433", ipaddress.IPv4Address("127.0.0.1")))
@example(("0x7f.1", ipaddress.IPv4Address("127.0.0.1")))
@example(("0251.0376.0251.0376", ipaddress.IPv4Address("169.254.169.254")))
@example(("[::ffff:0:169.254.169.254]", ipaddress.IPv6Address("::ffff:0:a9fe:a9fe")))
def test_a_literal_is_the_address_the_resolver_connects_to(form):
    host, ip = form
    assert literal_address(host) == ip
    assert ipaddress.ip_address(resolved(host)) == ip


@given(host_form(), st.integers(1, 65535))
def test_the_policy_refuses_every_form_of_a_special_use_address(form, port):
    host, ip = form
    policy = AddressPolicy()
    address = resolved(host)
    why = policy.check(address, host, port)
    assert (why is None) == (special_use(ip) is None)


@given(host_form(), st.integers(1, 65535), ipv4())
def test_an_ip_literal_seed_allows_its_address_and_port_only(form, port, other):
    host, ip = form
    policy = AddressPolicy()
    policy.bind((host.strip("[]").lower(), port), seed_binding(host, ["8.8.8.8"]))
    address = resolved(host)
    assert policy.check(address, host, port) is None  # the seed's own address
    if special_use(ip) is not None:
        assert policy.check(address, host, port % 65535 + 1) is not None  # not another port
    same = {ip, getattr(ip, "ipv4_mapped", None)}  # a mapped seed: its IPv4 address is its own
    if other not in same and special_use(other) is not None:
        assert policy.check(str(other), host, port) is not None  # nor another address


@given(ipv4(), st.booleans())
def test_a_trailing_dot_makes_a_name_not_a_literal(ip, short):
    host = (f"{int(ip)}" if short else str(ip)) + "."
    assert literal_address(host) is None
    assert resolved(host) is None  # the resolver asks DNS for it: no numeric address
    # as a seed, it is bound to what its name resolves to, never to the literal's
    assert seed_binding(host, []) == []
