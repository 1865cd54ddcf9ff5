"""End to end: `scrapy crawl web` with WARC output, checked with the archive world's tools
(``warcio check``, ``cdxj-indexer``, pywb's ``wayback``) against the bytes the servers
sent."""

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import brotli
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.conftest import crawl_env, free_port
from tests.support.pywb import tool
from webcrawl.demo import demo_server
from webcrawl.demo.web import DemoWeb
from webcrawl.store import open_store

pytestmark = pytest.mark.e2e

HTML = b"<html><head><title>%s</title></head><body><p>%s</p>%s</body></html>"


def page(name: str, links: str = "") -> bytes:
    return HTML % (name.encode(), (name * 40).encode(), links.encode())


def chunked(body: bytes, size: int) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def raw_responses() -> dict[str, bytes]:
    """Each path's whole answer, byte for byte (odd header case and spacing included)."""
    links = "".join(
        f'<a href="/{p}">{p}</a>'
        for p in ("gzip", "br", "chunked", "chunked-gzip", "big", "big-chunked", "moved")
    )

    def answer(status: bytes, headers: list[bytes], body: bytes, length: bool = True) -> bytes:
        head = b"HTTP/1.1 " + status + b"\r\n" + b"".join(h + b"\r\n" for h in headers)
        if length:
            head += b"content-length: %d\r\n" % len(body)
        return head + b"\r\n" + body

    html = b"Content-Type: text/html; charset=utf-8"
    big = page("big") + os.urandom(200_000).hex().encode()
    return {
        "/": answer(b"200 OK", [html, b"X-Spaced:   three"], page("home", links)),
        "/gzip": answer(b"200 OK", [html, b"Content-Encoding: gzip"], gzip.compress(page("gz"))),
        "/br": answer(b"200 OK", [html, b"Content-Encoding: br"], brotli.compress(page("br"))),
        "/chunked": answer(
            b"200 OK", [html, b"Transfer-Encoding: chunked"], chunked(page("ch"), 100), False
        ),
        "/chunked-gzip": answer(
            b"200 OK",
            [html, b"Content-Encoding: gzip", b"Transfer-Encoding: chunked"],
            chunked(gzip.compress(page("chgz")), 50),
            False,
        ),
        "/big": answer(b"200 OK", [html], big),
        "/big-chunked": answer(
            b"200 OK", [html, b"Transfer-Encoding: chunked"], chunked(big, 4096), False
        ),
        "/moved": answer(b"301 Moved Permanently", [b"Location: /gzip"], b"moved"),
        "/robots.txt": answer(b"404 Not Found", [b"Content-Type: text/plain"], b"none"),
    }


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the crawler cuts the big answers off: a reset connection is expected


def serve(answers: dict[str, bytes]) -> Server:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            data = answers.get(self.path.split("?")[0])
            if data is None:
                data = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
            self.wfile.write(data)  # exactly these bytes, in one piece or many

        def log_message(self, *args: object) -> None:
            pass

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def records(directory: Path) -> Iterator[tuple[Path, object, bytes]]:
    """Every record of every closed WARC in ``directory``: (file, record, its block)."""
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, no_record_parse=True):
                yield path, record, record.raw_stream.read()


def warcio_check(directory: Path) -> None:
    """``warcio check`` of the archive tools' venv: warcio reads brotli with brotlipy
    only (warcio#73), which webcrawl's environment cannot have (its ``brotli`` module
    would shadow Brotli's, that Scrapy decodes with)."""
    files = sorted(directory.glob("*.warc.gz"))
    assert files
    result = subprocess.run(
        [tool("warcio"), "check", "-v", *map(str, files)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def cdxj_agrees(directory: Path) -> int:
    """Our CDXJ lines are those cdxj-indexer computes from the files; their number."""
    ours, theirs = [], []
    for path in sorted(directory.glob("*.warc.gz")):
        ours += (
            path.with_name(path.name.removesuffix(".warc.gz") + ".cdxj").read_text().splitlines()
        )
        out = subprocess.run(
            [tool("cdxj-indexer"), path.name], capture_output=True, text=True, cwd=directory
        )
        assert out.returncode == 0, out.stderr
        theirs += out.stdout.splitlines()
    assert sorted(ours) == sorted(theirs)
    return len(ours)


def all_archived(data: Path, web: DemoWeb) -> None:
    """Every page of ``web`` stored once, each with its records, in whole WARC files
    that warcio checks and whose index agrees with cdxj-indexer's."""
    with open_store(f"sqlite:///{data / 'webtable.sqlite3'}") as store:
        rows = {row["url"]: row for row in store.scan_pages()}
    assert set(rows) == set(web.reachable())  # nothing lost
    assert all(row["warc"] for row in rows.values())  # and everything archived
    assert not list((data / "warc").glob("*.open"))
    warcio_check(data / "warc")
    cdxj_agrees(data / "warc")


def test_records_hold_the_bytes_as_sent_for_every_encoding_cut_and_redirect(tmp_path, crawls):
    answers = raw_responses()
    server = serve(answers)
    root = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        result = crawls.run(
            root + "/",
            tmp_path / "data",
            "WARC_ENABLED=True",
            "DOWNLOAD_MAXSIZE=50000",
            "RETRY_TIMES=0",
            "LOG_LEVEL=INFO",
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-5000:]
    warc = tmp_path / "data" / "warc"
    warcio_check(warc)
    responses, requests, truncated, ids = {}, {}, {}, Counter()
    for _, record, block in records(warc):
        headers = record.rec_headers
        kind = headers.get_header("WARC-Type")
        ids[headers.get_header("WARC-Record-ID")] += 1
        path = (
            "/" + headers.get_header("WARC-Target-URI").split("/", 3)[3]
            if kind != "warcinfo"
            else ""
        )
        if kind == "response":
            assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
            responses[path] = (block, headers)
            if headers.get_header("WARC-Truncated"):
                truncated[path] = headers.get_header("WARC-Truncated")
        elif kind == "request":
            requests[headers.get_header("WARC-Concurrent-To")] = block
    assert set(responses) == set(answers) - {"/robots.txt"}
    for path, (block, headers) in responses.items():
        if path in truncated:
            # cut where DOWNLOAD_MAXSIZE stopped the download: a prefix of what was sent
            assert answers[path].startswith(block) and len(block) < len(answers[path])
        else:
            assert block == answers[path], path  # byte for byte, headers as sent
        sent = requests[headers.get_header("WARC-Record-ID")]
        assert sent.startswith(f"GET {path} HTTP/1.1\r\n".encode()), sent[:80]
    assert truncated == {"/big": "length", "/big-chunked": "length"}
    assert max(ids.values()) == 1
    assert cdxj_agrees(warc) == len(responses)
    # the pages in the store point at their records; the cut ones are recorded as failed
    with open_store(f"sqlite:///{tmp_path / 'data' / 'webtable.sqlite3'}") as store:
        rows = {row["url"].split("/", 3)[3]: row for row in store.scan_pages()}
    for name, row in rows.items():
        if name in ("big", "big-chunked"):
            assert row["kind"] == "failed"
        capture = row["warc"]
        with open(warc / capture["file"], "rb") as stream:
            stream.seek(capture["offset"])
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_headers.get_header("WARC-Target-URI") == row["final_url"]


def pywb_collection(tmp_path: Path, warcs: list[Path]) -> Path:
    home = tmp_path / "pywb"
    home.mkdir()
    for args in (["init", "crawl"], ["add", "crawl", *map(str, warcs)]):
        done = subprocess.run(
            [tool("wb-manager"), *args], cwd=home, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return home


def wayback(home: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [tool("wayback"), "-p", str(port), "-b", "127.0.0.1"],
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/crawl/", timeout=5)
            return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("wayback did not start") from None
            time.sleep(0.3)


def replay(base: str, stamp: str, url: str) -> tuple[int, bytes, dict]:
    """pywb's answer for ``url`` at ``stamp``, unchanged (``id_``: the archived bytes)."""
    try:
        with urllib.request.urlopen(f"{base}/crawl/{stamp}id_/{url}", timeout=30) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_a_second_crawl_of_an_unchanged_web_writes_revisits_that_pywb_replays(tmp_path, crawls):
    store = f"STORE_URL=sqlite:///{tmp_path / 'webtable.sqlite3'}"
    warc = tmp_path / "warc"
    settings = ("WARC_ENABLED=True", f"WARC_DIR={warc}", store, "LOG_LEVEL=INFO")
    with demo_server(2, 30, tmp_path / "requests.jsonl") as info:
        first = crawls.run(info["seeds"], tmp_path / "one", *settings, "WEBCRAWL_CRAWL=one")
        assert first.returncode == 0, first.stderr[-3000:]
        files_one = set(warc.glob("*.warc.gz"))
        # a new crawl of the same web, the same webtable: every page is fetched again
        second = crawls.run(info["seeds"], tmp_path / "two", *settings, "WEBCRAWL_CRAWL=two")
        assert second.returncode == 0, second.stderr[-3000:]
        files_two = set(warc.glob("*.warc.gz")) - files_one
        url = info["seeds"][0]
        with urllib.request.urlopen(url) as answer:
            sent = answer.read()
    warcio_check(warc)
    cdxj_agrees(warc)
    kinds = Counter()
    for _, record, _ in records(warc):
        if record.rec_type in ("response", "revisit"):
            kinds[record.rec_type] += 1
    second_kinds = Counter()
    for path in files_two:
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("response", "revisit"):
                    status = record.http_headers.get_statuscode()
                    second_kinds[(record.rec_type, status[0] == "3")] += 1
    # every page's second capture is a revisit; redirects alone are written in full
    assert second_kinds[("response", False)] == 0, second_kinds
    assert second_kinds[("revisit", False)] > 20, second_kinds
    # pywb replays the seed as the demo server sent it, from both crawls: the second
    # crawl's capture is a revisit, resolved to the first's payload
    home = pywb_collection(tmp_path, sorted(warc.glob("*.warc.gz")))
    stamps = {}
    for path in sorted(warc.glob("*.cdxj")):
        for line in path.read_text().splitlines():
            _key, stamp, fields = line.split(" ", 2)
            data = json.loads(fields)
            if data["url"] == url:
                stamps[data["mime"]] = stamp
    assert set(stamps) == {"text/html", "warc/revisit"}, stamps
    proc, base = wayback(home)
    try:
        for stamp in stamps.values():
            status, body, _ = replay(base, stamp, url)
            assert status == 200
            assert body == sent
    finally:
        proc.terminate()
        proc.wait(10)


def hooked_env(tmp_path: Path, code: str, **extra: str) -> dict[str, str]:
    """A worker's environment in which ``code`` runs first in every Python process (as
    ``sitecustomize``): in the worker and in its WARC writer."""
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(code)
    path = os.pathsep.join(p for p in (str(hooks), os.environ.get("PYTHONPATH", "")) if p)
    return crawl_env(PYTHONPATH=path, **extra)


# a WARC writer whose 40th record is half written, flushed to disk, and then waits (for
# the kill, its pid in $HALFWAY): a writer killed mid-record, at a moment the test knows
HALF_WRITE = (
    "import os, time\n"
    "from webcrawl.warc.files import WarcFiles\n"
    "write, seen = WarcFiles.write, [0]\n"
    "def halfway(self, groups):\n"
    "    where = []\n"
    "    for group in groups:\n"
    "        if seen[0] + len(group) < 40:\n"
    "            seen[0] += len(group)\n"
    "            where += write(self, [group])\n"
    "            continue\n"
    "        if self._warc is None:\n"
    "            self._open()\n"
    "        for record in group[: 39 - seen[0]]:\n"
    "            self._warc.write(record.data)\n"
    "        data = group[39 - seen[0]].data\n"
    "        self._warc.write(data[: len(data) // 2])\n"
    "        self._warc.flush()\n"
    "        os.fsync(self._warc.fileno())\n"
    "        with open(os.environ['HALFWAY'] + '.tmp', 'w') as out:\n"
    "            out.write(str(os.getpid()))\n"
    "        os.rename(os.environ['HALFWAY'] + '.tmp', os.environ['HALFWAY'])\n"
    "        time.sleep(60)\n"
    "    return where\n"
    "WarcFiles.write = halfway\n"
)


def test_a_worker_killed_mid_record_leaves_files_that_repair_makes_whole(tmp_path, crawls):
    data = tmp_path / "data"
    warc = data / "warc"
    halfway = tmp_path / "halfway"
    settings = ("WARC_ENABLED=True", "WARC_BATCH_SIZE=3", "FRONTIER_LEASE_TIMEOUT=2")
    with demo_server(3, 60, tmp_path / "requests.jsonl") as info:
        worker = crawls.start(
            info["seeds"],
            data,
            *settings,
            env=hooked_env(tmp_path, HALF_WRITE, HALFWAY=str(halfway)),
            name="killed",
        )
        deadline = time.monotonic() + 60
        while not halfway.exists():
            assert time.monotonic() < deadline and worker.poll() is None, worker.log_text()[-3000:]
            time.sleep(0.05)
        # the writer mid-record (an OOM kill), and its worker (killed alone, a worker
        # leaves its writer to close the file whole: here the file is left cut)
        os.kill(int(halfway.read_text()), signal.SIGKILL)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        assert len(list(warc.glob("*.warc.gz.open"))) == 1
        # by hand, on a copy: `webcrawl warc repair`
        copy = tmp_path / "copy"
        shutil.copytree(warc, copy)
        done = subprocess.run(
            ["webcrawl", "warc", "repair", str(copy)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        match = re.search(r"repaired .*: (\d+) records kept, (\d+) bytes cut off", done.stdout)
        assert match and int(match.group(1)) == 40 and int(match.group(2)) > 0, (
            done.stdout
        )  # warcinfo + 39
        assert not list(copy.glob("*.open"))
        warcio_check(copy)
        cdxj_agrees(copy)
        # and by the next worker, as it starts; it finishes the crawl
        log = crawls.finish(crawls.start(info["seeds"], data, *settings, name="next"))
        assert "Repaired " in log
    assert not list(warc.glob("*.open"))
    warcio_check(warc)
    cdxj_agrees(warc)
    # every stored page's record is whole, where its row says
    with open_store(f"sqlite:///{data / 'webtable.sqlite3'}") as store:
        rows = list(store.scan_pages())
    assert len(rows) > 100
    for row in rows:
        capture = row["warc"]
        with open(warc / capture["file"], "rb") as stream:
            stream.seek(capture["offset"])
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_headers.get_header("WARC-Target-URI") == row["final_url"]
            record.content_stream().read()


# a worker whose disk is full while the file $DISK_FULL exists: WARC writes (in its
# writer) and the outage's probe (in the worker) fail with ENOSPC, as on a full disk
# (which root, in a test, cannot otherwise be given)
DISK_FULL = (
    "import errno, os\n"
    "import webcrawl.pipelines.warc as pipeline\n"
    "from webcrawl.warc.files import WarcFiles\n"
    "def full():\n"
    "    if os.path.exists(os.environ['DISK_FULL']):\n"
    "        raise OSError(errno.ENOSPC, 'No space left on device')\n"
    "write, probe = WarcFiles.write, pipeline.check_writable\n"
    "def write_unless_full(self, groups):\n"
    "    full()\n"
    "    return write(self, groups)\n"
    "def probe_unless_full(directory):\n"
    "    full()\n"
    "    probe(directory)\n"
    "WarcFiles.write, pipeline.check_writable = write_unless_full, probe_unless_full\n"
)


def test_a_full_disk_pauses_the_worker_and_loses_no_page(tmp_path, crawls):
    data = tmp_path / "data"
    flag = tmp_path / "full"
    with demo_server(2, 40, tmp_path / "requests.jsonl", latency=0.01) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        worker = crawls.start(
            info["seeds"],
            data,
            "WARC_ENABLED=True",
            "STORE_OUTAGE_WAIT=1",
            "LOG_LEVEL=INFO",
            env=hooked_env(tmp_path, DISK_FULL, DISK_FULL=str(flag)),
        )
        deadline = time.monotonic() + 60
        while not list((data / "warc").glob("*.open")):
            assert time.monotonic() < deadline and worker.poll() is None, worker.log_text()[-3000:]
            time.sleep(0.05)
        flag.touch()
        while "Pausing this worker's fetches" not in worker.log_text():
            assert time.monotonic() < deadline and worker.poll() is None, worker.log_text()[-3000:]
            time.sleep(0.1)
        time.sleep(3)  # paused, probing every second
        flag.unlink()
        log = crawls.finish(worker)
    assert "WARC_DIR" in log and "answers again" in log
    assert int(re.search(r"'warc/requeued': (\d+)", log).group(1)) > 0
    all_archived(data, web)


def writers_of(worker_pid: int) -> list[int]:
    """The pids of a worker's WARC writer processes (its children running the writer)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == worker_pid and b"webcrawl.warc.writer" in cmdline:
            found.append(int(proc.name))
    return found


def test_a_writer_killed_alone_loses_no_page_and_the_next_one_repairs_its_file(tmp_path, crawls):
    data = tmp_path / "data"
    served = tmp_path / "requests.jsonl"
    with demo_server(2, 80, served, latency=0.05) as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        worker = crawls.start(info["seeds"], data, "WARC_ENABLED=True", "STORE_OUTAGE_WAIT=1")
        deadline = time.monotonic() + 60

        def requests_served() -> int:
            return len(served.read_text().splitlines()) if served.exists() else 0

        # killed once some pages are written, with most of the crawl still to come (the
        # kill is counted on the server, not timed: a slow machine crawls slowly too)
        while not (
            requests_served() >= 20
            and list((data / "warc").glob("*.open"))
            and writers_of(worker.pid)
        ):
            assert time.monotonic() < deadline and worker.poll() is None, worker.log_text()[-3000:]
            time.sleep(0.05)
        (writer,) = writers_of(worker.pid)
        os.kill(writer, signal.SIGKILL)
        at_kill = requests_served()
        log = crawls.finish(worker)
        assert requests_served() > at_kill + 20, "the crawl ended before the kill could matter"
    # (between batches, or with one, which went back to the frontier)
    assert "the WARC writer process ended (exit status -9" in log
    assert "Repaired " in log  # the dead writer's file, by the next writer as it started
    all_archived(data, web)


# a worker whose WARC writers die: as they start while $NO_START exists (a fault of
# theirs, said on stderr), or killed by their first batch while $KILL_WRITE exists
BROKEN_WRITER = (
    "import os, signal\n"
    "import webcrawl.warc.writer as writer\n"
    "from webcrawl.warc.files import WarcFiles\n"
    "serve, write = writer.serve, WarcFiles.write\n"
    "def serve_or_fail(requests, answers):\n"
    "    if os.path.exists(os.environ['NO_START']):\n"
    "        raise RuntimeError('the disk is on fire')\n"
    "    serve(requests, answers)\n"
    "def write_or_die(self, groups):\n"
    "    if os.path.exists(os.environ['KILL_WRITE']):\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    return write(self, groups)\n"
    "writer.serve, WarcFiles.write = serve_or_fail, write_or_die\n"
)


def test_a_writer_that_cannot_start_fails_the_crawl_at_start_saying_why(tmp_path, crawls):
    (tmp_path / "no-start").touch()
    env = hooked_env(
        tmp_path,
        BROKEN_WRITER,
        NO_START=str(tmp_path / "no-start"),
        KILL_WRITE=str(tmp_path / "kill-write"),
    )
    result = crawls.run("http://127.0.0.2:9/", tmp_path / "data", "WARC_ENABLED=True", env=env)
    assert result.returncode != 0, result.stderr[-3000:]
    assert "Cannot start: the WARC writer did not start" in result.stderr
    assert "RuntimeError: the disk is on fire" in result.stderr


def test_writers_that_keep_dying_stop_the_crawl_and_lose_no_page(tmp_path, crawls):
    data = tmp_path / "data"
    kill = tmp_path / "kill-write"
    kill.touch()
    env = hooked_env(
        tmp_path, BROKEN_WRITER, NO_START=str(tmp_path / "no-start"), KILL_WRITE=str(kill)
    )
    with demo_server(2, 30, tmp_path / "requests.jsonl") as info:
        web = DemoWeb(info["hosts"], info["pages_per_host"], info["seed"])
        first = crawls.run(info["seeds"], data, "WARC_ENABLED=True", env=env)
        assert "'finish_reason': 'warc_writer_failed'" in first.stderr, first.stderr[-3000:]
        assert "the WARC writer failed 3 times in a row" in first.stderr
        kill.unlink()  # the writers are well again: the next worker finishes the crawl
        crawls.run(info["seeds"], data, "WARC_ENABLED=True", env=env)
    all_archived(data, web)


def test_a_warc_dir_that_cannot_be_written_fails_at_start(tmp_path, crawls):
    (tmp_path / "a-file").write_text("not a directory")
    result = crawls.run(
        "http://127.0.0.1:9/",
        tmp_path / "data",
        "WARC_ENABLED=True",
        f"WARC_DIR={tmp_path}/a-file/warc",
    )
    assert result.returncode != 0
    assert "WARC_DIR=" in result.stderr and "cannot be written" in result.stderr
