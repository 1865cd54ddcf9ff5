"""``webcrawl hbase start|stop|status`` as a user runs it, and what it starts: a real
HBase 2.6 whose every socket listens on 127.0.0.1."""

import json
import os
import re
from pathlib import Path

import pytest
from conftest import free_port
from test_cli import webcrawl

from webcrawl.localhbase import LocalHBase
from webcrawl.store import open_store
from webcrawl.urls.urlkey import url_to_key

pytestmark = pytest.mark.e2e


def listening_addresses(pids: list[int]) -> set[str]:
    """The local addresses of the TCP sockets ``pids`` listen on (from /proc)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                addresses.add(fields[1].split(":")[0])
    return addresses


def test_start_status_stop_as_a_user(tmp_path):
    home, port = tmp_path / "hbase", free_port()
    out = webcrawl("hbase", "start", "--home", str(home), "--port", str(port), timeout=600).stdout
    url = f"hbase://127.0.0.1:{port}?table_prefix=crawl"
    try:
        assert f"STORE_URL={url}" in out
        pids = [pid for _, pid, alive in LocalHBase(home).processes() if alive]
        assert len(pids) == 2  # the master (ZooKeeper, RegionServer) and the Thrift gateway
        assert listening_addresses(pids) == {"0100007F"}  # 127.0.0.1 only, never 0.0.0.0
        row = {"key": url_to_key("http://a.example/"), "url": "http://a.example/", "status": 200}
        with open_store(url) as store:
            store.put_pages([row])
        status = webcrawl("hbase", "status", "--home", str(home))
        assert re.search(r"master\s+running", status.stdout)
        assert f"STORE_URL={url}" in status.stdout
        again = webcrawl("hbase", "start", "--home", str(home), "--port", str(port)).stdout
        assert f"STORE_URL={url}" in again  # already up: the same one
        assert [p for _, p, alive in LocalHBase(home).processes() if alive] == pids
        # the crawl's status reads the page count, on HBase as on SQLite
        report = json.loads(
            webcrawl(
                "status", "--json", "-s", f"STORE_URL={url}", data_dir=tmp_path / "data"
            ).stdout
        )
        assert report["stored"] == 1
    finally:
        stopped = webcrawl("hbase", "stop", "--home", str(home), timeout=300)
    assert "stopped master, thrift" in stopped.stdout
    assert not any(alive for *_, alive in LocalHBase(home).processes())
    down = webcrawl("hbase", "status", "--home", str(home), check=False)
    assert down.returncode == 3 and "not running" in down.stdout
    # started again, on its data: the row is there
    webcrawl("hbase", "start", "--home", str(home), "--port", str(port), timeout=600)
    try:
        with open_store(url) as store:
            assert store.get_page(url_to_key("http://a.example/"))["status"] == 200
            assert store.count_pages() == 1
    finally:
        webcrawl("hbase", "stop", "--home", str(home), timeout=300)


def test_a_port_in_use_is_refused_with_its_number(tmp_path, hbase):
    taken = hbase.gateway("thrift").port
    result = webcrawl(
        "hbase",
        "start",
        "--home",
        str(tmp_path / "h"),
        "--port",
        str(taken),
        check=False,
        timeout=300,
    )
    assert result.returncode == 1
    assert f"port {taken}" in result.stdout and "in use" in result.stdout
    assert not any(alive for *_, alive in LocalHBase(tmp_path / "h").processes())


def test_bench_store_measures_the_real_hbase(hbase):
    url = hbase.url("thrift")
    out = webcrawl(
        "bench", "store", "--rows", "300", "--row-bytes", "500", "--hbase", url, timeout=300
    ).stdout
    lines = {
        line.split()[0] + " " + line.split()[1]: line
        for line in out.splitlines()
        if line.startswith(("sqlite", "hbase"))
    }
    assert any(name.startswith("hbase 127.0.0.1:") for name in lines), out
    assert any(name.startswith("sqlite") for name in lines), out
