"""WARC files of one worker, their CDXJ indexes, and the repair of a killed worker's file.

One file at a time per worker, named the IIPC way
(``{prefix}-{timestamp17}-{serial}-{pid}~{hostname}.warc.gz``), gzip per record, written
as ``*.warc.gz.open`` beside ``*.cdxj.open`` and renamed when closed (the index sorted
then, as pywb's binary search needs); a new file is started once one reaches its maximum
size.  A batch is written, flushed and fsynced before :meth:`WarcFiles.write` returns:
the caller acknowledges pages only then.

Records are encoded (:func:`encode`: serialised, compressed into one gzip member by a
:class:`Members` compressor, their index line prepared) and written by the worker's
writer process (:mod:`webcrawl.warc.writer`), off the crawler's core; each batch's bytes
go in one ``write``, then a sync.

A writer holds an exclusive ``flock`` on its ``.open`` file for as long as it writes it.
A worker killed mid-record leaves the file unlocked, ending in an incomplete gzip member:
:func:`repair` (which takes the lock, so never under a live writer, nor twice at once)
cuts it after its last whole member, indexes again what remains (so the index matches
the file whatever the kill interrupted) and closes both.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import re
import socket
import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import surt
from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_timestamp
from warcio.warcwriter import WARCWriter
from zlib_ng import zlib_ng

from webcrawl.warc.records import WARC_VERSION, warcinfo_record

logger = logging.getLogger(__name__)

OPEN = ".open"
CREATING = ".creating"  # a file not yet locked by its writer (see WarcFiles._open)
WARC_SUFFIX = ".warc.gz"
INDEX_SUFFIX = ".cdxj"
GZIP_LEVEL = 6  # gzip's default; warcio's writer compresses at 9, for 1-2 % smaller files
_INDEXED = ("response", "revisit", "resource")
_STALE = 60.0  # seconds: an unlocked leftover (.creating, .tmp) older than this is dropped
_ONE_WRITE = 16 << 20  # bytes: a batch up to this size is joined and written at once


@dataclass(frozen=True)
class Location:
    """Where a record was written: file name (closed name), offset, compressed length."""

    file: str
    offset: int
    length: int


@dataclass(frozen=True)
class Encoded:
    """A record ready to write: one gzip member (``data``), and its CDXJ line but for the
    fields only the file knows (length, offset, file name), or None for a record pywb
    does not index."""

    data: bytes
    index: str | None


def cdxj_start(record: Any) -> str | None:
    """A record's CDXJ line (pywb's format, as ``cdxj-indexer`` writes it) up to its
    length, offset and file name; None for records pywb does not index (request,
    metadata, warcinfo)."""
    if record.rec_type not in _INDEXED:
        return None
    fields = getattr(record, "cdx", None)  # ours (records.Record) know theirs
    if fields is None:
        fields = _cdx_fields(record)
    url, stamp, mime, status, digest = fields
    key = surt_key(url)
    out: dict[str, str] = {"url": url}
    if mime:
        out["mime"] = mime
    if status:
        out["status"] = status
    if digest:
        out["digest"] = digest
    return f"{key} {stamp} {json.dumps(out)[:-1]}"


# a URL whose SURT is its origin's and a path made lower case, no trailing slash: no
# query, fragment, user, escape, dot segment, empty segment or character surt would
# change
_PLAIN_URL = re.compile(
    r"(https?://[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?)"
    r"((?:/(?![./])[A-Za-z0-9._~-]*)*)\Z"
)
_ORIGINS: dict[str, str] = {}


def surt_key(url: str) -> str:
    """The SURT of ``url`` as pywb and ``cdxj-indexer`` index it (``surt.surt``).

    ``surt.surt`` costs about 15 µs a URL.  For a plain URL (most, in a crawl) its work
    on the host (``www.`` dropped, default port, reversed labels or address) is the same
    for every URL of the origin, and on the path only a lower case and a trailing slash
    dropped: the origin's part is remembered, and the path done here.
    ``tests/test_warc.py`` checks this against ``surt.surt`` on generated URLs."""
    plain = _PLAIN_URL.match(url)
    if plain is None:
        return _surt(url)
    origin, path = plain.groups()
    head = _ORIGINS.get(origin)
    if head is None:
        if len(_ORIGINS) >= 10_000:
            _ORIGINS.clear()
        try:
            head = surt.surt(origin + "/").removesuffix("/")
        except Exception:  # (a port above 65535): the slow path's answer
            head = ""
        _ORIGINS[origin] = head
    if not head:
        return _surt(url)
    path = (path or "/").lower()
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return head + path


def _surt(url: str) -> str:
    try:
        return surt.surt(url)
    except Exception:  # (as cdxj-indexer: a URL surt cannot read is its own key)
        return url


def _cdx_fields(record: Any) -> tuple[str, str, str, str, str]:
    """(url, timestamp14, mime, status, digest) of a record read by warcio."""
    headers = record.rec_headers
    http = record.http_headers
    mime = status = ""
    if record.rec_type == "revisit":
        mime = "warc/revisit"
    elif http is not None:
        mime = (http.get_header("Content-Type") or "").split(";")[0].strip()
    if http is not None:
        status = http.get_statuscode() or ""
    return (
        headers.get_header("WARC-Target-URI"),
        iso_date_to_timestamp(headers.get_header("WARC-Date")),
        mime,
        status,
        headers.get_header("WARC-Payload-Digest") or "",
    )


def cdxj_finish(start: str, filename: str, offset: int, length: int) -> str:
    tail = f'"length": "{length}", "offset": "{offset}", "filename": {json.dumps(filename)}}}\n'
    return f"{start}, {tail}"  # (the fields before always hold the url)


def cdxj_line(record: Any, filename: str, offset: int, length: int) -> str | None:
    """A record's whole CDXJ line (None for a record pywb does not index)."""
    start = cdxj_start(record)
    return None if start is None else cdxj_finish(start, filename, offset, length)


def serialize(record: Any) -> bytes:
    """A record's bytes, uncompressed."""
    ours = getattr(record, "serialize", None)
    if ours is not None:  # records.Record
        return ours()
    out = io.BytesIO()
    WARCWriter(out, gzip=False, warc_version=WARC_VERSION).write_record(record)
    return out.getvalue()


def encode(record: Any, members: Members | None = None) -> Encoded:
    """``record`` as one gzip member (made by ``members``, else by a compressor of its
    own), and its index line's start."""
    members = members or Members()
    parts = getattr(record, "parts", None)
    if parts is None:  # a warcio record
        return Encoded(members.member(serialize(record)), cdxj_start(record))
    head, payload, tail = parts()
    return Encoded(members.member(head, payload, tail, packed=record.packed), cdxj_start(record))


_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no mtime, OS unknown
_LAST_BLOCK = b"\x03\x00"  # an empty, final block of fixed codes


class Members:
    """Gzip members of records, made by one long-lived raw deflate compressor.

    ``zlib.compress`` sets up and clears a compressor of some 256 KB for every call,
    which on records of a few KB costs more than compressing them (12 µs of 15 for a
    600-byte request record).  This compressor is flushed with ``Z_FULL_FLUSH`` after each
    record instead: the output ends on a byte boundary with no history carried over, so
    each record's output is a deflate stream of its own once an empty final block is
    added; a gzip header and trailer (CRC-32, length) make it a member (pigz's trick; 6
    bytes more a member).  Not thread-safe: one per thread.

    The deflate is zlib-ng's (python-zlib-ng): the same format and, at level 6, the same
    size as zlib's, in 55 % of its time (``python -m tools.bench warc_members``).  A
    payload that is compressed already (``packed``: a gzip or brotli body, an image)
    goes into stored blocks of a second compressor at level 0, between the deflated
    parts before and after it: 30 times faster than deflating it, and no larger."""

    def __init__(self, level: int = GZIP_LEVEL) -> None:
        self.level = level
        self._deflate = self._new(level)
        self._store = self._new(0)

    @staticmethod
    def _new(level: int) -> Any:
        return zlib_ng.compressobj(level, zlib_ng.DEFLATED, -zlib_ng.MAX_WBITS)

    def member(
        self, head: bytes, payload: bytes = b"", tail: bytes = b"", *, packed: bool = False
    ) -> bytes:
        """One gzip member of ``head + payload + tail``."""
        deflate, full = self._deflate, zlib_ng.Z_FULL_FLUSH
        try:
            if packed:  # (stored blocks refer to nothing before: a sync flush aligns them)
                store = self._store
                body = b"".join(
                    (
                        deflate.compress(head),
                        deflate.flush(full),
                        store.compress(payload),
                        store.compress(tail),
                        store.flush(zlib_ng.Z_SYNC_FLUSH),
                    )
                )
            else:
                body = b"".join(
                    (
                        deflate.compress(head),
                        deflate.compress(payload),
                        deflate.compress(tail),
                        deflate.flush(full),
                    )
                )
        except BaseException:  # their state is unknown: the next record starts afresh
            self._deflate, self._store = self._new(self.level), self._new(0)
            raise
        crc = zlib_ng.crc32(tail, zlib_ng.crc32(payload, zlib_ng.crc32(head)))
        size = len(head) + len(payload) + len(tail)
        trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
        return b"".join((_GZIP_HEADER, body, _LAST_BLOCK, trailer))


def _sync_dir(directory: Path) -> None:
    """Make a file's creation or renaming in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _members(path: Path, chunk: int = 1 << 20) -> Iterator[tuple[int, int, bytes]]:
    """(offset, compressed length, data) of each whole gzip member of ``path``, stopping
    at the first that does not end (the one a killed writer was writing: a member is whole
    only once its trailer is written, which the writer does last)."""
    with open(path, "rb") as stream:
        offset = 0
        pending = b""
        while True:
            inflate = zlib.decompressobj(wbits=31)
            out = []
            used = 0
            while not inflate.eof:
                data = pending or stream.read(chunk)
                pending = b""
                if not data:
                    return  # the file ends inside this member (or, at offset, is done)
                try:
                    out.append(inflate.decompress(data))
                except zlib.error as exc:
                    logger.debug("%s: not gzip at %d (%s)", path, offset, exc)
                    return
                used += len(data) - len(inflate.unused_data)
            pending = inflate.unused_data
            yield offset, used, b"".join(out)
            offset += used


def _records(path: Path) -> Iterator[tuple[Any, int, int]]:
    """(record, offset, length) of each whole record of a gzip-per-record WARC."""
    for offset, length, data in _members(path):
        try:
            record = next(iter(ArchiveIterator(io.BytesIO(data))))
        except Exception as exc:
            logger.debug("%s: no WARC record at %d (%s)", path, offset, exc)
            return
        yield record, offset, length


def _index_path(warc: Path) -> Path:
    """``x.warc.gz`` -> ``x.cdxj`` (the same with ``.open`` while it is written)."""
    name = warc.name
    if name.endswith(OPEN):
        base = name.removesuffix(OPEN).removesuffix(WARC_SUFFIX)
        return warc.with_name(base + INDEX_SUFFIX + OPEN)
    return warc.with_name(name.removesuffix(WARC_SUFFIX) + INDEX_SUFFIX)


def _write_sorted_index(index: Path, lines: Iterable[str]) -> None:
    tmp = index.with_name(f"{index.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.writelines(sorted(lines))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, index)


def writer_alive(path: Path) -> bool:
    """Whether a worker still writes ``path`` (it holds the file's lock)."""
    try:
        with open(path, "rb") as stream:
            try:
                fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except FileNotFoundError:
        return False


class WriterAlive(Exception):
    """The file is locked by the worker that writes it: not to be repaired."""


def repair(path: Path) -> tuple[Path, int, int]:
    """Cut ``path`` (an ``.open`` WARC of a worker that is gone) after its last whole
    record, write its index again (sorted), and give both their closed names.  Returns the
    closed path, the records kept and the bytes cut off.  Raises :class:`WriterAlive` if
    a worker holds the file, FileNotFoundError if another repair got it first."""
    final = path.with_name(path.name.removesuffix(OPEN))
    with open(path, "r+b") as stream:
        try:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WriterAlive(str(path)) from None
        if not path.exists():  # renamed by a repair that held the lock before us
            raise FileNotFoundError(str(path))
        size = os.fstat(stream.fileno()).st_size
        end = kept = 0
        lines = []
        for record, offset, length in _records(path):
            end = offset + length
            kept += 1
            line = cdxj_line(record, final.name, offset, length)
            if line:
                lines.append(line)
        with contextlib.suppress(FileNotFoundError):
            _index_path(path).unlink()
        if kept == 0:  # not even its warcinfo: nothing to keep
            path.unlink()
            _sync_dir(path.parent)
            return final, 0, size
        stream.truncate(end)
        stream.flush()
        os.fsync(stream.fileno())
        _write_sorted_index(_index_path(final), lines)
        os.replace(path, final)  # (under the lock: a second repair finds it gone)
    _sync_dir(path.parent)
    return final, kept, size - end


def repair_dir(directory: Path) -> list[tuple[Path, int, int]]:
    """Repair every ``.open`` WARC in ``directory`` that no worker holds (and drop the
    empty ones a worker left between creating and locking them)."""
    done = []
    for path in sorted(directory.glob(f"*{WARC_SUFFIX}{OPEN}")):
        try:
            done.append(repair(path))
        except (WriterAlive, FileNotFoundError):
            continue
        except OSError as exc:  # (one that cannot be opened: said, and left for a hand)
            logger.warning("Cannot repair %s: %s", path, exc)
    # what a writer killed between creating and locking a file, or a repair killed while
    # writing an index, leaves: unlocked, and old
    for pattern in (f"*{WARC_SUFFIX}{CREATING}", f"*{INDEX_SUFFIX}.*.tmp"):
        for path in directory.glob(pattern):
            with contextlib.suppress(OSError):
                if time.time() - path.stat().st_mtime > _STALE and not writer_alive(path):
                    path.unlink()
    return done


class WarcFiles:
    """The WARC files one worker writes in ``directory``."""

    def __init__(
        self,
        directory: Path,
        *,
        prefix: str = "webcrawl",
        max_size: int = 10**9,
        info: dict[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.prefix = prefix
        self.max_size = max_size
        self.info = dict(info or {})
        self.serial = 0
        self._warc: Any = None  # the open file (binary), locked
        self._index: Any = None  # its index, being appended to
        self._end = 0  # the open file's size, once its batch is written
        self.name = ""  # the closed name of the file being written

    # -- files

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.serial += 1
        now = time.time()
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}"
        host = socket.gethostname()
        self.name = f"{self.prefix}-{stamp}-{self.serial:05d}-{os.getpid()}~{host}{WARC_SUFFIX}"
        warc = self.directory / (self.name + OPEN)
        # made under a name no repair looks at, locked, then given its .open name: a
        # repair never sees an .open file its writer has not locked yet
        creating = self.directory / (self.name + CREATING)
        fd = os.open(creating, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held until the file is closed: see repair()
            os.rename(creating, warc)
            self._warc = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                creating.unlink()
            raise
        try:
            self._index = open(_index_path(warc), "x", encoding="utf-8")  # noqa: SIM115
            self._warc.write(encode(warcinfo_record(self.name, self.info)).data)
            self._end = self._warc.tell()
            _sync_dir(self.directory)
        except BaseException:
            self._abandon()
            raise
        logger.info("Writing WARC records to %s", warc)

    def close(self) -> None:
        """Flush and close the file being written, sort its index, and give both their
        closed names."""
        if self._warc is None:
            return
        warc = self.directory / (self.name + OPEN)
        self._warc.flush()
        os.fsync(self._warc.fileno())
        self._index.close()
        index = Path(self._index.name)
        with open(index, encoding="utf-8") as lines:
            _write_sorted_index(index.with_name(index.name.removesuffix(OPEN)), lines)
        index.unlink()
        os.replace(warc, warc.with_name(warc.name.removesuffix(OPEN)))
        self._warc.close()  # (the lock goes with it)
        self._warc = self._index = None
        _sync_dir(self.directory)

    # -- records

    def write(self, groups: Iterable[list[Encoded]]) -> list[list[Location]]:
        """Write each group of records (one fetch's, already gzip members) in order, flush
        and fsync the file, then its index lines, and return where each record went.  A
        new file is started when the current one has reached ``max_size`` (between groups:
        a fetch's records stay in one file).  The bytes of a batch go in one ``write``."""
        where: list[list[Location]] = []
        lines: list[str] = []
        chunks: list[bytes] = []
        try:
            for group in groups:
                if self._warc is not None and self._end >= self.max_size:
                    self._flush(chunks, lines)
                    self.close()
                if self._warc is None:
                    self._open()
                spots = []
                for record in group:
                    offset, length = self._end, len(record.data)
                    chunks.append(record.data)
                    self._end += length
                    spots.append(Location(self.name, offset, length))
                    if record.index is not None:
                        lines.append(cdxj_finish(record.index, self.name, offset, length))
                where.append(spots)
            self._flush(chunks, lines)
        except BaseException:  # (a full disk, or anything between counting and writing)
            self._abandon()
            raise
        return where

    def _flush(self, chunks: list[bytes], lines: list[str]) -> None:
        """Write ``chunks`` to the file and sync it, then ``lines`` to its index."""
        if self._warc is None:
            return
        if sum(map(len, chunks)) <= _ONE_WRITE:
            self._warc.write(b"".join(chunks))  # one system call, one wait for the GIL
        else:  # (not a second copy of large pages)
            self._warc.writelines(chunks)
        self._warc.flush()
        if self._warc.tell() != self._end:
            raise OSError(f"{self.name}: {self._warc.tell()} bytes written, not {self._end}")
        os.fsync(self._warc.fileno())  # the records, before the index lines that name them
        self._index.write("".join(lines))
        self._index.flush()  # (an index repair() can rebuild: not fsynced per batch)
        chunks.clear()
        lines.clear()

    def _abandon(self) -> None:
        """After a failed write (a full disk): the file may end in a partial record.
        Repair it (cut back to its last whole record) and close it, so that the next
        batch starts a clean file."""
        if self._warc is None:
            return
        path = self.directory / (self.name + OPEN)
        for stream in (self._index, self._warc):  # (closing the WARC releases its lock)
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._warc = self._index = None
        try:
            repair(path)
        except (OSError, WriterAlive) as exc:
            logger.warning("Could not repair %s after a failed write (%s)", path, exc)
