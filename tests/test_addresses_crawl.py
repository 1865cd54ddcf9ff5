"""The address policy in a real crawl: links, a redirect and a DNS name that lead to
loopback addresses that are not the seed's are refused where the connection is made;
the servers there receive nothing."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ROOT, free_port
from test_crawl import stored_rows

pytestmark = pytest.mark.e2e


class _Recorder(BaseHTTPRequestHandler):
    pages: dict[str, tuple[int, dict[str, str], bytes]] = {}

    def do_GET(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        status, headers, body = self.server.pages.get(  # type: ignore[attr-defined]
            self.path, (404, {}, b"not here")
        )
        self.send_response(status)
        for name, value in {"Content-Type": "text/html", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(address: str, family: int = socket.AF_INET, port: int = 0) -> ThreadingHTTPServer:
    class Server(ThreadingHTTPServer):
        address_family = family

        def verify_request(self, request: object, client_address: object) -> bool:
            self.connections += 1  # type: ignore[attr-defined]
            return True

    server = Server((address, port), _Recorder)
    server.seen, server.pages, server.connections = [], {}, 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture
def servers() -> Iterator[dict[str, ThreadingHTTPServer]]:
    made = {
        "site": _serve("127.0.0.2"),
        "loopback": _serve("127.0.0.1"),
        "other_port": _serve("127.0.0.2"),
    }
    if _ipv6_loopback():
        made["ipv6"] = _serve("::1", socket.AF_INET6)
    yield made
    for server in made.values():
        server.shutdown()
        server.server_close()


def test_links_redirects_and_names_into_loopback_are_refused(servers, tmp_path, crawls):
    site, target = servers["site"].server_port, servers["loopback"].server_port
    other = servers["other_port"].server_port
    refused = [
        f"http://127.0.0.1:{target}/literal",  # a loopback address, not the seed's
        f"http://localhost:{target}/name",  # a DNS name that resolves to loopback
        f"http://127.0.0.2:{other}/other-port",  # the seed's address, another port
        f"http://127.0.0.2:{site}/redirect",
    ]  # 302 to loopback
    if "ipv6" in servers:
        refused.append(f"http://[::1]:{servers['ipv6'].server_port}/ipv6")
    schemes = {
        "/to-file": "file:///etc/passwd",
        "/to-data": "data:text/html,hi",
        "/to-ftp": f"ftp://127.0.0.1:{target}/x",
    }
    other_schemes = [f"http://127.0.0.2:{site}{path}" for path in schemes]
    links = "".join(
        f'<a href="{u}">x</a>' for u in [*refused, *other_schemes, f"http://127.0.0.2:{site}/ok"]
    )
    servers["site"].pages.update(
        {
            "/": (200, {}, f"<html><body>{links}</body></html>".encode()),
            "/ok": (200, {}, b"<html><body>fine</body></html>"),
            "/redirect": (302, {"Location": f"http://127.0.0.1:{target}/redirected"}, b""),
            **{path: (301, {"Location": url}, b"") for path, url in schemes.items()},
        }
    )
    data = tmp_path / "data"
    # (Scrapy's default resolver answers IPv4 only: the IPv6 case needs this one)
    result = crawls.run(
        [f"http://127.0.0.2:{site}/"],
        data,
        "WEBCRAWL_SCOPE=broad",
        "FAILPATH_ENABLED=False",
        "DNS_RESOLVER=scrapy.resolver.CachingHostnameResolver",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name, server in servers.items():
        if name != "site":  # not even robots.txt; not even a TCP connection
            assert (server.seen, server.connections) == ([], 0), name
    assert sorted(servers["site"].seen) == sorted(
        ["/", "/ok", "/redirect", "/robots.txt", "/sitemap.xml", *schemes]
    )
    rows = {r["url"]: r for r in stored_rows(data)}
    for url in refused:
        assert rows[url]["kind"] == "failed", url
        assert "BlockedAddress" in rows[url]["error"] and "loopback" in rows[url]["error"], url
    for url in other_schemes:  # only http and https are fetched
        assert rows[url]["kind"] == "failed", url
        assert "BlockedScheme" in rows[url]["error"], url
    assert rows[f"http://127.0.0.2:{site}/ok"]["status"] == 200
    stats = result.stderr.split("Dumping Scrapy stats")[-1]
    # each refused page, and the robots.txt of each host refused (one per host)
    hosts = {u.split("/")[2] for u in refused if "/redirect" not in u} | {f"127.0.0.1:{target}"}
    assert f"'security/blocked_address': {len(refused) + len(hosts)}," in stats
    assert "'security/blocked_scheme': 3," in stats
    logged = re.findall(r"Refused to connect to http://([^/]+)/", result.stderr)
    assert sorted(logged) == sorted(set(logged))  # once per host


def test_allowed_networks_open_the_demo_webs_other_hosts(demo, tmp_path, crawls):
    """The demo web's hosts are loopback addresses: seeding one lets only it through;
    ADDRESSES_ALLOWED_NETWORKS opens the others."""
    seed = demo.seeds[:1]
    result = crawls.run(seed, tmp_path / "a", "WEBCRAWL_SCOPE=broad")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = stored_rows(tmp_path / "a")
    seed_host = seed[0].split("/")[2]
    assert {r["url"].split("/")[2] for r in rows if r["kind"] != "failed"} == {seed_host}
    assert any("BlockedAddress" in (r.get("error") or "") for r in rows)
    assert {f"{r['host']}" for r in demo.requests()} == {seed_host}

    result = crawls.run(
        seed, tmp_path / "b", "WEBCRAWL_SCOPE=broad", "ADDRESSES_ALLOWED_NETWORKS=127.0.0.0/8"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    urls = {r["url"] for r in stored_rows(tmp_path / "b")}
    assert urls == set(demo.web.reachable(seed, scope="broad"))


def test_a_bad_allowed_network_fails_at_start(tmp_path, crawls):
    result = crawls.run(
        [f"http://127.0.0.2:{free_port()}/"],
        tmp_path / "d",
        "ADDRESSES_ALLOWED_NETWORKS=10.0.0.0/33",
    )
    assert result.returncode != 0
    assert "ADDRESSES_ALLOWED_NETWORKS: '10.0.0.0/33' is not a network" in result.stderr


CONNECT = """
import sys
from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ClientEndpoint
from webcrawl.handlers.http import GuardedConnectionPool
from webcrawl.safety.addresses import AddressPolicy

port, kind = int(sys.argv[1]), sys.argv[2]
pool = GuardedConnectionPool(reactor, AddressPolicy())
# an endpoint that skips name resolution (as if a lookup had been swapped after a
# check): only the check of the connected address is left to catch it
key = {
    "direct": (b"http", b"public.example", port, None),
    # through an http proxy, or an https tunnel: the connection goes to the proxy
    "proxy": (b"http-proxy", b"public-proxy.example", port, None),
    "tunnel": (b"https", b"public.example", 443, None, "public-proxy.example", port, None),
    "unknown": (b"gopher", b"public.example", port),
}[kind]


def connect():
    d = pool.getConnection(key, TCP4ClientEndpoint(reactor, "127.0.0.1", port))
    d.addBoth(lambda result: print(type(getattr(result, "value", result)).__name__,
                                    getattr(result, "value", "")))
    d.addBoth(lambda _: reactor.stop())


reactor.callWhenRunning(connect)
reactor.run()
"""


@pytest.mark.parametrize(
    ("kind", "host"),
    [
        ("direct", "public.example"),
        ("proxy", "public-proxy.example"),
        ("tunnel", "public-proxy.example"),
        ("unknown", None),
    ],
)
def test_the_connected_address_is_checked_before_a_byte_is_sent(servers, kind, host):
    """Directly, and through a proxy (a request's meta, or a forged one, cannot name a
    proxy on a special-use address); a connection of a kind the pool does not know is
    refused unchecked."""
    server = servers["loopback"]
    out = subprocess.run(
        [sys.executable, "-c", CONNECT, str(server.server_port), kind],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    port = server.server_port
    expected = (
        f"BlockedAddress {host}:{port}: 127.0.0.1 is loopback"
        if host
        else "BlockedAddress unknown connection (b'gopher',): not checked, refused"
    )
    assert out.stdout.strip() == expected, out.stderr[-2000:]
    assert server.seen == []  # connected, closed, nothing sent
