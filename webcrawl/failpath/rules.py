"""Failed-path filtering and elastic waiting (Zhan et al., 2011), as pure rules.

A URL's *path levels*, highest first: its site, then every subtree above its
directory, then its directory.  For ``http://h/bbb/ccc/d.html``: the site
(column ``*``), the subtree ``/bbb`` (everything under bbb) and the
directory ``/bbb/ccc/`` (the pages directly in ccc).  ``/bbb`` and ``/bbb/``
are different levels, as in the paper; a page at the root has the levels
``*`` and ``/``.  The filter list keeps, per site row, a failure count per
level column.

Rules (parameters under their setting names, see ``settings/base.py``):

- filter: a URL is dropped when any of its levels counts more than
  ``HEIGHTEN``;
- elastic wait: ``MIN_DELAY + (MAX_DELAY - MIN_DELAY) * c / HEIGHTEN`` where
  ``c`` is the count of the URL's lowest level that has a record (0: none);
- failure: +1 on the URL's lowest level (its directory), once per link (the
  paper counts links: a link counts when its last attempt fails, not once
  per retry); when a count *reaches* ``HEIGHTEN`` by that increment, +1 on
  the parent level, and so on up (our choice: the paper says "the parent";
  cascading is the same rule applied to the parent's own increment, and it
  is what lets a site-wide outage reach the site level).  "Reaches" is
  decided on the value the atomic increment returns, so concurrent workers
  propagate exactly once;
- success: the paper (section 4 (5)): "if the link is fetched within the
  set time and the failure count of its lowest path level is not 0,
  subtract fetch.success.scale from that count; if the result is at or
  below 0, delete that column of the filter list" (so that a site's row does
  not collect columns).  We follow it as written: ``-SUCCESS_SCALE`` on the
  URL's own lowest level (its directory) only, and only when that count is
  not 0 (as this worker last read it: reads need no strict consistency).
  Subtracting and deleting at or below 0 are one atomic store operation
  (``Store.failpath_add``), so a failure another worker counts meanwhile is
  never deleted with it.  No other level is lowered by a success: in the
  paper a higher level rises only when a level under it reaches the
  threshold and is cleared only by the re-probe, so a subtree's or a site's
  count stays until the level is over the threshold and a re-probe finds it
  alive (below the threshold it only lengthens the wait of directories
  under it that have no record of their own, the wait following the lowest
  *recorded* level);
- the site is given up (its ``*`` level is set over the threshold) when
  more than ``HEIGHTEN`` of its fetches failed and the share of successes is
  below ``1 / (1 + SUCCESS_SCALE)``.  The paper states the share but not
  how it is counted; we count each site's successes and failures in two
  more columns of its row (``#ok``, ``#fail``), cleared when the site level
  is probed back to life.  The minimum of ``HEIGHTEN + 1`` failures keeps
  one early failure from giving up a site;
- a site whose robots.txt gets no answer (no connection, or none within its
  wait) is dead at once: nothing of it may be fetched before robots.txt is
  read (RFC 9309), so its site level is set over the threshold, and the time
  is kept (``#robots``) to say why.  Our addition: the paper's crawler did not
  read robots.txt first.  The re-probe brings it back when robots.txt answers
  (the middleware fetches it again for a re-probe's links);
- re-probe, every ``PROBE_INTERVAL``: for each site, the levels over the
  threshold, highest first; a random sample of ``HEIGHTEN`` of the links
  that failed or were dropped under the level is fetched.  If one succeeds
  the level's column is deleted and its remembered links go back into the
  crawl (our reading of "recovered links sent back": all of them, since
  the dupefilter has already seen them and nothing else would bring them
  back), and the next level is sampled at the same size; if none succeeds
  the next level's sample is one smaller.  The round stops when the sample
  size reaches 0.  One re-probe runs at a time in the whole crawl (see
  ``middlewares/failpath.py``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from webcrawl.urls.urlkey import canonical_url, site_prefix

SITE = "*"  # the site level's column
OK = "#ok"  # the site's successful fetches
FAIL = "#fail"  # the site's failed fetches
ROBOTS = "#robots"  # Unix time since when the site's robots.txt gets no answer
TALLIES = (OK, FAIL, ROBOTS)  # the columns that are not path levels

Counts = Mapping[str, int]


def site_of(url: str) -> str:
    """The filter list's row for ``url``: its site as a reversed key (``com.example:http``)."""
    return site_prefix(canonical_url(url))


def path_levels(url: str) -> list[str]:
    """The path levels of ``url``, highest (the site) first, its directory last."""
    path = urlsplit(url).path or "/"
    segments = path.split("/")[1:-1]  # directories above the last segment
    levels = [SITE]
    for i in range(1, len(segments)):
        levels.append("/" + "/".join(segments[:i]))
    levels.append("/" + "".join(s + "/" for s in segments))
    return levels


def parent_level(level: str) -> str | None:
    """The level just above ``level`` (None for the site)."""
    if level == SITE:
        return None
    # a directory /a/b/c/ and a subtree /a/b/c both have the subtree /a/b above
    segments = [s for s in level.split("/") if s]
    return "/" + "/".join(segments[:-1]) if len(segments) > 1 else SITE


def level_contains(level: str, url: str) -> bool:
    """Whether ``url`` lies under ``level`` (of its own site)."""
    if level == SITE:
        return True
    path = urlsplit(url).path or "/"
    if level.endswith("/"):
        return path.startswith(level) and "/" not in path[len(level) :]
    return path.startswith(level + "/")


def level_depth(level: str) -> int:
    """0 for the site, then one more per path segment (directories count their last)."""
    return 0 if level == SITE else len([s for s in level.split("/") if s]) + (level == "/")


@dataclass(frozen=True)
class FailPathParams:
    """The paper's five parameters (its first set by default)."""

    min_delay: float = 15.0
    max_delay: float = 80.0
    heighten: int = 4
    probe_interval: float = 7200.0
    success_scale: int = 3

    def __post_init__(self) -> None:
        if not 0 < self.min_delay <= self.max_delay:
            raise ValueError("FAILPATH_MIN_DELAY must be > 0 and <= FAILPATH_MAX_DELAY")
        if self.heighten < 1:
            raise ValueError("FAILPATH_HEIGHTEN must be at least 1")
        if self.probe_interval <= 0:
            raise ValueError("FAILPATH_PROBE_INTERVAL must be > 0")
        if self.success_scale < 1:
            raise ValueError("FAILPATH_SUCCESS_SCALE must be at least 1")


class FailPathPolicy:
    """The rules over one site's counts; writes go through callables (atomic in the store)."""

    def __init__(self, params: FailPathParams) -> None:
        self.params = params

    def blocking_level(self, levels: Sequence[str], counts: Counts) -> str | None:
        """The highest of ``levels`` whose count is over the threshold, or None."""
        for level in levels:
            if counts.get(level, 0) > self.params.heighten:
                return level
        return None

    def wait(self, levels: Sequence[str], counts: Counts) -> float:
        """The elastic wait (seconds) for a URL with these levels."""
        p = self.params
        c = next((counts[lv] for lv in reversed(levels) if counts.get(lv, 0) > 0), 0)
        c = min(c, p.heighten)  # over the threshold the URL is filtered anyway
        return p.min_delay + (p.max_delay - p.min_delay) * c / p.heighten

    def probe_wait(self) -> float:
        """The wait of a re-probe: twice the shortest, at most the longest.  The paper
        gives none; a path that recovered answers like a healthy one, and probes of
        paths that did not should not hold fetch slots for the longest wait."""
        return min(2 * self.params.min_delay, self.params.max_delay)

    def record_failure(
        self, levels: Sequence[str], add: Callable[[str, int], int]
    ) -> dict[str, int]:
        """Apply a failure; ``add(column, delta)`` is the store's atomic add
        (:meth:`~webcrawl.store.base.Store.failpath_add`), which returns the new value.
        Returns the new values written."""
        written: dict[str, int] = {}
        level: str | None = levels[-1]
        while level is not None:
            value = written[level] = add(level, 1)
            if value != self.params.heighten:
                break
            level = parent_level(level)
        return written

    def record_success(
        self, levels: Sequence[str], counts: Counts, add: Callable[[str, int], int]
    ) -> dict[str, int]:
        """Apply a success: one write, on the lowest level, when ``counts`` has a record of
        it.  ``add`` removes a count that falls to 0 or below in the same atomic step
        (0 is written then)."""
        lowest = levels[-1]
        if counts.get(lowest, 0) <= 0:
            return {}
        return {lowest: max(add(lowest, -self.params.success_scale), 0)}

    def record_unanswered(
        self, counts: Counts, add: Callable[[str, int], int], now: int
    ) -> dict[str, int]:
        """The site's robots.txt got no answer at ``now`` (Unix seconds): its level is set
        over the threshold (``counts``: as this worker last read them), a failure is
        counted, and ``#robots`` keeps the first such time.  Returns the values written."""
        written = {FAIL: add(FAIL, 1)}
        site = counts.get(SITE, 0)
        if site <= self.params.heighten:
            written[SITE] = add(SITE, self.params.heighten + 1 - site)
        if not counts.get(ROBOTS):
            since = add(ROBOTS, now)
            if since != now:  # another worker's was first (or a stale read): keep theirs
                since = add(ROBOTS, -now)
            written[ROBOTS] = since
        return written

    def site_given_up(self, counts: Counts) -> bool:
        """Whether the site's share of working links fell below 1 / (1 + scale)."""
        ok, fail = counts.get(OK, 0), counts.get(FAIL, 0)
        if fail <= self.params.heighten:
            return False
        return ok * (1 + self.params.success_scale) < ok + fail

    def over(self, counts: Counts) -> list[str]:
        """Levels over the threshold, highest first (the probe's order)."""
        levels = [lv for lv, c in counts.items() if lv not in TALLIES and c > self.params.heighten]
        return sorted(levels, key=lambda lv: (level_depth(lv), lv))


@dataclass
class ProbeRound:
    """One site's sampled re-probe: levels highest first, sample shrinking on failure."""

    site: str
    levels: list[str]
    size: int
    recovered: list[str] = field(default_factory=list)
    _index: int = 0

    def next_sample(
        self, links: Callable[[str], Sequence[str]], rng: random.Random
    ) -> tuple[str, list[str]] | None:
        """The next (level, links to fetch), or None when the round is over.

        ``links(level)`` gives the remembered links under a level; a level
        with none left is skipped without using up sample size (there is
        nothing to learn from it; it stays filtered).
        """
        while self._index < len(self.levels) and self.size > 0:
            level = self.levels[self._index]
            pool = list(links(level))
            if pool:
                return level, rng.sample(pool, min(self.size, len(pool)))
            self._index += 1
        return None

    def report(self, level: str, successes: int) -> bool:
        """Record the outcome of ``level``'s sample; True when the level recovered."""
        if self.levels[self._index] != level:
            raise ValueError(f"expected the outcome of {self.levels[self._index]!r}, got {level!r}")
        self._index += 1
        if successes > 0:
            self.recovered.append(level)
            return True
        self.size -= 1
        return False


def probe_rounds(policy: FailPathPolicy, rows: Iterable[tuple[str, Counts]]) -> list[ProbeRound]:
    """A round for every site with levels over the threshold."""
    rounds = []
    for site, counts in rows:
        levels = policy.over(counts)
        if levels:
            rounds.append(ProbeRound(site, levels, policy.params.heighten))
    return rounds


class CountsCache:
    """Each worker's copy of the filter list rows it uses, fresh for ``ttl`` seconds.

    Reads need no strict consistency (the paper), so a row older than
    ``ttl`` is still served while a fresh copy is fetched: only a site never
    seen before costs a store read before its first request.
    """

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.clock = clock
        self._rows: dict[str, tuple[float, dict[str, int]]] = {}

    def get(self, site: str) -> tuple[dict[str, int] | None, bool]:
        """(counts or None when never read, whether they are stale)."""
        entry = self._rows.get(site)
        if entry is None:
            return None, True
        return entry[1], self.clock() - entry[0] > self.ttl

    def put(self, site: str, counts: Mapping[str, int]) -> None:
        self._rows[site] = (self.clock(), dict(counts))

    def update(self, site: str, written: Mapping[str, int]) -> None:
        """Merge values just written (0 or less: the column is gone); keeps the row's age."""
        at, counts = self._rows.get(site, (self.clock(), {}))
        for column, value in written.items():
            if value > 0:
                counts[column] = value
            else:
                counts.pop(column, None)
        self._rows[site] = (at, counts)

    def drop(self, site: str) -> None:
        self._rows.pop(site, None)
