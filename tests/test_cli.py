"""The `webcrawl` command against real crawls."""

import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, crawl_env


def webcrawl(*args, data_dir=None, check=True, timeout=60):
    cmd = [sys.executable, "-m", "webcrawl.cli", *args]
    if data_dir is not None:
        cmd += ["-s", f"WEBCRAWL_DATA_DIR={data_dir}"]
    result = subprocess.run(
        cmd, cwd=ROOT, env=crawl_env(), capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.mark.e2e
def test_show_status_reset_after_a_crawl(demo, tmp_path, crawls):
    data = tmp_path / "data"
    assert crawls.run(demo.seeds, data).returncode == 0
    expected = demo.web.reachable()

    row = json.loads(webcrawl("show", demo.seeds[0], data_dir=data).stdout)
    assert row["url"] == demo.seeds[0] and row["status"] == 200
    assert row["key"].startswith("2.0.0.127:http:")
    # any spelling of the URL finds the row (canonicalised first)
    upper = demo.seeds[0].replace("http://", "HTTP://") + "#frag"
    assert json.loads(webcrawl("show", upper, data_dir=data).stdout)["url"] == demo.seeds[0]
    missing = webcrawl("show", demo.seeds[0] + "nope", data_dir=data, check=False)
    assert missing.returncode == 1 and "not stored" in missing.stderr
    assert webcrawl("show", "ftp://x/", data_dir=data, check=False).returncode == 2

    status = json.loads(webcrawl("status", "--json", data_dir=data).stdout)
    assert status["stored"] == len(expected)
    assert status["queued"] == 0 and status["workers"] == []
    assert status["seen"] >= len(expected)
    text = webcrawl("status", data_dir=data).stdout
    assert f"stored     {len(expected)}" in text and "workers    0 alive" in text

    refused = webcrawl("reset", data_dir=data, check=False)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert "deleted" in webcrawl("reset", "--yes", data_dir=data).stdout
    assert json.loads(webcrawl("status", "--json", data_dir=data).stdout)["seen"] == 0
    assert not (data / "redis.pid").exists()  # the embedded Redis was left, not leaked


@pytest.mark.e2e
def test_submit_to_a_running_continuous_crawl(demo, tmp_path, crawls):
    data = tmp_path / "data"
    first, second = demo.seeds[0], demo.seeds[1]
    worker = crawls.start(
        [first], data, "WEBCRAWL_CONTINUOUS=True", "WEBCRAWL_SUBMIT_POLL_INTERVAL=0.2"
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # wait until the first host is done and the worker idles
            status = json.loads(webcrawl("status", "--json", data_dir=data).stdout)
            workers = status["workers"]
            if workers and workers[0]["state"] == "idle" and status["stored"] > 0:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.3)
        text = webcrawl("status", data_dir=data).stdout
        assert "1 alive" in text and "idle" in text
        done_first = status["stored"]
        result = webcrawl("submit", second, "not a url", data_dir=data, check=False)
        assert result.returncode == 1  # one bad seed, reported
        assert "skipping bad seed argument:2: " in result.stderr
        assert "submitted 1 seeds to crawl 'web'" in result.stdout
        expected = set(demo.web.reachable([first, second]))
        while json.loads(webcrawl("status", "--json", data_dir=data).stdout)["stored"] < len(
            expected
        ):
            assert time.monotonic() < deadline + 60
            time.sleep(0.3)
        assert done_first < len(expected)
    finally:
        worker.send_signal(signal.SIGINT)
        worker.wait(60)
    fetched = demo.page_fetches()
    assert set(fetched) >= {u for u in expected if "/old/" not in u}
    assert max(fetched.values()) == 1
    assert "Took 1 submitted seeds" in worker.log_text()


@pytest.mark.e2e
def test_demo_command(tmp_path):
    """The README's quick start: `webcrawl demo` crawls the demo web completely."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "webcrawl.cli",
            "demo",
            "--pages",
            "30",
            "--data-dir",
            str(tmp_path / "demo"),
        ],
        cwd=tmp_path,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "complete" in result.stdout and "INCOMPLETE" not in result.stdout
    assert (tmp_path / "demo" / "items.jsonl").stat().st_size > 0
    assert (tmp_path / "demo" / "webtable.sqlite3").exists()
    # the status command it suggests shows its own crawl, not an empty one
    line = next(li.strip() for li in result.stdout.splitlines() if "webcrawl status" in li)
    args = line.split("webcrawl status", 1)[1].split()
    status = webcrawl("status", *args, "--json")
    state = json.loads(status.stdout)
    assert state["crawl"] == "demo" and state["stored"] > 30 and state["seen"] > 30


def test_failpaths_lists_and_clears(tmp_path):
    from webcrawl.failpath import FAIL, OK, SITE
    from webcrawl.store.sqlite import SQLiteStore

    data = tmp_path / "data"
    with SQLiteStore(data / "webtable.sqlite3") as store:
        for column, count in (("/a/b/", 7), ("/a", 2), (OK, 3), (FAIL, 12)):
            store.failpath_add("com.dead:http", column, count)
        store.failpath_add("org.gone:https:8443", SITE, 5)
    listed = json.loads(webcrawl("failpaths", "--json", data_dir=data).stdout)
    assert sorted(e["url"] for e in listed) == [
        "http://dead.com/a/b/",
        "https://gone.org:8443/ (whole site)",
    ]
    text = webcrawl("failpaths", "--all", data_dir=data).stdout
    assert "3 recorded path levels" in text and "http://dead.com/a " in text
    assert "http://dead.com/a/b/" in text and "3/12" in text
    status = json.loads(webcrawl("status", "--json", data_dir=data).stdout)
    assert len(status["dead_paths"]) == 2
    assert "dead paths 2" in webcrawl("status", data_dir=data).stdout
    out = webcrawl("failpaths", "--clear", "http://dead.com/anything", data_dir=data).stdout
    assert "1 sites" in out
    assert [
        e["url"] for e in json.loads(webcrawl("failpaths", "--json", data_dir=data).stdout)
    ] == ["https://gone.org:8443/ (whole site)"]
    webcrawl("failpaths", "--clear", data_dir=data)
    assert json.loads(webcrawl("failpaths", "--json", "--all", data_dir=data).stdout) == []
