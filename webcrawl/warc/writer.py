"""The WARC writer: a process of its own that makes, compresses and writes a worker's
records, so that none of that work runs on the crawler's core.

A crawler is bound by its reactor's one core.  Making a page's records (digests, headers)
and deflating them cost about 0.6 ms of it a page, and the writing thread's share of the
GIL more; a thread cannot take the deflate away, since each of its zlib calls lets go of
the GIL and taking it back from a busy reactor waits out the switch interval.  So the
worker hands each batch of exchanges, as they went over the wire, to this process and
only waits for the answer: where each page's records are, once they are written, flushed
and fsynced (:class:`WarcFiles`).

:class:`WriterProcess` is the worker's side, called from one thread (the pipeline's
writing thread).  The two talk over the child's stdin and stdout, each message a pickled
tuple after its 8-byte length:

- to the writer: the configuration first, then ``("write", jobs)`` (a job: an
  :class:`~webcrawl.warc.records.Exchange`, the page's last full capture or None) and
  ``("close",)``;
- from it: ``("ready", repaired)`` (the ``.open`` files of gone writers it repaired as it
  started), ``("written", results, counts)`` (a result per job: its main record's
  ``Location``, type, date and the page's last capture after it, or ``("unarchived",
  why)``), ``("failed", errno, message)`` (an OSError: a full disk; the batch is not
  written), ``("closed", files)``; each with the log records it made meanwhile, which
  the worker logs as its own.  What the writer says on stderr (a crash's traceback) goes
  to a file, quoted when it ends unexpectedly.

The writer runs the worker's own imports (its ``sys.path``, not the working directory's
modules first), in a session of its own (a Ctrl-C or a signal to the worker's process
group does not reach it: a stopping worker still has batches to write), and ends when
its stdin does: when the worker closes it, or dies.  A writer that dies (killed) fails
its batch, which goes back to the frontier; the next batch starts a new writer, which
repairs the dead one's file.  A writer that cannot start, or writers that fail
``FAILURES_IN_A_ROW`` batches in a row (they die, or raise), are a
:class:`WriterFailed`: the crawl cannot archive, and stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO, Any

from webcrawl.warc.files import Location, Members, WarcFiles, encode, repair_dir
from webcrawl.warc.records import Exchange, Original, fetch_records

logger = logging.getLogger(__name__)

_LENGTH = struct.Struct("<Q")


FAILURES_IN_A_ROW = 3  # batches the writers fail, none written between: no writer works
BATCH_BYTES = 64 << 20  # a batch's exchanges are sent in writes of about this size at most
_ERRORS_SHOWN = 4000  # characters of a dead writer's stderr quoted in the error


class WriterGone(RuntimeError):
    """The writer process ended (killed, or a fault of its own): the batch is not written."""


class WriterFailed(RuntimeError):
    """No writer can be started, or they keep dying: the crawl cannot archive."""


def _send(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    (length,) = _LENGTH.unpack(head)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError
    return pickle.loads(data)


# run by the writer's interpreter: the working directory's modules do not come first
# (``python -m`` would put them before the worker's), then the writer
_BOOT = (
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"  # (not there with PYTHONSAFEPATH)
    "    del sys.path[0]\n"
    "from webcrawl.warc.writer import main\n"
    "main()\n"
)


def _chunks(jobs: list[tuple[Exchange, Original | None]]) -> list[list[Any]]:
    """``jobs`` in runs of at most about ``BATCH_BYTES`` of exchanges (one job at least)."""
    runs: list[list[Any]] = [[]]
    size = 0
    for job in jobs:
        weight = len(job[0].received) + len(job[0].sent)
        if runs[-1] and size + weight > BATCH_BYTES:
            runs.append([])
            size = 0
        runs[-1].append(job)
        size += weight
    return runs


class WriterProcess:
    """The worker's side of its writer process (one thread calls it)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.repaired = 0  # files left open by gone writers that the writers repaired
        self.failures = 0  # batches the writers failed (died with, or raised) in a row
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    def start(self) -> None:
        """Start a writer; it repairs what gone writers left open in its directory, as
        :func:`~webcrawl.warc.files.repair_dir` (said here, and counted in
        ``repaired``).  Raises :class:`WriterFailed` if it does not start."""
        env = dict(os.environ)
        # the worker's imports, for a checkout on sys.path (or an egg under scrapyd)
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in _reap)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            self._reap()
            raise WriterFailed(f"cannot start the WARC writer ({sys.executable}): {exc}") from None
        try:
            (repaired,) = self._call(self.config)
        except (WriterGone, OSError, RuntimeError) as exc:
            self._reap()
            raise WriterFailed(f"the WARC writer did not start: {exc}") from None
        for path, kept, cut in repaired:
            logger.warning(
                "Repaired %s, left open by a WARC writer that is gone: %d records kept, "
                "%d bytes of an incomplete record cut off",
                path,
                kept,
                cut,
            )
        self.repaired += len(repaired)

    def write(self, jobs: list[tuple[Exchange, Original | None]]) -> tuple[list[Any], dict]:
        """Write the jobs' records (in a new writer, if the last one is gone), a run of
        about ``BATCH_BYTES`` at a time, each written and synced before the next (a batch
        that fails after its first run is handed back whole: those pages' records are
        written again); returns a result per job and the batch's counts.  Raises OSError
        when the directory refused the batch, :class:`WriterGone` when the writer died
        with it or failed it (a fault of its own), :class:`WriterFailed` once that
        happened ``FAILURES_IN_A_ROW`` times with no batch written between."""
        if self.failures >= FAILURES_IN_A_ROW:
            raise WriterFailed(f"the WARC writer failed {self.failures} times in a row")
        try:
            if self._proc is None or self._proc.poll() is not None:
                if self._proc is not None:  # (died between batches: nothing was lost)
                    logger.warning(
                        "the WARC writer process ended (exit status %s)%s",
                        self._proc.returncode,
                        self._said(),
                    )
                    self._reap()
                try:
                    self.start()
                except WriterFailed as exc:  # (at start, fatal; here, a failure of a batch)
                    raise WriterGone(str(exc)) from None
            results: list[Any] = []
            counts: dict[str, int] = {}
            for run in _chunks(jobs):
                done, ran = self._call(("write", run))
                results += done
                for name, value in ran.items():
                    counts[name] = counts.get(name, 0) + value
        except RuntimeError:  # (WriterGone, or the writer's own fault: not the disk's)
            self.failures += 1
            raise
        self.failures = 0
        return results, counts

    def close(self) -> None:
        """Close the writer's file (sorting its index) and end the writer."""
        if self._proc is None:
            return
        try:
            self._call(("close",))
        except WriterGone:
            logger.warning("The WARC writer was gone before its file could be closed")
        finally:
            self._reap()

    def _call(self, message: Any) -> Any:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise WriterGone("the WARC writer process is not running")
        try:
            _send(proc.stdin, message)
            answer = _receive(proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:  # (a broken pipe)
            if isinstance(exc, pickle.UnpicklingError):  # alive, but out of step
                proc.kill()
            said = self._said(wait=True)
            code = self._reap()
            raise WriterGone(f"the WARC writer process ended (exit status {code}){said}") from None
        kind, logs, *rest = answer
        for level, name, text in logs:
            logging.getLogger(name).log(level, "%s", text)
        if kind == "failed":
            number, text = rest
            raise OSError(number, text) if number is not None else OSError(text)
        if kind == "error":
            raise RuntimeError(f"the WARC writer failed:\n{rest[0]}")
        return rest

    def _said(self, wait: bool = False) -> str:
        """The end of what the writer said on stderr, if anything (``wait``: once it has
        ended, for a few seconds at most: a crash is still being reported)."""
        if wait and self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - _ERRORS_SHOWN))
        text = self._stderr.read().decode("utf-8", "replace").strip()
        return f"; it said:\n{text}" if text else ""

    def _reap(self) -> int | None:
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):  # (a broken pipe's unflushed bytes)
                        stream.close()
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        return code


# -- the writer process


class _Logs(logging.Handler):
    """Keeps the writer's log records for its next answer."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[int, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.name, self.format(record)))

    def take(self) -> list[tuple[int, str, str]]:
        taken, self.records = self.records, []
        return taken


def _results(
    files: WarcFiles, members: Members, jobs: list[tuple[Exchange, Original | None]], dedup: bool
) -> tuple[list[Any], dict[str, int]]:
    started = time.perf_counter()
    groups: list[list[Any]] = []
    made: list[Any] = []  # per job: (group index, kind, date, original after) or why not
    for exchange, original in jobs:
        try:
            records, after = fetch_records(exchange, original, dedup)
            encoded = [encode(record, members) for record in records]
        except Exception:  # a fault of ours for this one page: not an outage
            made.append(("unarchived", traceback.format_exc()))
            continue
        if not records:
            made.append(("unarchived", "the header block of its response does not end"))
            continue
        main = records[1]
        made.append((len(groups), main.rec_type, main.rec_headers.get_header("WARC-Date"), after))
        groups.append(encoded)
    encoded_at = time.perf_counter()
    where = files.write(groups)
    results: list[Any] = []
    for entry in made:
        if entry[0] == "unarchived":
            results.append(entry)
        else:
            group, kind, date, after = entry
            spot: Location = where[group][1]
            results.append(("ok", spot, kind, date, after))
    counts = {
        "records": sum(map(len, groups)),
        "bytes": sum(spot.length for spots in where for spot in spots),
        "encode_microseconds": int((encoded_at - started) * 1e6),
        "write_microseconds": int((time.perf_counter() - encoded_at) * 1e6),
    }
    return results, counts


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answer the worker until it closes ``requests``."""
    logs = _Logs()
    root = logging.getLogger()
    root.addHandler(logs)
    root.setLevel(logging.INFO)
    config = _receive(requests)
    directory = Path(config["directory"])
    repaired = [(str(path), kept, cut) for path, kept, cut in repair_dir(directory)]
    files = WarcFiles(
        directory, prefix=config["prefix"], max_size=config["max_size"], info=config["info"]
    )
    members = Members()
    dedup = bool(config["dedup"])
    _send(answers, ("ready", logs.take(), repaired))
    try:
        while True:
            try:
                message = _receive(requests)
            except EOFError:
                return  # the worker is gone, or done
            try:
                if message[0] == "write":
                    results, counts = _results(files, members, message[1], dedup)
                    answer: tuple[Any, ...] = ("written", logs.take(), results, counts)
                elif message[0] == "close":
                    files.close()
                    _send(answers, ("closed", logs.take(), files.serial))
                    return
                else:
                    raise ValueError(f"unknown message {message[0]!r}")
            except OSError as exc:  # the directory refused: the batch is not written
                answer = ("failed", logs.take(), exc.errno, exc.strerror or str(exc))
            except Exception:
                answer = ("error", logs.take(), traceback.format_exc())
            _send(answers, answer)
    finally:
        files.close()


def main() -> None:
    # the protocol has stdin and stdout to itself: a stray print goes to stderr
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    serve(requests, answers)


if __name__ == "__main__":  # (the worker runs it as _BOOT does)
    main()
