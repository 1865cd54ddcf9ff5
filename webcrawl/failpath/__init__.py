"""Failed-path filtering and elastic waiting: its rules, pure (webcrawl.failpath.rules).

The rules are in :mod:`webcrawl.failpath.rules`; the Scrapy adapter is
``middlewares/failpath.py``.  Imports no Scrapy.
"""

from webcrawl.failpath.rules import (
    FAIL,
    OK,
    ROBOTS,
    SITE,
    TALLIES,
    Counts,
    CountsCache,
    FailPathParams,
    FailPathPolicy,
    ProbeRound,
    level_contains,
    level_depth,
    parent_level,
    path_levels,
    probe_rounds,
    site_of,
)

__all__ = [
    "FAIL",
    "OK",
    "ROBOTS",
    "SITE",
    "TALLIES",
    "Counts",
    "CountsCache",
    "FailPathParams",
    "FailPathPolicy",
    "ProbeRound",
    "level_contains",
    "level_depth",
    "parent_level",
    "path_levels",
    "probe_rounds",
    "site_of",
]
