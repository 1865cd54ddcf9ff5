"""WARC files of one worker, their CDXJ indexes, and the repair of a killed worker's file.

One file at a time per worker, named the IIPC way
(``{prefix}-{timestamp17}-{serial}-{pid}~{hostname}.warc.gz``), gzip per record, written
as ``*.warc.gz.open`` beside ``*.cdxj.open`` and renamed when closed; a new file is
started once one reaches its maximum size.  A batch is written, flushed and fsynced (the
WARC, then its index lines) before :meth:`WarcFiles.write` returns: the caller
acknowledges pages only then.

A worker killed mid-record leaves an ``.open`` file ending in an incomplete gzip member.
:func:`repair` cuts the file after its last whole record, indexes again what remains
(so the index matches the file whatever the kill interrupted) and closes both.  A file
is repaired only once its writer is gone (:func:`writer_alive`).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import socket
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import surt
from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_timestamp
from warcio.warcwriter import WARCWriter

from webcrawl.warc.records import WARC_VERSION, warcinfo_record

logger = logging.getLogger(__name__)

OPEN = ".open"
WARC_SUFFIX = ".warc.gz"
INDEX_SUFFIX = ".cdxj"
_INDEXED = ("response", "revisit", "resource")


@dataclass(frozen=True)
class Location:
    """Where a record was written: file name (closed name), offset, compressed length."""

    file: str
    offset: int
    length: int


def cdxj_line(record: Any, filename: str, offset: int, length: int) -> str | None:
    """The CDXJ line (pywb's format, as ``cdxj-indexer`` writes it) of a record, or None
    for a record pywb does not index (request, metadata, warcinfo)."""
    if record.rec_type not in _INDEXED:
        return None
    url = record.rec_headers.get_header("WARC-Target-URI")
    try:
        key = surt.surt(url)
    except Exception:
        key = url
    fields: dict[str, str] = {"url": url}
    http = record.http_headers
    if record.rec_type == "revisit":
        fields["mime"] = "warc/revisit"
    elif http is not None:
        mime = (http.get_header("Content-Type") or "").split(";")[0].strip()
        if mime:
            fields["mime"] = mime
    if http is not None and http.get_statuscode():
        fields["status"] = http.get_statuscode()
    digest = record.rec_headers.get_header("WARC-Payload-Digest")
    if digest:
        fields["digest"] = digest
    fields.update(length=str(length), offset=str(offset), filename=filename)
    stamp = iso_date_to_timestamp(record.rec_headers.get_header("WARC-Date"))
    return f"{key} {stamp} {json.dumps(fields)}\n"


def writer_alive(path: Path) -> bool:
    """Whether the worker that writes ``path`` (named ``…-{pid}~{hostname}.warc.gz.open``)
    may still be running: a live process of that pid on this host, or another host's."""
    name = path.name.removesuffix(OPEN).removesuffix(WARC_SUFFIX)
    tail = name.rsplit("-", 1)[-1]
    pid_text, _, host = tail.partition("~")
    if host != socket.gethostname():
        return True  # another host's worker: not ours to judge
    try:
        os.kill(int(pid_text), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


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
        except (StopIteration, Exception) as exc:
            logger.debug("%s: no WARC record at %d (%s)", path, offset, exc)
            return
        yield record, offset, length


def repair(path: Path) -> tuple[Path, int, int]:
    """Cut ``path`` (an ``.open`` WARC of a worker that is gone) after its last whole
    record, write its index again, and give both their closed names.  Returns the closed
    path, the records kept and the bytes cut off."""
    final = path.with_name(path.name.removesuffix(OPEN))
    size = path.stat().st_size
    end = 0
    kept = 0
    lines = []
    for record, offset, length in _records(path):
        end = offset + length
        kept += 1
        line = cdxj_line(record, final.name, offset, length)
        if line:
            lines.append(line)
    with open(path, "r+b") as stream:
        stream.truncate(end)
        stream.flush()
        os.fsync(stream.fileno())
    index = _index_path(final)
    tmp = index.with_name(index.name + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, index)
    stale = index.with_name(index.name + OPEN)
    if stale.exists():
        stale.unlink()
    os.replace(path, final)
    return final, kept, size - end


def repair_dir(directory: Path) -> list[tuple[Path, int, int]]:
    """Repair every ``.open`` WARC in ``directory`` whose writer is gone."""
    done = []
    for path in sorted(directory.glob(f"*{WARC_SUFFIX}{OPEN}")):
        if writer_alive(path):
            continue
        done.append(repair(path))
    return done


def _index_path(warc: Path) -> Path:
    """``x.warc.gz`` -> ``x.cdxj`` (the same with ``.open`` while it is written)."""
    name = warc.name
    if name.endswith(OPEN):
        base = name.removesuffix(OPEN).removesuffix(WARC_SUFFIX)
        return warc.with_name(base + INDEX_SUFFIX + OPEN)
    return warc.with_name(name.removesuffix(WARC_SUFFIX) + INDEX_SUFFIX)


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
        self._warc: IO[bytes] | None = None
        self._index: IO[str] | None = None
        self._writer: WARCWriter | None = None
        self.name = ""  # the closed name of the file being written
        self.records = 0
        self.bytes = 0

    # -- files

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.serial += 1
        now = time.time()
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}"
        host = socket.gethostname()
        self.name = f"{self.prefix}-{stamp}-{self.serial:05d}-{os.getpid()}~{host}{WARC_SUFFIX}"
        warc = self.directory / (self.name + OPEN)
        self._warc = open(warc, "xb")  # noqa: SIM115 - kept open across batches
        self._index = open(_index_path(warc), "x", encoding="utf-8")  # noqa: SIM115
        self._writer = WARCWriter(self._warc, gzip=True, warc_version=WARC_VERSION)
        self._writer.write_record(warcinfo_record(self.name, self.info))
        logger.info("Writing WARC records to %s", warc)

    def close(self) -> None:
        """Flush and close the file being written, and give it (and its index) their
        closed names."""
        if self._warc is None:
            return
        warc = Path(self._warc.name)
        self._sync()
        self._warc.close()
        assert self._index is not None
        self._index.close()
        index = Path(self._index.name)
        os.replace(index, index.with_name(index.name.removesuffix(OPEN)))
        os.replace(warc, warc.with_name(warc.name.removesuffix(OPEN)))
        self._warc = self._index = self._writer = None

    def _sync(self) -> None:
        assert self._warc is not None
        assert self._index is not None
        self._warc.flush()
        os.fsync(self._warc.fileno())
        self._index.flush()
        os.fsync(self._index.fileno())

    # -- records

    def write(self, groups: Iterable[list[Any]]) -> list[list[Location]]:
        """Write each group of records (one fetch's) in order, flush and fsync the file
        and its index, and return where each record went.  A new file is started when
        the current one has reached ``max_size`` (between groups: a fetch's records stay
        in one file)."""
        where: list[list[Location]] = []
        lines: list[str] = []
        try:
            for group in groups:
                if self._warc is not None and self._warc.tell() >= self.max_size:
                    self._flush_lines(lines)
                    self.close()
                if self._warc is None:
                    self._open()
                assert self._warc is not None
                assert self._writer is not None
                spots = []
                for record in group:
                    offset = self._warc.tell()
                    self._writer.write_record(record)
                    length = self._warc.tell() - offset
                    spots.append(Location(self.name, offset, length))
                    line = cdxj_line(record, self.name, offset, length)
                    if line:
                        lines.append(line)
                    self.records += 1
                    self.bytes += length
                where.append(spots)
            self._flush_lines(lines)
        except OSError:
            self._abandon()
            raise
        return where

    def _flush_lines(self, lines: list[str]) -> None:
        if self._warc is None:
            return
        self._warc.flush()
        os.fsync(self._warc.fileno())  # the records before the index lines that name them
        assert self._index is not None
        self._index.write("".join(lines))
        lines.clear()
        self._sync()

    def _abandon(self) -> None:
        """After a failed write (a full disk): the file may end in a partial record.
        Close it as it is and repair it (cut back to its last whole record), so the next
        batch starts a clean file."""
        if self._warc is None:
            return
        path = Path(self._warc.name)
        for stream in (self._warc, self._index):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        self._warc = self._index = self._writer = None
        try:
            repair(path)
        except OSError as exc:
            logger.warning("Could not repair %s after a failed write (%s)", path, exc)
