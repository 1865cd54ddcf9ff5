"""Write every fetched page to WARC files, before the store: a page in the webtable is in
a WARC.

With ``WARC_ENABLED`` the download handler keeps the bytes of each exchange
(:mod:`webcrawl.handlers.tee`); this pipeline hands them, in batches, to the worker's
WARC writer, a process of its own (:mod:`webcrawl.warc.writer`), which makes a page's
records (:mod:`webcrawl.warc.records`: request, response or revisit, metadata),
compresses them and writes them into its current file in ``WARC_DIR``
(:mod:`webcrawl.warc.files`), off the crawler's core.  A batch is what came while the
last one was written (group commit), at most ``WARC_BATCH_SIZE`` pages.  (Not every so
many seconds, as the store writes: while a page waits, so does its response with all
Scrapy keeps of it, and the garbage collector's work on them cost more than the write.)
An item is done when its batch is written, flushed and fsynced; until then Scrapy keeps
its request in progress, so the frontier acknowledges the request only after that.

The item gains ``warc`` (where its record is: file, offset, length, type, date) and
``warc_original`` (the page's last full capture, which the next fetch's revisit refers
to; read from the page's previous row by the change pipeline).

A batch that cannot be written (a full disk, an unwritable directory, a writer that was
killed) is not acknowledged: its items raise :class:`~webcrawl.frontier.requeue.Requeue`
and the worker pauses its fetches until the directory accepts a write again, like a
store outage (``warc/outages``); the next batch starts a new writer if need be.  Each
writer, as it starts, repairs the files that killed writers left ``.open``
(``webcrawl warc repair``).  A ``WARC_DIR`` that cannot be written, or a writer that
cannot start, fails here, at start; writers that keep dying
(:class:`~webcrawl.warc.writer.WriterFailed`) stop the crawl (``warc_writer_failed``),
their pages handed back to the frontier.

Stats: ``warc/records``, ``warc/responses``, ``warc/revisits``, ``warc/bytes``,
``warc/files``, ``warc/repaired_files``, ``warc/requeued``, ``warc/unarchived`` (a page
whose records could not be made: logged with its traceback; it is stored without
``warc``), and the writer's time, ``warc/encode_seconds`` (making and compressing
records) and ``warc/write_seconds`` (writing and syncing them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import weakref
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from webcrawl.frontier.requeue import Requeue
from webcrawl.page import Page, wire_of
from webcrawl.pipelines.batches import ThreadedBatches
from webcrawl.pipelines.outage import StoreOutage
from webcrawl.settings_check import positive_int
from webcrawl.warc.records import Exchange, Original
from webcrawl.warc.writer import WriterFailed, WriterProcess

logger = logging.getLogger(__name__)

_PIPELINES: weakref.WeakKeyDictionary[Crawler, WarcPipeline] = weakref.WeakKeyDictionary()


def warc_dir(settings: Any) -> Path:
    """``WARC_DIR``, or ``warc`` in ``WEBCRAWL_DATA_DIR``."""
    value = settings.get("WARC_DIR") or ""
    if value:
        return Path(value)
    return Path(settings.get("WEBCRAWL_DATA_DIR") or ".webcrawl") / "warc"


def check_writable(directory: Path) -> None:
    """Raise OSError unless a file can be written and synced in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".probe-{os.getpid()}-{socket.gethostname()}"
    try:
        with open(probe, "wb") as stream:
            stream.write(b"\0" * 65536)
            stream.flush()
            os.fsync(stream.fileno())
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


class WarcOutage(StoreOutage):
    """``WARC_DIR`` refused a write: paused like a store outage, checked by writing."""

    what = "WARC_DIR"
    stat = "warc"

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.directory = warc_dir(crawler.settings)

    @property
    def target(self) -> str:
        return str(self.directory)

    def probe(self) -> None:
        check_writable(self.directory)


class WarcPipeline(ThreadedBatches):
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("WARC_ENABLED"):
            raise NotConfigured("WARC_ENABLED is off")
        self.stats = crawler.stats
        self.directory = warc_dir(settings)
        try:
            check_writable(self.directory)
        except OSError as exc:
            raise ValueError(f"WARC_DIR={str(self.directory)!r} cannot be written: {exc}") from None
        max_size = positive_int(settings, "WARC_MAX_SIZE")
        self.batch_size = positive_int(settings, "WARC_BATCH_SIZE")
        self.flush_interval = 0.0  # group commit (see above)
        self.dedup = settings.getbool("WARC_DEDUP")
        crawl = settings.get("WEBCRAWL_CRAWL") or settings.get("BOT_NAME") or "webcrawl"
        robots = "obey" if settings.getbool("ROBOTSTXT_OBEY") else "ignore"
        info = {
            "software": _software(),
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "hostname": socket.gethostname(),
            "isPartOf": crawl,
            "robots": robots,
            "http-header-user-agent": str(settings.get("USER_AGENT") or ""),
        }
        operator = settings.get("WARC_OPERATOR") or ""
        if operator:
            info["operator"] = str(operator)
        self.writer = WriterProcess(
            {
                "directory": str(self.directory),
                "prefix": str(settings.get("WARC_PREFIX") or "webcrawl"),
                "max_size": max_size,
                "info": info,
                "dedup": self.dedup,
            }
        )
        self._files: set[str] = set()  # the files written to (warc/files)
        self._stopping = False  # the writer failed: the crawl is being stopped
        self.crawler = crawler
        self._start_batches("webcrawl-warc")
        self.outage = WarcOutage.of(crawler)
        _PIPELINES[crawler] = self

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcPipeline:
        return cls(crawler)

    async def open_spider(self) -> None:
        """Start the writer (which repairs what killed writers left open); one that
        cannot start stops the crawl here."""
        self._run_batches()
        try:
            await maybe_deferred_to_future(self._in_thread(self.writer.start))
        except WriterFailed as exc:
            logger.error("Cannot start: %s", exc)
            raise
        self.stats.set_value("warc/repaired_files", self.writer.repaired)
        logger.info("Writing WARC files in %s", self.directory)

    @staticmethod
    def of(crawler: Crawler) -> WarcPipeline | None:
        """The crawler's WARC pipeline (None when WARC output is off)."""
        return _PIPELINES.get(crawler)

    async def process_item(self, item: Any) -> Any:
        wire = wire_of(item) if isinstance(item, Page) else None
        if wire is None or wire.archived:
            return item  # no exchange to archive (a page of no download, a failure)
        original = _original(item.warc_original) if self.dedup else None
        try:
            exchange = _exchange(item)
        except Exception:  # a fault of ours for this one page: it goes on unarchived
            logger.exception("Cannot make the WARC records of %s", item.final_url)
            self.stats.inc_value("warc/unarchived")
            return item
        await self._written_with_batch((item, (exchange, original)))
        return item

    async def close_spider(self) -> None:
        await self._close_batches(self.writer.close)
        self.outage.close()
        self.stats.set_value("warc/files", len(self._files))

    def _write(self, batch: list[tuple[Page, tuple[Exchange, Original | None]]]) -> Any:
        """Runs on the WARC thread: the batch handed to the writer, which answers once its
        records are written and synced."""
        return self.writer.write([job for _, job in batch])

    def _written(self, answer: Any, batch: list[tuple[Page, Any]]) -> None:
        """The items learn where their records are (on the reactor's thread)."""
        results, counts = answer
        kinds = {"response": 0, "revisit": 0}
        for (page, _), result in zip(batch, results, strict=True):
            if result[0] == "unarchived":
                logger.error("Cannot make the WARC records of %s: %s", page.final_url, result[1])
                self.stats.inc_value("warc/unarchived")
                continue
            _, spot, kind, date, after = result
            self._files.add(spot.file)
            wire = wire_of(page)
            if wire is not None:
                wire.archived = True
            kinds["revisit" if kind == "revisit" else "response"] += 1
            page.warc = {
                "file": spot.file,
                "offset": spot.offset,
                "length": spot.length,
                "type": kind,
                "date": date,
            }
            page.warc_original = (
                None
                if after is None
                else {
                    "target": after.target,
                    "date": after.date,
                    "digest": after.digest,
                    "entity": after.entity,
                }
            )
        self.stats.set_value("warc/repaired_files", self.writer.repaired)
        self.stats.inc_value("warc/records", counts.get("records", 0))
        self.stats.inc_value("warc/responses", kinds["response"])
        self.stats.inc_value("warc/revisits", kinds["revisit"])
        self.stats.inc_value("warc/bytes", counts.get("bytes", 0))
        self.stats.inc_value("warc/encode_seconds", counts.get("encode_microseconds", 0) / 1e6)
        self.stats.inc_value("warc/write_seconds", counts.get("write_microseconds", 0) / 1e6)

    def _failed(self, failure: Any, batch: list[tuple[Page, Any]]) -> Requeue:
        self.stats.inc_value("warc/requeued", len(batch))
        self.stats.set_value("warc/repaired_files", self.writer.repaired)
        if failure.check(WriterFailed):  # no writer works: the crawl cannot archive
            if not self._stopping:
                self._stopping = True
                logger.error("Stopping the crawl: %s", failure.getErrorMessage())
                deferred_from_coro(
                    self.crawler.engine.close_spider_async(reason="warc_writer_failed")
                )
            return Requeue(f"WARC writer failed: {failure.getErrorMessage()}", 0.0)
        if not failure.check(OSError):  # not the disk: a fault of ours, shown in full
            logger.error("WARC write failed:\n%s", failure.getTraceback())
        urls = [ItemAdapter(item).get("url", "?") for item, _ in batch]
        return self._give_back(failure, urls, f"the WARC records of {len(batch)} pages", "WARC")


def _software() -> str:
    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
            return "unknown"

    return f"webcrawl/{of('webcrawl')} (Scrapy/{of('scrapy')}, warcio/{of('warcio')})"


def _exchange(page: Page) -> Exchange:
    capture = wire_of(page)
    assert capture is not None
    verdicts: dict[str, Any] = {
        "fetchTimeMs": int(page.fetched_at * 1000),
        "status": page.status,
        "depth": page.depth,
        "simhash": page.simhash,
        "previousSimhash": page.previous_simhash,
        "distance": page.distance,
        "changed": None if page.changed is None else str(page.changed).lower(),
        "kind": page.kind,
        "outlink": list(page.outlinks),
    }
    return Exchange(
        url=page.final_url or page.url,
        sent=bytes(capture.sent),
        received=bytes(capture.received),
        peer=capture.peer,
        date=capture.started,
        truncated=capture.truncated,
        proxy=capture.proxy,
        verdicts=verdicts,
    )


def _original(value: Any) -> Original | None:
    if not isinstance(value, dict):
        return None
    try:
        return Original(
            str(value["target"]),
            str(value["date"]),
            str(value["digest"]),
            str(value.get("entity") or ""),
        )
    except KeyError:
        return None
