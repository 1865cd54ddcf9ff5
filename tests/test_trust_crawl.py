"""What a crawl takes on trust, in real crawls on loopback: a seed's host only at the
addresses it had when seeded (a DNS answer that changes later is refused, so is a
redirect to it), and queue entries in Redis and in the store only as data (forged
ones are refused, counted and recorded, never fetched)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import redis
from conftest import ROOT, crawl_env
from scrapy import Spider
from test_addresses_crawl import _serve
from test_crawl import stored_rows

from webcrawl.frontier.keys import CrawlKeys
from webcrawl.frontier.layout import existing_crawl
from webcrawl.frontier.queue import HostQueue
from webcrawl.safety.bindings import sealed_binding
from webcrawl.safety.seal import Seal
from webcrawl.store import open_store

pytestmark = pytest.mark.e2e


def _html(*links: str) -> bytes:
    return (
        "<html><body>" + "".join(f'<a href="{u}">x</a>' for u in links) + "</body></html>"
    ).encode()


def test_a_seed_name_that_resolves_elsewhere_later_is_refused(tmp_path, crawls):
    """``seed.test`` resolves to 127.0.0.2 when the crawl is seeded, then (once its home
    page was served) to 127.0.0.3, where another server listens on the same port: its
    next page, and a redirect from another seed to it, are refused; 127.0.0.3 gets
    not even a connection."""
    site = _serve("127.0.0.2")
    port = site.server_port
    evil = _serve("127.0.0.3", port=port)  # the same port, another address
    other = _serve("127.0.0.4")
    dns = tmp_path / "dns.json"
    dns.write_text(json.dumps({"seed.test": ["127.0.0.2"]}))
    seed = f"http://seed.test:{port}/"
    go = f"http://127.0.0.4:{other.server_port}/go"

    class Rebinding(dict):
        def get(self, path, default=None):
            if path == "/":  # served: the name now answers elsewhere
                dns.write_text(json.dumps({"seed.test": ["127.0.0.3"]}))
            return super().get(path, default)

    site.pages = Rebinding({"/": (200, {}, _html(f"{seed}later", go))})
    site.pages["/later"] = (200, {}, _html())
    other.pages.update(
        {"/": (200, {}, _html()), "/go": (302, {"Location": f"{seed}via-redirect"}, b"")}
    )
    evil.pages.update({p: (200, {}, b"metadata") for p in ("/later", "/via-redirect")})
    path = os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    env = crawl_env(WEBCRAWL_TEST_DNS=str(dns), PYTHONPATH=path)
    data = tmp_path / "data"
    try:
        result = crawls.run(
            [seed, f"http://127.0.0.4:{other.server_port}/"],
            data,
            "WEBCRAWL_SCOPE=broad",
            "FAILPATH_ENABLED=False",
            "TWISTED_DNS_RESOLVER=mapresolver.MapResolver",
            env=env,
        )
    finally:
        for server in (site, evil, other):
            server.shutdown()
            server.server_close()
    assert result.returncode == 0, result.stderr[-3000:]
    assert (evil.seen, evil.connections) == ([], 0)
    assert sorted(site.seen) == ["/", "/robots.txt", "/sitemap.xml"]  # (a guessed sitemap)
    rows = {r["url"]: r for r in stored_rows(data)}
    for url in (f"{seed}later", go):
        assert rows[url]["kind"] == "failed", url
        error = rows[url]["error"]
        assert "BlockedAddress" in error and "127.0.0.3 is loopback" in error, error
        assert "the seed's host was at 127.0.0.2 when the crawl was seeded" in error, error
    assert rows[seed]["status"] == 200
    stats = result.stderr.split("Dumping Scrapy stats")[-1]
    assert "'security/blocked_address': 2," in stats


SECRET = "shared by the crawl's workers"


class S(Spider):
    name = "web"


def test_forged_queue_entries_in_redis_and_in_the_store_are_refused(redis_server, tmp_path, crawls):
    site, evil = _serve("127.0.0.2"), _serve("127.0.0.3")
    base = f"http://127.0.0.2:{site.server_port}"
    proxy = f"http://127.0.0.3:{evil.server_port}"
    site.pages["/"] = (200, {}, _html())
    data = tmp_path / "data"
    settings = [
        f"REDIS_URL={redis_server.url}",
        "FAILPATH_ENABLED=False",
        "STATUS_HEARTBEAT_INTERVAL=1",
        "STATUS_HEARTBEAT_TTL=5",
    ]
    try:
        first = crawls.run([f"{base}/"], data, *settings)
        assert first.returncode == 0, first.stderr[-3000:]
        client = redis.Redis.from_url(redis_server.url)
        keys, exists = existing_crawl(client, "web", 16)
        assert exists
        store = open_store(f"sqlite:///{data / 'webtable.sqlite3'}")
        queue = HostQueue(client, S(), keys, store=store)
        host = f"127.0.0.2:{site.server_port}"
        forged = {
            "file": {"url": "file:///etc/hostname", "meta": {"proxy": "http://169.254.169.254:80"}},
            "proxy": {"url": f"{base}/proxied", "meta": {"proxy": proxy}},
            "bind": {"url": f"{base}/bound", "meta": {"bindaddress": ["127.0.0.2", 0]}},
            "class": {"url": f"{base}/classy", "_class": "os.system"},
        }
        pushes = [
            (name.encode(), host, 0, 0.0, json.dumps(d).encode()) for name, d in forged.items()
        ]
        queue.step(pushes=pushes, pop=False)
        # the same forgeries in the store's tier (far revisits, due now: moved up to Redis)
        due = time.time() - 1
        revisits = []
        for name, entry in forged.items():
            moved = {**entry, "url": entry["url"].replace(f"{base}/", f"{base}/store-")}
            revisits.append((f"store-{name}", host, 0, due, json.dumps(moved).encode()))
        queue.put_far_revisits(revisits)
        store.close()
        second = crawls.run(None, data, *settings)
    finally:
        for server in (site, evil):
            server.shutdown()
            server.server_close()
    assert second.returncode == 0, second.stderr[-3000:]
    assert (evil.seen, evil.connections) == ([], 0)
    assert sorted(site.seen) == ["/", "/robots.txt", "/sitemap.xml"]  # the first crawl's only
    stats = second.stderr.split("Dumping Scrapy stats")[-1]
    for kind, count in (("scheme", 2), ("meta", 4), ("class", 2)):
        assert f"'security/refused_entry/{kind}': {count}," in stats, stats
    rows = {r["url"]: r for r in stored_rows(data)}
    for path in (
        "/proxied",
        "/bound",
        "/classy",
        "/store-proxied",
        "/store-bound",
        "/store-classy",
    ):
        row = rows[f"{base}{path}"]
        assert row["kind"] == "failed" and "RefusedQueueEntry" in row["error"], row
    assert "chooses where a worker connects" in rows[f"{base}/proxied"]["error"]
    assert "file:///etc/hostname" not in rows
    logged = second.stderr.count("Refused a queue entry of crawl 'web' (meta)")
    assert logged == 1  # once per kind


def test_the_environments_proxy_is_the_operators_and_is_used(tmp_path, crawls):
    """A proxy on loopback that ``http_proxy`` names (the operator's, e.g. a local
    squid) is allowed, although a queue entry could never name it."""
    proxy = _serve("127.0.0.1")
    proxy.pages.update(
        {
            "http://site.test/robots.txt": (404, {}, b""),
            "http://site.test/": (200, {}, _html("http://site.test/two")),
            "http://site.test/two": (200, {}, _html()),
        }
    )
    env = crawl_env(http_proxy=f"http://127.0.0.1:{proxy.server_port}", no_proxy="")
    data = tmp_path / "data"
    try:
        result = crawls.run(["http://site.test/"], data, "FAILPATH_ENABLED=False", env=env)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(proxy.seen) == [
        "http://site.test/",
        "http://site.test/robots.txt",
        "http://site.test/sitemap.xml",  # (guessed: through the proxy too)
        "http://site.test/two",
    ]
    assert {r["url"]: r["status"] for r in stored_rows(data)} == {
        "http://site.test/": 200,
        "http://site.test/two": 200,
    }


def test_the_crawls_first_binding_of_a_seed_is_the_one_every_worker_uses(
    redis_server, tmp_path, crawls
):
    """Another worker bound ``seed.test`` to 127.0.0.2 when it seeded the crawl; this one
    is given the same seed while the name answers 127.0.0.3: it keeps the recorded
    binding, so the seed's page there is refused."""
    evil = _serve("127.0.0.3")
    port = evil.server_port
    evil.pages["/"] = (200, {}, b"metadata")
    dns = tmp_path / "dns.json"
    dns.write_text(json.dumps({"seed.test": ["127.0.0.3"]}))
    client = redis.Redis.from_url(redis_server.url)
    key, field = CrawlKeys("web", 16).seed_bindings, f"seed.test|{port}"
    client.hset(key, field, sealed_binding(Seal(SECRET, local=False), key, field, ["127.0.0.2"]))
    path = os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    env = crawl_env(WEBCRAWL_TEST_DNS=str(dns), PYTHONPATH=path, WEBCRAWL_SECRET=SECRET)
    data = tmp_path / "data"
    try:
        result = crawls.run(
            [f"http://seed.test:{port}/"],
            data,
            f"REDIS_URL={redis_server.url}",
            "FAILPATH_ENABLED=False",
            "TWISTED_DNS_RESOLVER=mapresolver.MapResolver",
            env=env,
        )
    finally:
        evil.shutdown()
        evil.server_close()
    assert result.returncode == 0, result.stderr[-3000:]
    assert (evil.seen, evil.connections) == ([], 0)
    assert json.loads(client.hget(key, field))["addresses"] == ["127.0.0.2"]
    row = {r["url"]: r for r in stored_rows(data)}[f"http://seed.test:{port}/"]
    assert "the seed's host was at 127.0.0.2 when the crawl was seeded" in row["error"]


def test_whoever_writes_redis_cannot_widen_the_address_policy(redis_server, tmp_path, crawls):
    """Found by a review: a binding or a submitted seed written straight into Redis
    allowed workers any address.  Now only sealed bindings count (WEBCRAWL_SECRET): a
    forged binding is ignored and a seed pushed by hand is crawled with no special-use
    address allowed, while a seed from ``webcrawl submit`` (which binds its host, sealed)
    is fetched.  Both are pulled when the worker idles, without the crawl ending first."""
    site, target, submitted = _serve("127.0.0.2"), _serve("127.0.0.10"), _serve("127.0.0.11")
    for server in (site, target, submitted):
        server.pages["/"] = (200, {}, _html())
    forged = f"http://127.0.0.10:{target.server_port}/"
    sealed = f"http://127.0.0.11:{submitted.server_port}/"
    env = crawl_env(WEBCRAWL_SECRET=SECRET)
    data = tmp_path / "data"
    settings = [f"REDIS_URL={redis_server.url}", "FAILPATH_ENABLED=False"]
    client = redis.Redis.from_url(redis_server.url)
    keys = CrawlKeys("web", 16)
    try:
        first = crawls.run([f"http://127.0.0.2:{site.server_port}/"], data, *settings, env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        field = f"127.0.0.10|{target.server_port}"
        client.hset(
            keys.seed_bindings, field, json.dumps({"addresses": ["127.0.0.10"], "seal": "f" * 64})
        )
        client.rpush(keys.start, forged, f"{forged}x")
        submit = subprocess.run(
            [sys.executable, "-m", "webcrawl.cli", "submit", sealed, "-s", settings[0]],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert submit.returncode == 0, submit.stderr
        second = crawls.run(None, data, *settings, env=env)
    finally:
        for server in (site, target, submitted):
            server.shutdown()
            server.server_close()
    assert second.returncode == 0, second.stderr[-3000:]
    assert (target.seen, target.connections) == ([], 0)
    assert sorted(submitted.seen) == ["/", "/robots.txt", "/sitemap.xml"]
    assert "seed bindings in Redis" in second.stderr and "do not verify" in second.stderr
    rows = {r["url"]: r for r in stored_rows(data)}
    assert rows[sealed]["status"] == 200
    for url in (forged, f"{forged}x"):
        assert "BlockedAddress" in rows[url]["error"] and "loopback" in rows[url]["error"], url
