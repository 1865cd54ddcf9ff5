"""A real scrapyd on 127.0.0.1: `webcrawl deploy` uploads the egg and starts two workers."""

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, crawl_env, free_port, frontier_totals

from webcrawl.store import open_store


@pytest.fixture
def scrapyd(tmp_path):
    port = free_port()
    home = tmp_path / "scrapyd"
    home.mkdir()
    (home / "scrapyd.conf").write_text(
        "[scrapyd]\n"
        f"bind_address = 127.0.0.1\nhttp_port = {port}\n"
        f"eggs_dir = {home}/eggs\nlogs_dir = {home}/logs\ndbs_dir = {home}/dbs\n"
        "items_dir =\nmax_proc = 4\npoll_interval = 0.5\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapyd"],
        cwd=home,
        env=crawl_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "daemonstatus.json", timeout=2) as r:
                assert json.loads(r.read())["status"] == "ok"
            break
        except OSError:
            assert time.monotonic() < deadline, "scrapyd did not start"
            time.sleep(0.2)
    yield url, home
    proc.terminate()
    proc.wait(20)


def jobs(url):
    with urllib.request.urlopen(url + "listjobs.json?project=webcrawl", timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.e2e
def test_deploy_two_workers_to_scrapyd(scrapyd, slow_demo, redis_server, redis_client, tmp_path):
    url, home = scrapyd
    data = tmp_path / "data"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "webcrawl.cli",
            "deploy",
            "--url",
            url,
            "--workers",
            "2",
            "--crawl",
            "sdtest",
            "--seeds",
            ",".join(slow_demo.seeds),
            "-s",
            f"REDIS_URL={redis_server.url}",
            # paced (~20 pages/s, ~12 s): scrapyd starts its jobs a poll apart and each
            # takes seconds to start, so a faster crawl could end before the second joins
            "-s",
            f"WEBCRAWL_DATA_DIR={data}",
            "-s",
            "FRONTIER_HOST_DELAY=0.2",
            "-s",
            "STATUS_HEARTBEAT_INTERVAL=0.5",
            "-s",
            "STATUS_HEARTBEAT_TTL=3",
        ],
        cwd=ROOT,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("started web job") == 2
    assert not (ROOT / "setup.py").exists()  # the checkout is left as it was
    deadline = time.monotonic() + 120
    while True:
        state = jobs(url)
        if len(state["finished"]) == 2:
            break
        assert time.monotonic() < deadline, state
        time.sleep(0.5)
    logs = [p.read_text() for p in Path(home, "logs").rglob("*.log")]
    assert len(logs) == 2
    assert all("Spider closed (finished)" in log for log in logs)
    assert all("'response_received_count'" in log for log in logs)  # both workers fetched
    with open_store(f"sqlite:///{data}/webtable.sqlite3") as store:
        urls = [r["url"] for r in store.scan_pages()]
    assert sorted(urls) == sorted(slow_demo.web.reachable())
    assert max(slow_demo.page_fetches().values()) == 1
    # both jobs joined the crawl named by --crawl, and nothing else
    assert frontier_totals(redis_client, "sdtest")["seen"] >= len(urls)
    assert not [
        k
        for pattern in ("webcrawl:{web:*", "webcrawl:{web}*", "webcrawl:web:*")
        for k in redis_client.scan_iter(match=pattern)
    ]


def test_the_egg_holds_every_package_of_the_project(tmp_path):
    """scrapyd on another machine has only the egg: each package pyproject.toml installs
    (webcrawl.spiders from spiders/, ...) must be in it, under webcrawl alone, with its
    package data (the frontier's Lua scripts, the monitor's page, HBase's pom.xml)."""
    import zipfile

    from webcrawl.deploy import PACKAGE_DATA, PACKAGE_DIR, PACKAGES, build_egg

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"] == list(PACKAGES)
    assert config["package-dir"] == PACKAGE_DIR
    assert config["package-data"] == PACKAGE_DATA
    egg = build_egg(ROOT, tmp_path, "1")
    files = set(zipfile.ZipFile(egg).namelist())
    assert {n.split("/")[0] for n in files} == {"webcrawl", "EGG-INFO"}
    for package in PACKAGES:
        assert package.replace(".", "/") + "/__init__.py" in files, package
    assert "webcrawl/handlers/http.py" in files
    assert "webcrawl/spiders/web.py" in files
    for package, patterns in PACKAGE_DATA.items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            wanted = {str(p.relative_to(ROOT)) for p in folder.glob(pattern)}
            assert wanted and wanted <= files, (package, pattern)
