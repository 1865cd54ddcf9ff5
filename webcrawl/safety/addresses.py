"""Which addresses a worker may connect to: none of its own network's, by default.

A link written by a stranger must not make a worker fetch a cloud metadata service
(``169.254.169.254``), a Redis on ``localhost`` or a router's admin page.  The check
is made on the address a connection actually reached (see
:mod:`webcrawl.safety.handler`), never on the URL's host text: a DNS name that
resolves to ``127.0.0.1`` is refused the same way, and nothing can resolve the name
again between the check and the connection.

Refused: every address in the IANA special-purpose registries that is not globally
reachable (loopback, private, link-local, shared/CGNAT, multicast, reserved,
unspecified, documentation, benchmarking, unique-local, ...), in IPv4 and IPv6.  IPv6
addresses that carry an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64, 6to4)
are judged by the IPv4 address they carry.  The table is ours, not
:attr:`ipaddress.IPv4Address.is_global`'s: Python's answer changed between versions
(3.11.10 and 3.12.4 corrected it) and it counts multicast as global.

Allowed anyway: networks the user names (``ADDRESSES_ALLOWED_NETWORKS``); a proxy the
operator's environment names; and a seed's host (``host:port``) at the addresses it
was *bound* to when the crawl was seeded, so that a crawl seeded on an intranet or on
the demo web keeps working without a setting, and only as the user meant it: an
IP-literal seed (``http://127.0.0.2:8080/``, or ``http://0x7f.2:8080/``, any form the
system's resolver reads as an address) is bound to that address; a named seed to the
addresses its name had then (:func:`seed_binding`; the crawl keeps them in Redis, so
every worker agrees).  A later answer in a special-use range is refused like any
other: a seed whose DNS was taken over cannot point workers at
``169.254.169.254``, nor can a redirect to the seed's host.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Mapping

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# (network, why it is refused), most specific first where they nest
_SPECIAL: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("0.0.0.0/8", "unspecified"),  # "this network"; 0.0.0.0 reaches the local host
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved (6to4 relay)"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # 255.255.255.255 (broadcast) included
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("100::/64", "reserved (discard-only)"),
        ("64:ff9b:1::/48", "private (local-use NAT64)"),
        ("2001::/23", "reserved (IETF protocol assignments)"),  # Teredo included
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "reserved (segment routing SIDs)"),
        ("fc00::/7", "private (unique local)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "private (site-local)"),
        ("ff00::/8", "multicast"),
    )
)

# IPv6 prefixes that embed an IPv4 address (judged by it)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible addresses
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated (RFC 2765, SIIT)
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")  # IPv6 outside it is not routed
# what the system's resolver (inet_aton) reads as an IPv4 address: 1 to 4 parts,
# each decimal, octal (0...) or hex (0x...); "127.1", "0x7f.1", "2130706433"
_IPV4_FORMS = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)(?:\.(?:0[xX][0-9a-fA-F]*|[0-9]+)){0,3}")


class BadNetworkError(ValueError):
    """A network in ADDRESSES_ALLOWED_NETWORKS that is not one."""


class BlockedAddress(Exception):
    """A connection reached an address the policy refuses (nothing was sent)."""


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4)."""
    if ip.version == 4:
        return None
    assert isinstance(ip, ipaddress.IPv6Address)
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or ip in _TRANSLATED or (ip in _COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def special_use(address: str | IPAddress) -> str | None:
    """Why an address is not one a crawler may reach (``"loopback"``, ``"private"``,
    ...), or None for a globally reachable address."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if ip.version == 6 and ip.scope_id:  # fe80::1%eth0
        ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    inner = embedded_ipv4(ip)
    if inner is not None:
        why = special_use(inner)
        return f"{why}, as {ip}" if why else None
    for net, why in _SPECIAL:
        if ip.version == net.version and ip in net:
            return why
    if ip.version == 6 and ip not in _GLOBAL_UNICAST:
        return "reserved (not global unicast)"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` (a URL's host) is when the system's resolver reads it as one
    rather than as a name: ``127.0.0.1``, ``127.1``, ``0x7f.0.0.1``, ``0177.0.0.1``,
    ``2130706433``, ``[::1]``, ``[fe80::1%eth0]`` (its zone dropped).  None for a name
    (``127.0.0.1.``, with its trailing dot, is a name to the resolver)."""
    text = host.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        if not _IPV4_FORMS.fullmatch(text):
            return None
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    if ip.version == 6 and ip.scope_id:
        ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    return ip


def _unmapped(ip: IPAddress | None) -> IPAddress | None:
    """An IPv4-mapped IPv6 address as its IPv4 address; any other as it is."""
    if ip is not None and ip.version == 6 and ip.ipv4_mapped is not None:  # type: ignore[union-attr]
        return ip.ipv4_mapped  # type: ignore[union-attr]
    return ip


def bare_address(address: str) -> IPAddress | None:
    """An address as connections report it (maybe with a zone), without its zone."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None


def parse_networks(
    values: Iterable[str], setting: str = "ADDRESSES_ALLOWED_NETWORKS"
) -> list[Network]:
    """Networks (``10.0.0.0/8``, ``fd00::/8``, or one address) from a setting's values;
    a bad one raises :class:`BadNetworkError` naming the setting."""
    networks = []
    for given in values:
        value = given.strip()
        if not value:
            continue
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError as exc:
            raise BadNetworkError(f"{setting}: {value!r} is not a network ({exc})") from None
    return networks


def host_port(host: str, port: int | None, scheme: str = "http") -> tuple[str, int]:
    """A host and port as the policy compares them: lower case, no IPv6 brackets, the
    scheme's default port when none is given."""
    host = host.strip().lower().strip("[]")
    return host, port if port else (443 if scheme == "https" else 80)


class AddressPolicy:
    """Decides each connection: ``check(address, host, port)`` returns why it is refused,
    or None.  ``bind`` gives a seed's host the addresses it may have (:func:`seed_binding`);
    ``trust`` allows a host (the operator's proxy) whatever it resolves to; ``refresh``,
    when set, is asked for the bindings other workers recorded before a host is refused."""

    def __init__(
        self,
        allowed: Iterable[Network] = (),
        bindings: Mapping[tuple[str, int], Iterable[str]] | None = None,
        refresh: Callable[[], Mapping[tuple[str, int], Iterable[str]]] | None = None,
    ) -> None:
        self.allowed = list(allowed)
        self.bindings: dict[tuple[str, int], frozenset[IPAddress]] = {}
        self.trusted: set[tuple[str, int]] = set()
        self.refresh = refresh
        for key, addresses in (bindings or {}).items():
            self.bind(key, addresses)

    def bind(self, key: tuple[str, int], addresses: Iterable[str]) -> None:
        """Allow the seed host ``key`` (:func:`host_port`) at ``addresses`` (replaces what
        it had: the crawl's first binding, kept in Redis, is the one every worker uses).
        An IPv4-mapped address is kept as its IPv4 address (the one an IPv4-only resolver
        connects to)."""
        bound = (_unmapped(bare_address(a)) for a in addresses)
        self.bindings[key] = frozenset(ip for ip in bound if ip is not None)

    def trust(self, hosts: Iterable[tuple[str, int]]) -> None:
        """Allow these proxies (``host, port``) at any address, as proxies only."""
        self.trusted.update(hosts)

    def check(self, address: str, host: str, port: int, proxy: bool = False) -> str | None:
        """Why connecting to ``address`` for ``host:port`` (a proxy's, if ``proxy``) is
        refused, or None."""
        ip = bare_address(address)
        if ip is None:
            return f"not an IP address: {address!r}"
        why = special_use(ip)
        if why is None or self._allowed(ip, host_port(host, port), proxy):
            return None
        bound = self.bindings.get(host_port(host, port))
        if bound:
            seeded = ", ".join(sorted(map(str, bound)))
            return f"{ip} is {why} (the seed's host was at {seeded} when the crawl was seeded)"
        return f"{ip} is {why}"

    def _allowed(self, ip: IPAddress, key: tuple[str, int], proxy: bool) -> bool:
        """Whether a special-use ``ip`` is allowed anyway for the host ``key``."""
        inner = embedded_ipv4(ip)
        for net in self.allowed:
            if (ip.version == net.version and ip in net) or (inner is not None and inner in net):
                return True
        if proxy and key in self.trusted:
            return True
        ip = _unmapped(ip)
        bound = self.bindings.get(key)
        if (bound is None or ip not in bound) and self.refresh is not None:
            for seed, addresses in self.refresh().items():
                self.bind(seed, addresses)
            bound = self.bindings.get(key)
        return bound is not None and ip in bound


def seed_binding(host: str, resolved: Iterable[str]) -> list[str]:
    """The addresses a seed's host is bound to: an IP literal's own address, else the
    addresses its name resolved to when the crawl was seeded (``resolved``)."""
    literal = literal_address(host)
    if literal is not None:
        return [str(literal)]
    return sorted({str(ip) for ip in map(bare_address, resolved) if ip is not None})
