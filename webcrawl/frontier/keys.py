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
    def host_queue_prefix(self) -> str:
        """``<prefix>hq:<host>``: a host's requests, by priority then arrival."""
        return self.prefix + "hq:"

    def host_queue(self, host: str) -> str:
        return self.host_queue_prefix + host

    @property
    def overflow_prefix(self) -> str:
        """``<prefix>hqo:<host>``: a host's requests beyond FRONTIER_MAX_PER_HOST."""
        return self.prefix + "hqo:"

    @property
    def ready(self) -> str:
        """Sorted set of hosts with queued requests, by the time they may be fetched from."""
        return self.prefix + "ready"

    @property
    def next(self) -> str:
        """Hash host -> earliest time its next request may be sent (last send + its delay)."""
        return self.prefix + "next"

    @property
    def delay(self) -> str:
        """Hash host -> politeness delay in seconds, where it differs from the default."""
        return self.prefix + "delay"

    @property
    def delay_hold(self) -> str:
        """Hash host -> time until which its back-off delay may not be lowered."""
        return self.prefix + "delay_hold"

    @property
    def queued(self) -> str:
        """Counter of requests in the host queues."""
        return self.prefix + "queued"

    @property
    def delayed(self) -> str:
        """Sorted set of requests not to be fetched before a time (retries with back-off)."""
        return self.prefix + "delayed"

    @property
    def leases(self) -> str:
        """Sorted set of lease ids by deadline: popped requests not yet acknowledged."""
        return self.prefix + "leases"

    @property
    def leased(self) -> str:
        """Hash lease id -> host, score and request of a leased request."""
        return self.prefix + "leased"

    @property
    def lease_seq(self) -> str:
        return self.prefix + "lease_seq"

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
    def revisits(self) -> str:
        """Sorted set of URL keys by the time their page is due for a revisit."""
        return self.prefix + "revisits"

    @property
    def revisit_requests(self) -> str:
        """Hash URL key -> host, priority and request of a scheduled revisit."""
        return self.prefix + "revisit_req"

    @property
    def failed(self) -> str:
        """Counter of URLs that failed for good."""
        return self.prefix + "failed"

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

    @property
    def failpath_links_prefix(self) -> str:
        """``<prefix>fpl:<site>``: links that failed or were dropped under a dead path
        (``depth url``, by time), the failed-path re-probe's samples."""
        return self.prefix + "fpl:"

    @property
    def failpath_probe(self) -> str:
        """Held (with an expiry of FAILPATH_PROBE_INTERVAL) by the worker running a re-probe."""
        return self.prefix + "failpath_probe"

    def all_patterns(self) -> list[str]:
        return [self.prefix + "*"]
