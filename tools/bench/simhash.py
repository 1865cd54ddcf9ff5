"""``python -m tools.bench simhash``: our SimHash against the ``simhash`` package, real texts.

The texts are the visible text (:func:`webcrawl.extract.visible_text`) of
every HTML file under ``--site`` (default: Debian's Django documentation,
``apt-get install python-django-doc``).  Each text is fingerprinted by
both, timed per page; printed: median, p95 and total time, pages the
package could not fingerprint (``OverflowError`` under numpy 2) and pages
where the two differ (must be 0).  Each runs in its own pass over the
pages (interleaving them would let each evict the other's CPU caches).
Ours is timed twice: in page order from an empty cache (its shingle cache
warms up as a crawler's would) and cold (cache emptied before every page).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

DEFAULT_SITE = "/usr/share/doc/python-django-doc/html"


def page_texts(site: Path, limit: int) -> list[str]:
    from parsel import Selector

    from webcrawl.extract import visible_text

    files = sorted(p for p in site.rglob("*") if p.suffix in (".html", ".htm"))[:limit]
    return [visible_text(Selector(text=p.read_text(errors="replace"))) for p in files]


def run(args: argparse.Namespace) -> int:
    import simhash as package

    from webcrawl.incremental import simhash as ours

    site = Path(args.site[0] if args.site else DEFAULT_SITE)
    if not site.is_dir():
        raise SystemExit(
            f"{site}: no such directory (apt-get install python-django-doc, "
            "or --site DIR of HTML files)"
        )
    texts = page_texts(site, args.limit)
    if not texts:
        raise SystemExit(f"{site}: no HTML files")
    times: dict[str, list[float]] = {"package": [], "ours (warm)": [], "ours (cold)": []}
    expected: list[int | None] = []
    for text in texts:  # each implementation in its own pass, as a crawler would run it
        t = time.perf_counter()
        try:
            expected.append(package.Simhash(text).value)
        except OverflowError:
            expected.append(None)
        times["package"].append(time.perf_counter() - t)
    ours.clear_cache()
    values = []
    for text in texts:
        t = time.perf_counter()
        values.append(ours.simhash(text))
        times["ours (warm)"].append(time.perf_counter() - t)
    for text in texts:
        ours.clear_cache()
        t = time.perf_counter()
        ours.simhash(text)
        times["ours (cold)"].append(time.perf_counter() - t)
    failed = expected.count(None)
    differ = sum(e is not None and e != v for e, v in zip(expected, values, strict=True))
    lengths = sorted(len(t) for t in texts)
    print(
        f"{len(texts)} pages of {site}; text length median {lengths[len(lengths) // 2]} "
        f"characters, p95 {lengths[int(0.95 * len(lengths))]}"
    )
    print(
        f"\n{'implementation':<14} {'median ms':>10} {'p95 ms':>8} {'total s':>8} "
        f"{'x package':>10} {'failed':>7} {'differ':>7}"
    )
    base = statistics.median(times["package"])
    for name, measured in times.items():
        values = sorted(measured)
        median = statistics.median(values)
        p95 = values[int(0.95 * len(values))]
        fails = failed if name == "package" else 0
        diffs = differ if name != "package" else 0
        print(
            f"{name:<14} {median * 1e3:>10.3f} {p95 * 1e3:>8.2f} {sum(values):>8.2f} "
            f"{base / median:>10.1f} {fails:>7} {diffs:>7}"
        )
    return 0
