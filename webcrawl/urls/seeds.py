"""Reading seed URLs: from a file (one per line) or a comma-separated list.

Bad lines are reported with their line number and skipped; they never stop
the crawl.  Blank lines and ``#`` comments are ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from webcrawl.urls.urlkey import BadURLError, canonical_url


@dataclass(frozen=True)
class BadSeed:
    source: str  # file name, or "seeds" for a command-line list
    line: int  # 1-based line (or position in a comma-separated list)
    text: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


def parse_seed_lines(lines: list[str], source: str) -> tuple[list[str], list[BadSeed]]:
    """Canonical URLs of ``lines`` in order (duplicates dropped) and the bad lines."""
    urls: list[str] = []
    bad: list[BadSeed] = []
    seen: set[str] = set()
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        try:
            url = canonical_url(text)
        except BadURLError as exc:
            reason = str(exc)
            if "://" not in text and "." in text and " " not in text:
                reason += f" (did you mean https://{text} ?)"
            bad.append(BadSeed(source, number, text, reason))
            continue
        if url not in seen:
            seen.add(url)
            urls.append(url)
    return urls, bad


def read_seeds(spec: str) -> tuple[list[str], list[BadSeed]]:
    """Seeds from ``spec``: a path to a file of URLs, or comma-separated URLs.

    Raises :class:`FileNotFoundError` when ``spec`` looks like a path (no
    scheme) but no such file exists, so a typo in a file name is not read as
    a list of one bad URL.
    """
    if os.path.isfile(spec):
        with open(spec, encoding="utf-8", errors="replace") as f:
            return parse_seed_lines(f.read().splitlines(), spec)
    if "://" not in spec and "," not in spec:
        raise FileNotFoundError(f"seed file not found: {spec!r} (and it is not a URL)")
    return parse_seed_lines(spec.split(","), "seeds")
