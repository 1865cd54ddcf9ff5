"""Names of a crawl's Redis keys, all under ``webcrawl:<crawl>:``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CrawlKeys:
    crawl: str

    @property
    def prefix(self) -> str:
        return f"webcrawl:{self.crawl}:"

    @property
    def queue(self) -> str:
        """Sorted set of serialised requests, by priority then arrival."""
        return self.prefix + "queue"

    @property
    def seq(self) -> str:
        """Counter that orders requests of equal priority first-in first-out."""
        return self.prefix + "seq"

    @property
    def seen(self) -> str:
        """Set of request fingerprints (the dupefilter)."""
        return self.prefix + "seen"

    @property
    def start(self) -> str:
        """List of seed URLs submitted to a running crawl (``webcrawl submit``)."""
        return self.prefix + "start"

    @property
    def scope(self) -> str:
        """Set of scope keys (hosts or domains) the crawl's seeds put in scope."""
        return self.prefix + "scope"

    @property
    def workers(self) -> str:
        """Set of worker ids that have registered."""
        return self.prefix + "workers"

    @property
    def busy(self) -> str:
        """Hash of worker id -> time of its last pop, for workers not idle."""
        return self.prefix + "busy"

    @property
    def worker_prefix(self) -> str:
        return self.prefix + "worker:"

    def worker(self, worker_id: str) -> str:
        """A worker's heartbeat (JSON, expires when the worker stops beating)."""
        return self.worker_prefix + worker_id

    def all_patterns(self) -> list[str]:
        return [self.prefix + "*"]
