"""The web spider's sitemaps (sitemaps.org): found through robots.txt, read within
bounds, their URLs queued like links with what the file says of them.

- **Found** by the worker that fetches a host's robots.txt for the crawl
  (:data:`~webcrawl.middlewares.robotstxt.robots_fetched`): the files its ``Sitemap:``
  lines name or, with ``SITEMAP_GUESS`` and none named (a 404 robots.txt included),
  ``/sitemap.xml``.  Each is one request through the frontier like any other (the host's
  turn, robots.txt, the address policy, retries), queued once per refresh by one worker
  (a key in Redis: not the dupefilter, since a page may link to the file) and read
  again every ``SITEMAP_REFRESH`` seconds (the revisit schedule).
  Sitemap indexes are followed ``SITEMAP_MAX_DEPTH`` levels down; a sitemap that lists
  itself or one of the indexes above it is a loop, ended there.
- **Read** on a thread (:func:`webcrawl.sitemaps.parse.parse_sitemap`: a 50 000-URL
  file takes ~0.4 s), at most ``SITEMAP_MAX_URLS`` entries and ``SITEMAP_MAX_BYTES``
  after decompression (:mod:`webcrawl.middlewares.sitemaps` bounds the download).
- **Scope** (:mod:`webcrawl.sitemaps.scope`): an entry outside the sitemap's directory
  is dropped unless the robots.txt of the entry's host lists the sitemap (or the index it
  came through): the crawl records in Redis which hosts list each sitemap.  Entries also
  pass the crawl's own scope and trap rules, as links do, and at most
  ``SITEMAP_MAX_URLS_PER_HOST`` are taken per host and ``SITEMAP_REFRESH``, from at most
  ``SITEMAP_MAX_FILES_PER_HOST`` of its files.  Entries are checked on the thread too;
  their requests are yielded :data:`BATCH` at a time, the reactor turning between.
- **Queued** as the spider's own requests, with ``sitemap_lastmod`` (Unix time),
  ``sitemap_changefreq`` and ``sitemap_priority`` in their meta when the file gives them.

Stats: ``sitemap/listed``, ``sitemap/guessed``, ``sitemap/read``, ``sitemap/failed``,
``sitemap/urls`` (entries read), ``sitemap/queued``, ``sitemap/known``,
``sitemap/out_of_scope``, ``sitemap/skipped``, ``sitemap/too_large``,
``sitemap/too_many``, ``sitemap/malformed``, ``sitemap/too_deep``, ``sitemap/loops``,
``sitemap/over_host_budget``, ``sitemap/over_file_budget``, ``sitemap/indexes`` (and
``sitemap/deferred`` and ``sitemap/lost_waiting``: :mod:`webcrawl.middlewares.sitemaps`).
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import DeferredLock
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure

from webcrawl.middlewares.robotstxt import robots_fetched
from webcrawl.middlewares.sitemaps import TOKEN, listed_url
from webcrawl.page import REVISIT_FIELDS, page_of_row
from webcrawl.safety import robots
from webcrawl.safety.robots import decompress_prefix
from webcrawl.settings_check import (
    non_negative_float,
    non_negative_int,
    positive_int,
    trust_params,
)
from webcrawl.sitemaps.memory import SitemapMemory
from webcrawl.sitemaps.parse import Entry, Sitemap, parse_sitemap
from webcrawl.sitemaps.scope import (
    Authority,
    guessed_sitemap,
    listed_sitemaps,
    origin_of,
)
from webcrawl.sitemaps.trust import (
    DISTRUSTED,
    TRUSTED,
    HostTrust,
    act_on_claims,
    claims_change,
)
from webcrawl.sitemaps.trustbook import TrustBook
from webcrawl.threadpools import one_thread_pool
from webcrawl.urls.urlkey import BadURLError, canonical_url, url_to_key

logger = logging.getLogger(__name__)

PRIORITY = 100  # a sitemap before the host's pages: it may name most of them
# a sitemap its own host did not ask for (another host's robots.txt lists it, or an index
# on another host): not before that host's own sitemaps, which it could crowd out
FOREIGN_PRIORITY = 0
CLAIMS_KEPT = 100_000  # claims acted on that a worker remembers
MAX_LISTERS = 1000  # hosts whose robots.txt lists one sitemap, read at most
BATCH = 500  # requests yielded between two turns of the reactor (downloads go on)
ENTRY_BYTES = 250  # bytes an entry takes in memory beside its URL (about: its objects)


class SitemapReading:
    """Mixed into the web spider (which provides ``crawler``, ``request_for``,
    ``in_scope``, ``trap_rules``, ``_known_urls`` and ``_frontier``)."""

    crawler: Crawler
    trap_rules: Any
    request_for: Callable[[str], Request]
    in_scope: Callable[[str], bool]
    _known_urls: Callable[[], Callable[[str], bool]]
    _frontier: Any

    def _start_sitemaps(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.sitemaps_on = settings.getbool("SITEMAP_ENABLED")
        self.sitemap_guess = settings.getbool("SITEMAP_GUESS")
        self.sitemap_max_depth = non_negative_int(settings, "SITEMAP_MAX_DEPTH")
        self.sitemap_max_urls = positive_int(settings, "SITEMAP_MAX_URLS")
        self.sitemap_max_bytes = positive_int(settings, "SITEMAP_MAX_BYTES")
        self.sitemap_host_budget = positive_int(settings, "SITEMAP_MAX_URLS_PER_HOST")
        self.sitemap_file_budget = positive_int(settings, "SITEMAP_MAX_FILES_PER_HOST")
        # (SitemapMemoryMiddleware gives its shares; one lost with its request is taken
        # back once it cannot be in use any more)
        self.sitemap_memory = SitemapMemory(
            positive_int(settings, "SITEMAP_MAX_MEMORY"),
            stale_after=600.0 + settings.getfloat("DOWNLOAD_TIMEOUT"),
        )
        self.sitemap_refresh = non_negative_float(settings, "SITEMAP_REFRESH")
        self.trust_params = trust_params(settings)
        self._claimed: OrderedDict[str, float] = OrderedDict()  # URL -> lastmod acted on
        self._local_seen: set[str] = set()  # sitemaps queued (Scrapy's own scheduler)
        if self.sitemaps_on:
            crawler.signals.connect(self._robots_fetched, signal=robots_fetched)

    # -- discovery -----------------------------------------------------------------

    def _robots_fetched(self, origin: str, entry: robots.RobotsEntry, depth: int = 0) -> None:
        """Queue the sitemaps of a host whose robots.txt this worker has just fetched."""
        if entry.state == robots.UNREACHABLE:
            return  # tried again later: its sitemaps then
        if entry.state != robots.RULES and not entry.reason.startswith("HTTP "):
            return  # its robots.txt got no answer (a refused address, a redirect loop)
        if not self.in_scope(origin + "/"):
            return  # (a host met through a cross-submitted sitemap: its own are not read)
        parser = entry.parser()
        lines = [str(u) for u in parser.sitemaps] if parser is not None else []
        urls = listed_sitemaps(origin + "/robots.txt", lines)
        guessed = not urls and self.sitemap_guess
        if guessed:
            urls = [guessed_sitemap(origin)]
        elif urls:
            self._record_listers(origin, urls)
        stats = self.crawler.stats
        # (the host whose robots.txt lists them pays for them: SITEMAP_MAX_FILES_PER_HOST,
        # not the host they are on, which may not have asked)
        for url in self._queue_once(origin, urls):
            stats.inc_value("sitemap/guessed" if guessed else "sitemap/listed")
            own = Authority.of(url, () if guessed else (origin,))
            request = self.sitemap_request(url, own, 0, (), guessed, payer=origin)
            # its entries are a link away from the page that met the host (DEPTH_LIMIT)
            request.meta["depth"] = depth
            self.crawler.engine.crawl(request)

    def _queue_once(self, payer: str, urls: list[str]) -> list[str]:
        """Those of the sitemaps ``urls`` to queue now: not queued yet this refresh, and
        within ``payer``'s file budget; those over it are left for another to queue
        (their host's own robots.txt, at the next refresh)."""
        fresh = self._first_time(urls)
        taken = self._within_file_budget(payer, fresh)
        self._forget(fresh[len(taken) :])
        return taken

    def _forget(self, urls: list[str]) -> None:
        frontier = self._frontier
        if frontier is None or not urls:
            return
        try:
            pipe = frontier.server.pipeline(transaction=False)
            for url in urls:
                pipe.delete(frontier.keys.sitemap_seen(url))
            pipe.execute()
        except RedisError as exc:
            logger.warning("Could not unmark %d sitemaps in Redis: %s", len(urls), exc)

    def _first_time(self, urls: list[str]) -> list[str]:
        """Those of ``urls`` no worker has queued as sitemaps this refresh (the page
        dupefilter cannot say: a page may have linked to one).  All of them when Redis
        cannot say; with Scrapy's own scheduler, those this worker has not queued."""
        frontier = self._frontier
        if frontier is None:
            fresh = [u for u in dict.fromkeys(urls) if u not in self._local_seen]
            self._local_seen.update(fresh)
            return fresh
        expiry = self._seen_expiry()
        try:
            pipe = frontier.server.pipeline(transaction=False)
            for url in urls:
                pipe.set(frontier.keys.sitemap_seen(url), 1, nx=True, ex=expiry)
            firsts = pipe.execute()
        except RedisError as exc:
            logger.warning("Could not check the crawl's sitemaps in Redis: %s", exc)
            firsts = [True] * len(urls)
        return [u for u, first in zip(urls, firsts, strict=True) if first]

    def _record_listers(self, origin: str, urls: list[str]) -> None:
        """Record that ``origin``'s robots.txt lists each of ``urls`` (cross-submission)."""
        frontier = self._frontier
        if frontier is None:
            return
        try:
            pipe = frontier.server.pipeline(transaction=False)
            for url in urls:
                key = frontier.keys.sitemap_listers(url)
                pipe.sadd(key, origin)
                pipe.expire(key, int(robots.KEEP_SECONDS))
            pipe.execute()
        except RedisError as exc:  # its own host's entries are still allowed (meta)
            logger.warning("Could not record the sitemaps of %s in Redis: %s", origin, exc)

    def _listers(self, urls: list[str]) -> tuple[str, ...]:
        """The origins whose robots.txt lists one of ``urls`` (at most
        :data:`MAX_LISTERS` of each)."""
        frontier = self._frontier
        if frontier is None:
            return ()
        found: set[str] = set()
        try:
            for url in dict.fromkeys(urls):
                key = frontier.keys.sitemap_listers(url)
                for i, member in enumerate(frontier.server.sscan_iter(key, count=1000)):
                    if i >= MAX_LISTERS:
                        break
                    found.add(member.decode("utf-8", "replace"))
        except RedisError as exc:
            logger.warning("Could not read which hosts list the sitemap %s: %s", urls[-1], exc)
        return tuple(sorted(found))

    def sitemap_request(
        self,
        url: str,
        authority: Authority,
        depth: int,
        chain: tuple[str, ...] | list[str],
        guessed: bool = False,
        *,
        payer: str = "",
    ) -> Request:
        """The request that reads the sitemap at ``url`` (``depth``: indexes above it;
        ``chain``: their URLs; ``authority``: what they allow it to list; ``payer``: the
        origin whose robots.txt led to it, whose file budget it counts against)."""
        info = {
            "depth": depth,
            "chain": list(chain),
            "authority": authority.dumps(),
            "guessed": guessed,
            "payer": payer or origin_of(url),
            "marked": time.time(),  # (about when it was marked queued: see sitemap_waits)
        }
        return Request(
            url,
            callback=self.parse_sitemap,
            errback=self.sitemap_failed,
            priority=PRIORITY if origin_of(url) == info["payer"] else FOREIGN_PRIORITY,
            dont_filter=True,  # queued once per refresh by _first_time, not the dupefilter
            # (SitemapLimitMiddleware bounds its size instead of DOWNLOAD_MAXSIZE)
            meta={"sitemap": info, "failpath": False},  # not a page: says nothing of paths
        )

    def sitemap_may_leave(self, request: Request) -> bool:
        """Whether the sitemap ``request`` may leave for the downloader (asked by
        SitemapMemoryMiddleware): a first read was charged to its payer's file budget
        as it was queued; a refresh is charged as it leaves, once a refresh window (in
        the window it is read in: charged when it was scheduled, it counted twice in
        one).  One over the budget is unmarked, so that the robots.txt or index that
        lists it queues it again at the next refresh."""
        info = request.meta.get("sitemap") or {}
        frontier = self._frontier
        if not info.get("refresh") or frontier is None:
            return True
        url = listed_url(request)
        try:
            key = frontier.keys.sitemap_charged(url)
            first = frontier.server.set(key, 1, nx=True, px=self._window_ms())
        except RedisError as exc:
            logger.warning("Could not mark the refresh of the sitemap %s in Redis: %s", url, exc)
            first = True
        if not first:
            return True
        if self._within_file_budget(str(info.get("payer") or origin_of(url)), [url]):
            return True
        self._forget([url])
        return False

    def sitemap_waits(self, request: Request) -> None:
        """The sitemap ``request`` went back to wait (asked by SitemapMemoryMiddleware: its
        host had another in flight, or the memory was taken): it is still queued this
        refresh.  Its mark is renewed, so that the index or robots.txt that lists it,
        read again while it waits, does not queue a second copy (read twice, and charged
        twice to its payer's file budget)."""
        frontier = self._frontier
        expiry = self._seen_expiry()
        info = request.meta.get("sitemap")
        if frontier is None or expiry is None or not isinstance(info, dict):
            return  # (no refresh: a mark that never expires)
        now = time.time()
        if now - float(info.get("marked") or 0) < expiry / 2:
            return  # (marked recently: no round trip on the reactor for every wait)
        url = listed_url(request)
        try:
            frontier.server.set(frontier.keys.sitemap_seen(url), 1, ex=expiry)
        except RedisError as exc:
            logger.warning("Could not mark the sitemap %s in Redis: %s", url, exc)
            return
        info["marked"] = now

    # -- reading ---------------------------------------------------------------------

    async def parse_sitemap(self, response: Response) -> AsyncIterator[Request]:
        info = response.meta.get("sitemap") or {}
        if not 200 <= response.status < 300:  # (the spider lets every status through)
            self._unread(_listed_url(response), info, response.status, "", response.meta)
            return
        url = _listed_url(response)  # (as listed: a redirect's target may move)
        payer = str(info.get("payer") or origin_of(url))
        lock = await self._turn_to_read(response, url)
        if lock is None:
            return
        try:
            read = await self._read(response)
            depth = _int(info.get("depth"))
            chain = [str(u) for u in info.get("chain") or []][-self.sitemap_max_depth - 1 :]
            # what the indexes above gave it, and its own directory: what its children
            # inherit (the hosts that list it or an index above are read from Redis, not
            # carried along: a sitemap may be listed by thousands of hosts)
            inherited = Authority.loads(info.get("authority")).joined(Authority.of(url))
            if response.url != url:  # redirected: where it is now counts too
                inherited = inherited.joined(Authority.of(response.url))
            listers = self._listers([*chain, url, response.url])
            authority = inherited.joined(Authority((), listers))
            children = self._children(read, url, authority, (depth, chain))
            requests = await self._entry_requests(read.entries, authority, url)
            del read
            self._next_turn_to_read(lock)  # (the next is read while these are taken)
            lock = None
            for i, request in enumerate(requests, 1):  # (each made as it is taken)
                yield request
                if i % BATCH == 0:  # let downloads and other callbacks go on
                    if not self._running():
                        break  # (the rest come with its next read)
                    await _next_turn()
            # its children last, its share freed: while it held it, its host had a
            # sitemap in flight, and each child that came back at once had to wait.
            # (Marked queued and charged only here: if its entries fail, the index's
            # next read queues them.)
            self.sitemap_memory.release(response.meta.pop(TOKEN, None))
            for child in self._queue_once(payer, children):
                yield self.sitemap_request(child, inherited, depth + 1, [*chain, url], payer=payer)
        finally:  # (whatever became of its entries, it is read again)
            self._next_turn_to_read(lock)
            self.sitemap_memory.release(response.meta.pop(TOKEN, None))
            self._refresh(url, info, response.meta)

    async def _turn_to_read(self, response: Response, url: str) -> DeferredLock | None:
        """Wait for this sitemap's turn: one is read at a time, from its body to its
        requests (made, not yet yielded), so that a body waits as it came (its bytes
        held in the sitemap memory) and one file's entries are read at a time (a small
        gzip body may hold 50 000).  The lock, held; None if the crawl ended meanwhile
        (the sitemap is put back for its next run)."""
        lock = self.__dict__.get("_sitemap_lock")
        if lock is None:
            lock = self._sitemap_lock = DeferredLock()
        token = response.meta.get(TOKEN)
        waiting = self.__dict__.setdefault("_sitemaps_waiting", set())
        waiting.add(token)
        self.sitemap_memory.touch([token])
        try:
            await maybe_deferred_to_future(lock.acquire())
        finally:
            waiting.discard(token)
        if self._running():
            return lock
        self._next_turn_to_read(lock)
        self.sitemap_memory.release(response.meta.pop(TOKEN, None))
        self._put_back(response, url)
        return None

    def _next_turn_to_read(self, lock: DeferredLock | None) -> None:
        """Let the next sitemap be read (``lock``: held, or None)."""
        if lock is not None:
            self.sitemap_memory.touch(list(self.__dict__.get("_sitemaps_waiting", ())))
            lock.release()

    async def _read(self, response: Response) -> Sitemap:
        """The sitemap in ``response`` (its body in meta, as it came: see
        SitemapLimitMiddleware), decoded and parsed on the sitemaps' thread."""
        memory, token = self.sitemap_memory, response.meta.get(TOKEN)
        body = response.meta.pop("sitemap_body", None)  # (held: SitemapLimitMiddleware)
        if body is None:
            body = response.body
        read, undecodable, size = await self._in_sitemap_thread(
            _read_body,
            body,
            response.meta.pop("sitemap_encodings", None) or [],
            max_urls=self.sitemap_max_urls,
            max_bytes=self.sitemap_max_bytes,
        )
        del body
        memory.hold(token, size, force=True)  # (what its entries take now)
        if undecodable:
            response.flags.append("sitemap_undecodable")
        self._count(read, response)
        return read

    def _running(self) -> bool:
        engine = getattr(self.crawler, "engine", None)
        return engine is None or bool(engine.running)

    def _put_back(self, response: Response, url: str) -> None:
        """A sitemap not read because the crawl ends: back in the frontier for the
        crawl's next run, or else unmarked (its robots.txt or index queues it again)."""
        from webcrawl.frontier.scheduler import frontier_of  # late: installs a reactor

        frontier = frontier_of(self.crawler)
        request = response.request
        if frontier is None or request is None or not frontier.requeue(request, 0, "closing"):
            self._forget([url])
        self.crawler.stats.inc_value("sitemap/put_back")

    def _count(self, read: Sitemap, response: Response) -> None:
        stats = self.crawler.stats
        stats.inc_value("sitemap/read")
        stats.inc_value("sitemap/urls", len(read.entries))
        if read.skipped:
            stats.inc_value("sitemap/skipped", read.skipped)
        if read.sitemaps:
            stats.inc_value("sitemap/indexes")
        cut = "sitemap_cut" in response.flags
        if read.too_large or cut:
            stats.inc_value("sitemap/too_large")
            logger.warning(
                "Sitemap %s is over %d bytes: read its first %d (%d URLs)",
                response.url,
                self.sitemap_max_bytes,
                read.bytes_read,
                len(read.entries) + len(read.sitemaps),
            )
        if read.too_many:
            stats.inc_value("sitemap/too_many")
            logger.warning(
                "Sitemap %s lists more than %d URLs: read its first %d",
                response.url,
                self.sitemap_max_urls,
                self.sitemap_max_urls,
            )
        if (read.malformed and not cut) or "sitemap_undecodable" in response.flags:
            stats.inc_value("sitemap/malformed")
            logger.info(
                "Sitemap %s is malformed (%s): %d URLs read before the fault",
                response.url,
                read.malformed or "undecodable Content-Encoding",
                len(read.entries) + len(read.sitemaps),
            )

    def _children(
        self, read: Sitemap, url: str, authority: Authority, place: tuple[int, list[str]]
    ) -> list[str]:
        """The sitemaps the index ``url`` lists that it may list and that are not above
        it (``place``: its depth, the indexes above it)."""
        depth, chain = place
        if not read.sitemaps:
            return []
        stats = self.crawler.stats
        if depth >= self.sitemap_max_depth:
            stats.inc_value("sitemap/too_deep", len(read.sitemaps))
            logger.info(
                "Sitemap index %s is %d levels down (SITEMAP_MAX_DEPTH): its %d sitemaps "
                "are not read",
                url,
                depth,
                len(read.sitemaps),
            )
            return []
        above = {*chain, url}
        out = []
        for child in read.sitemaps:
            if child.url in above:
                stats.inc_value("sitemap/loops")
                logger.info("Sitemap index %s lists %s, an index above it: a loop", url, child.url)
                continue
            try:
                canonical = canonical_url(child.url)
            except BadURLError:
                stats.inc_value("sitemap/skipped")
                continue
            same_host = origin_of(canonical) == origin_of(url)
            if not authority.allows(canonical) or not (same_host or self.in_scope(canonical)):
                stats.inc_value("sitemap/out_of_scope")
                continue
            out.append(child.url)
        return out

    async def _entry_requests(
        self, entries: list[Entry], authority: Authority, url: str
    ) -> Iterator[Request]:
        """Requests for the entries the crawl has no page of yet (made as they are
        taken), once the revisits of known pages whose lastmod claims a change are moved
        to now, as far as their host is trusted (:mod:`webcrawl.sitemaps.trust`)."""
        # sifted on the sitemaps' thread: 50 000 URLs canonicalised and checked take
        # about a second, which the reactor's downloads need
        sifted: Sifted = await self._in_sitemap_thread(
            self._sift, entries, authority, self._known_urls()
        )
        self._count_sifted(sifted, url)
        candidates, known_count, rows = sifted.candidates, sifted.known, sifted.rows
        known = self._known_urls()
        now = time.time()
        fresh: dict[str, list[tuple[str, Entry]]] = {}
        claims: dict[str, list[tuple[str, Entry, dict[str, Any]]]] = {}
        for canonical, entry in candidates:
            row = rows.get(canonical)
            if row is None and not known(canonical):
                fresh.setdefault(origin_of(canonical), []).append((canonical, entry))
                continue
            known_count += 1
            last = _float(row.get("fetched_at")) if row is not None else None
            if self._claimed.get(canonical, -1.0) >= (entry.lastmod or 0.0):
                continue  # acted on already: its fetch may not be stored yet
            if claims_change(entry.lastmod, last, now, self.trust_params.slack):
                claims.setdefault(origin_of(canonical), []).append((canonical, entry, row))
        self.crawler.stats.inc_value("sitemap/known", known_count)
        trust = {origin: self._trust(origin) for origin in {*fresh, *claims}}
        await self._act_on_claims(claims, trust, now)
        return itertools.chain.from_iterable(
            self._new_requests(origin, items, trust[origin], url) for origin, items in fresh.items()
        )

    def _sift(
        self, entries: list[Entry], authority: Authority, known: Callable[[str], bool]
    ) -> Sifted:
        """(On the sitemaps' thread.)  The entries in scope that may need a request or a
        look at their page's row, with the rows of those with a lastmod."""
        sifted = Sifted()
        candidates = sifted.candidates
        for entry in entries:
            try:
                canonical = canonical_url(entry.url)
            except BadURLError:
                sifted.skipped += 1
                continue
            if not authority.allows(canonical) or not self.in_scope(canonical):
                sifted.outside += 1
                continue
            trap = self.trap_rules.why(canonical)
            if trap is not None:
                sifted.traps[trap] += 1
            elif entry.lastmod is None and known(canonical):
                sifted.known += 1  # (nothing to check: the page's own revisits go on)
            else:
                candidates.append((canonical, entry))
        urls = [u for u, e in candidates if e.lastmod is not None]
        if urls:
            keys = {url_to_key(u): u for u in urls}
            try:
                found = _read_rows(self._sitemap_store, list(keys))
            except Exception as exc:  # a store outage: the entries are taken as new
                logger.warning("Could not read the stored pages of a sitemap's URLs: %s", exc)
                found = {}
            sifted.rows = {keys[key]: row for key, row in found.items() if key in keys}
        return sifted

    def _count_sifted(self, sifted: Sifted, url: str) -> None:
        stats = self.crawler.stats
        if sifted.skipped:
            stats.inc_value("sitemap/skipped", sifted.skipped)
        for trap, n in sifted.traps.items():
            stats.inc_value(f"traps/{trap}", n)
        if sifted.outside:
            stats.inc_value("sitemap/out_of_scope", sifted.outside)
            logger.info(
                "Sitemap %s: %d URLs outside what it may list (its directory, and the hosts "
                "whose robots.txt lists it) or outside the crawl's scope, dropped",
                url,
                sifted.outside,
            )

    def _new_requests(
        self, origin: str, items: list[tuple[str, Entry]], trust: HostTrust, url: str
    ) -> Iterator[Request]:
        """Requests for a host's new entries, within its budget; a host not distrusted
        gives their lastmod and changefreq as priors of their first revisit."""
        stats = self.crawler.stats
        taken = self._take("urls", origin, len(items))
        stats.inc_value("sitemap/queued", taken)
        if taken < len(items):
            stats.inc_value("sitemap/over_host_budget", len(items) - taken)
            logger.info(
                "Sitemaps of %s: over SITEMAP_MAX_URLS_PER_HOST (%d): %d URLs of %s dropped",
                origin,
                self.sitemap_host_budget,
                len(items) - taken,
                url,
            )
        state = trust.state(self.trust_params)
        for canonical, entry in items[:taken]:
            request = self.request_for(canonical)
            if state != DISTRUSTED:  # priors of its first revisit (pipelines/revisit.py)
                if entry.lastmod is not None:
                    request.meta["sitemap_lastmod"] = entry.lastmod
                if entry.changefreq is not None:
                    request.meta["sitemap_changefreq"] = entry.changefreq
                if state == TRUSTED:  # (else the prior may only lengthen the interval)
                    request.meta["sitemap_trusted"] = True
            elif entry.lastmod is not None or entry.changefreq is not None:
                stats.inc_value("sitemap/prior_ignored")
            if entry.priority is not None:
                request.meta["sitemap_priority"] = entry.priority
            yield request

    async def _act_on_claims(
        self,
        claims: dict[str, list[tuple[str, Entry, dict[str, Any]]]],
        trust: dict[str, HostTrust],
        now: float,
    ) -> None:
        """Move to now the revisits of the claimed changes a host's trust allows (the
        latest claims first), each marked to be tested when fetched."""
        from webcrawl.pipelines.revisit import revisit_request  # late: installs a reactor

        frontier = self._frontier
        stats = self.crawler.stats
        for origin, items in claims.items():
            acted, probes = act_on_claims(len(items), trust[origin], self.trust_params)
            # bounded per host and refresh, however many files it splits its claims into:
            # a trusted host's claims are URLs it gives (SITEMAP_MAX_URLS_PER_HOST), and no
            # more probes are made than a window of evidence holds
            acted = self._take("urls", origin, acted)
            probes = self._take("probes", origin, probes)
            stats.inc_value("sitemap/claims", len(items))
            stats.inc_value("sitemap/lastmod_trusted", acted)
            stats.inc_value("sitemap/lastmod_probes", probes)
            stats.inc_value("sitemap/lastmod_ignored", len(items) - acted - probes)
            self._book_claims(origin, len(items))
            if frontier is None:
                continue
            # a trusted host's latest claims; probes drawn at random (see trust.py)
            if acted:
                chosen = sorted(items, key=lambda i: i[1].lastmod or 0.0, reverse=True)[:acted]
            else:
                chosen = random.sample(items, probes)
            for i, (canonical, entry, row) in enumerate(chosen, 1):
                if i % BATCH == 0:
                    await _next_turn()
                self._remember_claim(canonical, entry.lastmod)
                request = revisit_request(page_of_row(row, canonical), self)
                request.meta["sitemap_lastmod"] = entry.lastmod
                request.meta["sitemap_claim"] = True
                frontier.schedule_revisit(request, now)

    def _remember_claim(self, url: str, lastmod: float | None) -> None:
        """A claim acted on (until its lastmod moves, it is not acted on again: a
        sitemap read again before the refetch is stored would claim it once more)."""
        claimed = self._claimed
        claimed[url] = lastmod or 0.0
        claimed.move_to_end(url)
        while len(claimed) > CLAIMS_KEPT:
            claimed.popitem(last=False)

    def _trust(self, origin: str) -> HostTrust:
        book = self._trust_book()
        if book is None:
            return HostTrust()
        try:
            return book.read(origin)
        except RedisError as exc:
            logger.warning("Could not read the sitemap trust of %s in Redis: %s", origin, exc)
            return HostTrust()

    def _book_claims(self, origin: str, claims: int) -> None:
        book = self._trust_book()
        if book is None:
            return
        try:
            book.add_claims(origin, claims)
        except RedisError as exc:
            logger.warning("Could not count the sitemap claims of %s in Redis: %s", origin, exc)

    def _trust_book(self) -> TrustBook | None:
        frontier = self._frontier
        if frontier is None:
            return None
        book = self.__dict__.get("_sitemap_trust_book")
        if book is None or book.server is not frontier.server:
            book = TrustBook(frontier.server, frontier.keys.sitemap_trust, self.trust_params)
            self._sitemap_trust_book = book
        return book

    @property
    def _sitemap_store(self) -> Any:
        store = self.__dict__.get("_sitemap_store_handle")
        if store is None:
            from webcrawl.store import open_store, store_url_from_settings

            store = open_store(store_url_from_settings(self.crawler.settings))
            self._sitemap_store_handle = store
        return store

    async def _in_sitemap_thread(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``f`` on the sitemaps' own thread (reading files, the store's rows)."""
        from twisted.internet import reactor  # late: importing it installs one

        pool = self.__dict__.get("_sitemap_pool")
        if pool is None:
            pool = self._sitemap_pool = one_thread_pool("sitemaps")
            pool.start()
        return await maybe_deferred_to_future(deferToThreadPool(reactor, pool, f, *args, **kwargs))

    def _close_sitemaps(self) -> None:
        pool = self.__dict__.get("_sitemap_pool")
        store = self.__dict__.get("_sitemap_store_handle")
        if pool is not None:
            if store is not None:
                pool.callInThread(store.close)
            pool.stop()
        elif store is not None:
            store.close()

    def _within_file_budget(self, payer: str, urls: list[str]) -> list[str]:
        """Those of the sitemaps ``urls`` that SITEMAP_MAX_FILES_PER_HOST of ``payer``
        (the origin whose robots.txt led to them) allows, counted as taken."""
        if not urls:
            return []
        taken = self._take("files", payer, len(urls))
        if taken < len(urls):
            self.crawler.stats.inc_value("sitemap/over_file_budget", len(urls) - taken)
            logger.info(
                "Sitemaps of %s: over SITEMAP_MAX_FILES_PER_HOST (%d): %d sitemaps wait "
                "for the next refresh",
                payer,
                self.sitemap_file_budget,
                len(urls) - taken,
            )
        return urls[:taken]

    def _take(self, counter: str, origin: str, wanted: int) -> int:
        """How many of ``wanted`` more the crawl's ``counter`` of ``origin`` still allows
        this refresh (``"files"``: SITEMAP_MAX_FILES_PER_HOST, ``"urls"``:
        SITEMAP_MAX_URLS_PER_HOST, ``"probes"``: SITEMAP_TRUST_WINDOW), counted as
        taken; all of them when Redis cannot say (or with Scrapy's own scheduler)."""
        frontier = self._frontier
        if frontier is None or wanted <= 0:
            return max(0, wanted)
        keys = frontier.keys
        key, limit = {
            "files": (keys.sitemap_files, self.sitemap_file_budget),
            "urls": (keys.sitemap_budget, self.sitemap_host_budget),
            "probes": (keys.sitemap_probes, self.trust_params.window),
        }[counter]
        try:
            pipe = frontier.server.pipeline(transaction=False)
            pipe.set(key(origin), 0, px=self._window_ms(), nx=True)
            pipe.incrby(key(origin), wanted)
            total = int(pipe.execute()[1])
        except RedisError as exc:
            logger.warning("Could not count the sitemaps of %s in Redis: %s", origin, exc)
            return wanted
        before = total - wanted
        return max(0, min(wanted, limit - before))

    def _window_ms(self) -> int:
        """Milliseconds of a refresh window: the budgets' counters and a refresh's charge
        start with the window's first charge and end a little before the next refresh
        (at 0.9 x SITEMAP_REFRESH).  A window as long as the refresh was a race between
        two equal periods: a file whose refresh came a few ms early was charged twice in
        one window.  The next refresh is always in a new window, and its files, read at
        about the same times as before, with it; workers' clocks may differ."""
        return max(1, int((self.sitemap_refresh or robots.KEEP_SECONDS) * 900))

    def _refresh(self, url: str, info: dict[str, Any], meta: dict) -> None:
        """Read the sitemap again in SITEMAP_REFRESH seconds (the revisit schedule), at
        the depth it had (``meta``: its request's)."""
        frontier = self._frontier
        if not self.sitemap_refresh or frontier is None:
            return
        payer = str(info.get("payer") or origin_of(url))
        again = self.sitemap_request(
            url,
            Authority.loads(info.get("authority")),
            _int(info.get("depth")),
            [str(u) for u in info.get("chain") or []],
            bool(info.get("guessed")),
            payer=payer,
        )
        again.meta["depth"] = _int(meta.get("depth"))
        again.meta["sitemap"]["refresh"] = True  # (charged as it leaves: sitemap_may_leave)
        frontier.schedule_revisit(again, time.time() + self.sitemap_refresh)
        try:  # its refresh is its own: the index that lists it does not queue it again
            frontier.server.set(frontier.keys.sitemap_seen(url), 1, ex=self._seen_expiry())
        except RedisError as exc:
            logger.warning("Could not mark the sitemap %s in Redis: %s", url, exc)

    def _seen_expiry(self) -> int | None:
        """Seconds a sitemap stays queued-for-this-refresh (none: read once per crawl):
        longer than a refresh, so that each read of a sitemap renews it before the
        index above it is read again."""
        return int(self.sitemap_refresh * 1.5) + 1 if self.sitemap_refresh else None

    def sitemap_failed(self, failure: Failure) -> None:
        """A sitemap that could not be fetched (after its retries)."""
        request = failure.request
        self.sitemap_memory.release(request.meta.pop(TOKEN, None))
        if failure.check(IgnoreRequest) and not failure.check(HttpError):
            return  # robots.txt forbids it, or it went back to the frontier to wait
        status = failure.value.response.status if failure.check(HttpError) else None
        reason = "" if status is not None else failure.getErrorMessage()
        redirects = request.meta.get("redirect_urls") or [request.url]
        info = request.meta.get("sitemap") or {}
        self._unread(str(redirects[0]), info, status, reason, request.meta)

    def _unread(
        self, url: str, info: dict[str, Any], status: int | None, why: str, meta: dict
    ) -> None:
        """Counted; tried again at its next refresh, but a guessed sitemap that is not
        there (404, 410), which is not looked for again."""
        self.crawler.stats.inc_value("sitemap/failed")
        if info.get("guessed") and status in (404, 410):
            logger.debug("No sitemap at %s (%d)", url, status)
            return
        logger.info("Could not read the sitemap %s: %s", url, why or f"HTTP {status}")
        self._refresh(url, info, meta)


@dataclass
class Sifted:
    """What :meth:`SitemapReading._sift` made of a sitemap's entries."""

    candidates: list[tuple[str, Entry]] = field(default_factory=list)  # (canonical, entry)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # canonical -> its row
    known: int = 0  # known pages with nothing to check
    outside: int = 0
    skipped: int = 0
    traps: Counter[str] = field(default_factory=Counter)


async def _next_turn() -> None:
    from twisted.internet import reactor  # late: importing it installs one

    await maybe_deferred_to_future(deferLater(reactor, 0, lambda: None))


def _listed_url(response: Response) -> str:
    """The sitemap's URL as it was listed (the first of its redirects)."""
    redirects = response.meta.get("redirect_urls")
    if redirects:
        return str(redirects[0])
    return response.request.url if response.request is not None else response.url


def _read_body(
    body: bytes, encodings: list[str], *, max_urls: int, max_bytes: int
) -> tuple[Sitemap, bool, int]:
    """(On the sitemaps' thread.)  The sitemap in ``body`` (decoded from its
    ``Content-Encoding`` as far as ``max_bytes``), whether that coding could not be
    decoded, and about how many bytes its entries take in memory."""
    if encodings:
        try:
            body = decompress_prefix(body, encodings, max_bytes + 1)
        except ValueError:
            return Sitemap(), True, 0
    read = parse_sitemap(body, max_urls=max_urls, max_bytes=max_bytes)
    del body
    size = sum(len(e.url) + ENTRY_BYTES for e in read.entries)
    size += sum(len(e.url) + ENTRY_BYTES for e in read.sitemaps)
    return read, False, size


def _read_rows(store: Any, keys: list[str]) -> dict[str, dict[str, Any]]:
    """What a revisit needs of the rows of ``keys`` (not their text), a thousand at a time."""
    found: dict[str, dict[str, Any]] = {}
    for i in range(0, len(keys), 1000):
        found.update(store.get_fields(keys[i : i + 1000], REVISIT_FIELDS))
    return found


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
