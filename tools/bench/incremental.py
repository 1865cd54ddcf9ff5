"""``python -m tools.bench incremental``: a continuous crawl of the changing demo web, judged by
the server.

The demo web's HTML pages change (Poisson or periodic, simulated periods
from 10 minutes to 90 days) on a clock ``--speed`` times faster than real
time.  Two workers crawl it continuously for ``--duration`` real seconds
with revisits on; the revisit bounds are 1 simulated hour to 30 simulated
days, the first revisit after 1 simulated day.  Then, from the server's log
(which version each answer showed) and its ground truth:

- learned interval / true change period (within the revisit bounds: a page
  changing every 10 minutes is best revisited at the 1-hour minimum) of the
  pages visited 10 and 30 times;
- the share of fetches that found no change (304s included);
- change detection against the truth: real changes seen as changes, and
  fetches of an unchanged page (noise only) wrongly seen as changes;
- freshness: the share of time, from a page's first fetch to the end, that
  the copy we hold is the live version.
"""

from __future__ import annotations

import argparse
import bisect
import json
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from webcrawl.bench.common import tcp_redis
from webcrawl.demo import crawl_command, demo_server, scrapy_env
from webcrawl.incremental.revisit_sim import quantiles
from webcrawl.store import open_store
from webcrawl.urls.urlkey import url_to_key

HOUR, DAY = 3600.0, 86400.0


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-incr-"))
    log = workdir / "requests.jsonl"
    speed = args.speed
    settings = [
        "WEBCRAWL_CONTINUOUS=True",
        "FRONTIER_HOST_DELAY=0",
        "CONCURRENT_REQUESTS=8",
        f"REVISIT_MIN_INTERVAL={HOUR / speed}",
        f"REVISIT_MAX_INTERVAL={30 * DAY / speed}",
        f"REVISIT_INITIAL_INTERVAL={DAY / speed}",
        "LOG_LEVEL=INFO",
        f"STORE_URL=sqlite:///{workdir / 'webtable.sqlite3'}",
    ]
    try:
        with (
            demo_server(args.hosts, min(args.pages, 100), log, change_speed=speed) as info,
            tcp_redis(workdir) as url,
        ):
            procs = []
            for i in range(2):
                logfile = workdir / f"w{i}.log"
                cmd = crawl_command(
                    info["seeds"],
                    workdir / f"w{i}",
                    *settings,
                    f"REDIS_URL={url}",
                    f"LOG_FILE={logfile}",
                )
                procs.append(subprocess.Popen(cmd, env=scrapy_env(), stdout=subprocess.DEVNULL))
            time.sleep(args.duration)
            end = time.time()
            truth = json.loads(
                urllib.request.urlopen(f"http://{info['hosts'][0]}/__truth__").read()
            )
            for proc in procs:
                proc.send_signal(signal.SIGINT)
            for proc in procs:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            rows = {}
            with open_store(f"sqlite:///{workdir / 'webtable.sqlite3'}") as store:
                for page_url in truth["pages"]:
                    row = store.get_page(url_to_key(page_url))
                    if row:
                        rows[page_url] = row
            report(truth, rows, log, end, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def report(truth: dict, rows: dict, log: Path, end: float, args: argparse.Namespace) -> None:
    fetches: dict[str, list[tuple[float, int, int]]] = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if "v" in r and r["method"] == "GET" and r["t"] <= end:
            fetches.setdefault(f"http://{r['host']}{r['path']}", []).append(
                (r["t"], r["v"], r["status"])
            )
    ratios: dict[tuple[str, int], list[float]] = {}
    no_change = total = real = seen_real = noise = noise_flagged = 0
    fresh = []
    low, high = HOUR / args.speed, 30 * DAY / args.speed  # the revisit bounds, real seconds
    for page_url, page in truth["pages"].items():
        row, got = rows.get(page_url), fetches.get(page_url, [])
        if not got:
            continue
        visits = [v for v in (row or {}).get("visits") or [] if v[0] <= end]  # not the shutdown
        for n in (10, 30):
            if len(visits) >= n and row.get("revisit_interval"):
                target = min(high, max(low, page["period"]))  # the best interval allowed
                ratios.setdefault((page["kind"], n), []).append(row["revisit_interval"] / target)
        for i in range(1, len(got)):
            total += 1
            no_change += got[i][1] == got[i - 1][1]
        for changed, flag in judged_visits(visits, got):
            if changed:
                real += 1
                seen_real += flag
            else:
                noise += 1
                noise_flagged += flag
        fresh.append(_freshness(got, page["changes"], end))
    print(
        f"changing demo web: {len(truth['pages'])} pages, speed x{truth['speed']:g} "
        f"(1 real second = {truth['speed'] / 3600:g} simulated hours), {args.duration:g} s, "
        f"2 workers"
    )
    print(
        f"\n{'learned interval / bounded period':<34} {'pages':>6} {'median':>7} "
        f"{'p5':>6} {'p95':>6}"
    )
    for (kind, n), values in sorted(ratios.items()):
        p5, med, p95 = quantiles(values)
        print(
            f"{kind + f' after {n} visits':<34} {len(values):>6} {med:>7.2f} {p5:>6.2f} {p95:>6.2f}"
        )
    print(f"\nrevisits (fetches after the first)  {total}")
    print(f"found no change (incl. 304)         {no_change / max(total, 1):.1%}")
    print(f"real changes detected              {seen_real}/{real}")
    print(f"unchanged fetches seen as changed  {noise_flagged}/{noise}")
    print(f"freshness (mean over pages)         {statistics.mean(fresh):.1%}")


def judged_visits(
    visits: list[list], fetches: list[tuple[float, int, int]]
) -> list[tuple[bool, bool]]:
    """(really changed, flagged as changed) of each stored visit that has a known outcome.

    A visit (``[fetched at, 1|0|None, last-modified]`` from the row) is the
    page's last logged fetch at or before its time; it really changed when
    that fetch's version differs from the version of the previous visit's
    fetch.  Matching by time keeps this right when the row's history is
    shorter than the log (it keeps ``REVISIT_HISTORY`` visits) or a fetch
    left no visit (a failure, a shutdown).
    """
    times = [f[0] for f in fetches]
    out, previous = [], None
    for at, flag, _ in visits:
        i = bisect.bisect_right(times, at + 0.01) - 1  # at: rounded to the millisecond
        fetch = fetches[i] if i >= 0 and at - times[i] < 5.0 else None
        if fetch is not None and previous is not None and flag is not None:
            out.append((fetch[1] != previous[1], flag == 1))
        previous = fetch
    return out


def _freshness(fetches: list[tuple[float, int, int]], changes: list[float], end: float) -> float:
    """Share of [first fetch, end] during which the last fetched version was the live one."""
    start = fetches[0][0]
    if end <= start:
        return 1.0
    fresh = 0.0
    for i, (t, _, _) in enumerate(fetches):
        until = fetches[i + 1][0] if i + 1 < len(fetches) else end
        nxt = next((c for c in changes if c > t), end)
        fresh += max(0.0, min(nxt, until) - t)
    return fresh / (end - start)
