"""The WARC writer process (webcrawl/warc/writer.py), driven as the pipeline's thread
drives it: real processes, real files, checked by warcio."""

import errno
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

import webcrawl.warc.writer as writer_module
from tests.test_warc_crawl import warcio_check
from webcrawl.warc.files import OPEN
from webcrawl.warc.records import Exchange, Original
from webcrawl.warc.writer import FAILURES_IN_A_ROW, WriterFailed, WriterGone, WriterProcess

REQUEST = b"GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n"


def response(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def job(path: str, body: bytes, original: Original | None = None) -> tuple:
    url = f"http://example.com/{path}"
    verdicts = {"status": 200, "changed": "true"}
    return (
        Exchange(url, REQUEST, response(body), "127.0.0.9", time.time(), verdicts=verdicts),
        original,
    )


def writer(directory: Path, **config) -> WriterProcess:
    return WriterProcess(
        {
            "directory": str(directory),
            "prefix": "t",
            "max_size": 10**9,
            "info": {"isPartOf": "test"},
            "dedup": True,
            **config,
        }
    )


def test_a_batch_is_written_where_the_writer_says_and_a_same_payload_is_a_revisit(tmp_path):
    w = writer(tmp_path)
    w.start()
    try:
        results, counts = w.write([job("a", b"alpha"), job("b", b"beta")])
        assert [r[0] for r in results] == ["ok", "ok"]
        (_, spot, kind, date, after) = results[0]
        assert kind == "response" and after.target == "http://example.com/a"
        assert counts["records"] == 6  # request, response, metadata each
        # the same payload again, against its last capture: a revisit that refers to it
        (again,), _ = w.write([job("a", b"alpha", after)])
        assert again[2] == "revisit" and again[4] == after
        # what the writer said is where the records are
        with open(tmp_path / (spot.file + OPEN), "rb") as stream:
            stream.seek(spot.offset)
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_type == "response"
            assert record.rec_headers.get_header("WARC-Target-URI") == "http://example.com/a"
            assert record.rec_headers.get_header("WARC-Date") == date
    finally:
        w.close()
    assert len(list(tmp_path.glob("*.warc.gz"))) == 1 and not list(tmp_path.glob("*" + OPEN))
    warcio_check(tmp_path)


def test_a_response_without_the_end_of_its_headers_is_unarchived_and_the_rest_written(
    tmp_path,
):
    w = writer(tmp_path)
    w.start()
    cut = (Exchange("http://example.com/x", REQUEST, b"HTTP/1.1 200 OK\r\nA: b", "", 0.0), None)
    try:
        results, counts = w.write([cut, job("a", b"alpha")])
    finally:
        w.close()
    assert results[0][0] == "unarchived" and "header block" in results[0][1]
    assert results[1][0] == "ok" and counts["records"] == 3


def test_a_directory_that_refuses_the_batch_is_an_oserror_with_its_errno(tmp_path):
    (tmp_path / "a-file").write_text("not a directory")
    w = writer(tmp_path / "a-file" / "warc")
    w.start()  # (its repair finds nothing to repair there)
    with pytest.raises(OSError, match=r"Not a directory|File exists") as raised:
        w.write([job("a", b"alpha")])
    assert raised.value.errno in (errno.ENOTDIR, errno.EEXIST)
    w.close()


def test_a_killed_writer_fails_its_batch_and_the_next_writer_repairs_its_file(tmp_path):
    w = writer(tmp_path)
    w.start()
    w.write([job("a", b"alpha")])
    assert len(list(tmp_path.glob("*.warc.gz" + OPEN))) == 1
    pid = w._proc.pid
    os.kill(pid, signal.SIGSTOP)  # stopped: the next batch is sent, and killed unanswered
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(WriterGone, match="exit status -9"):
        w.write([job("b", b"beta")])
    # the next batch starts a writer, which first repairs the dead one's file
    (result,), _ = w.write([job("c", b"gamma")])
    assert result[0] == "ok" and w.repaired == 1
    w.close()
    assert len(list(tmp_path.glob("*.warc.gz"))) == 2 and not list(tmp_path.glob("*" + OPEN))
    warcio_check(tmp_path)


def test_writers_that_keep_failing_are_a_failure_not_an_endless_retry(tmp_path):
    w = writer(tmp_path)
    w.start()
    for _ in range(FAILURES_IN_A_ROW + 1):  # killed between batches: nothing failed
        os.kill(w._proc.pid, signal.SIGKILL)
        w._proc.wait()
        (result,), _ = w.write([job("a", b"alpha")])  # said, and a new writer started
        assert result[0] == "ok" and w.failures == 0
    broken = [(*job("x", b"x"), "more")]  # (the writer raises on it: a fault of its own)
    for _ in range(FAILURES_IN_A_ROW - 1):
        with pytest.raises(RuntimeError, match="the WARC writer failed"):
            w.write(broken)
    w.write([job("b", b"beta")])  # a batch written: the count starts again
    for _ in range(FAILURES_IN_A_ROW):
        with pytest.raises(RuntimeError, match="the WARC writer failed"):
            w.write(broken)
    with pytest.raises(WriterFailed, match="failed 3 times in a row"):
        w.write([job("c", b"gamma")])
    w.close()
    warcio_check(tmp_path)


def test_a_writer_that_cannot_start_says_why(tmp_path, monkeypatch):
    w = WriterProcess({"directory": str(tmp_path)})  # (a fault of ours: its traceback)
    with pytest.raises(WriterFailed, match=r"did not start(.|\n)*it said:(.|\n)*KeyError"):
        w.start()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(WriterFailed, match="cannot start the WARC writer"):
        writer(tmp_path).start()


def test_a_large_batch_goes_in_runs_each_written_before_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_module, "BATCH_BYTES", 3000)
    w = writer(tmp_path)
    w.start()
    try:
        jobs = [job(f"p{i}", bytes([65 + i]) * 1000) for i in range(7)]
        results, counts = w.write(jobs)
    finally:
        w.close()
    assert [r[0] for r in results] == ["ok"] * 7 and counts["records"] == 21
    offsets = [r[1].offset for r in results]
    assert offsets == sorted(offsets)  # in order, one file
    warcio_check(tmp_path)


def test_the_writer_is_out_of_reach_of_ctrl_c_and_ends_with_its_worker(tmp_path):
    w = writer(tmp_path)
    w.start()
    w.write([job("a", b"alpha")])
    proc = w._proc
    # a session of its own: a Ctrl-C (or a signal) to the worker's process group misses it
    assert os.getsid(proc.pid) == proc.pid != os.getsid(0)
    proc.stdin.close()  # as when the worker dies: the writer closes its file and ends
    assert proc.wait(10) == 0
    proc.stdout.close()
    w._stderr.close()
    assert not list(tmp_path.glob("*" + OPEN))
    warcio_check(tmp_path)
