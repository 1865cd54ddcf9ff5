"""Crawl traps a link can be recognised by, without fetching it.

An infinite calendar, a path that repeats itself (``/a/b/a/b/a/b/...``, a relative
link resolved against its own page over and over) or an ever-longer query keep a
host's queue growing without end.  Two rules catch them by the URL alone: a length
limit and a limit on how often one path segment may appear.  What they miss is
bounded by the per-host page budget (``FRONTIER_MAX_PAGES_PER_HOST``, in the
frontier).  Session identifiers are removed by canonicalisation
(:func:`webcrawl.urls.urlkey.canonical_url`), so that one page is one URL.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class TrapRules:
    """``max_url_length`` characters (0: no limit); a path segment may appear at most
    ``max_segment_repeats`` times (0: no limit)."""

    max_url_length: int = 2048
    max_segment_repeats: int = 2

    def why(self, url: str) -> str | None:
        """Why ``url`` looks like a trap (``"url_too_long"``, ``"repeated_segments"``),
        or None."""
        if self.max_url_length and len(url) > self.max_url_length:
            return "url_too_long"
        if self.max_segment_repeats and repeated_segment(url, self.max_segment_repeats):
            return "repeated_segments"
        return None


def repeated_segment(url: str, limit: int) -> str | None:
    """A path segment of ``url`` that appears more than ``limit`` times, or None.
    ``/a/b/a/b/a/b/`` with limit 2: ``a``.  Empty segments (``//``) do not count."""
    segments = [s for s in urlsplit(url).path.split("/") if s]
    if len(segments) <= limit or len(set(segments)) == len(segments):  # nearly every URL
        return None
    segment, count = Counter(segments).most_common(1)[0]
    return segment if count > limit else None
