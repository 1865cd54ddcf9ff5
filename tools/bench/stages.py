"""``python -m tools.bench stages``: CPU milliseconds per page, by stage, of one crawl.

One worker crawls the site (``--site``, served by nginx; the demo web
without it) under py-spy, a sampling profiler that sees every thread (the
store writes in its own), and each sample is put in the stage of the
innermost frame a stage claims: HTML parse, title and text, link
extraction, canonicalisation, requests (``Request`` objects and the
spider middlewares they go through), scheduler (fingerprints, queues,
Redis), the pipelines, the store, the download (Twisted, the downloader
and its middlewares), and the rest (the engine, the reactor, logging).

``--setup plain`` profiles the plain Scrapy spider of ``tools.bench compare``
instead, and ``--project DIR`` another checkout of webcrawl (a before and
after of a change, on the same machine and site).

Sampling profilers count the time a thread runs Python (idle threads are
left out, and so are samples of a thread waiting on a lock or the reactor
waiting on its sockets), so the sum is close to the process's CPU time,
which is shown beside it (from the kernel).  py-spy: ``pip install py-spy``.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from webcrawl.bench.common import stat

RATE = 250  # samples per second

# (stage, what a frame's "function (file:line)" contains); the innermost frame of a
# sample that matches one of them decides, and the first rule that matches a frame wins
STAGES: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(pattern))
    for name, pattern in [
        ("WARC output", r"pipelines/warc\.py|webcrawl/warc/|warcio/|zlib_ng|handlers/tee\.py"),
        ("canonicalisation", r"^(canonical_url|canonicalize_url|strip_session_ids) "),
        ("link extraction", r"webcrawl/links\.py|scrapy/linkextractors/|^_requests_to_follow "),
        (
            "requests",
            r"^(Request\.__init__|Request\._set_url|Request\.replace|request_for) "
            r"|scrapy/spidermiddlewares/|^(safe_url_string|escape_ajax) ",
        ),
        ("title and text", r"webcrawl/extract\.py|^PlainSpider\.parse_page "),
        ("HTML parse", r"parsel/|lxml/|^TextResponse\.(selector|text) "),
        (
            "scheduler",
            r"webcrawl/frontier/|scrapy/core/scheduler\.py|scrapy_redis/"
            r"|scrapy/dupefilters\.py|scrapy/pqueues\.py|queuelib/"
            r"|scrapy/utils/request\.py|redis/",
        ),
        ("store", r"pipelines/store\.py|webcrawl/store/|sqlite3|happybase/|thriftpy2/"),
        ("pipelines: change and SimHash", r"pipelines/change\.py|webcrawl/incremental/|simhash/"),
        ("pipelines: revisit", r"pipelines/revisit\.py"),
        (
            "pipelines: other and feeds",
            r"scrapy/pipelines/|scrapy/extensions/feedexport\.py"
            r"|scrapy/exporters\.py|itemadapter/",
        ),
        ("spider callback, other", r"spiders/web\.py|plain_spider\.py|scrapy/spiders/crawl\.py"),
        (
            "download",
            r"scrapy/core/downloader/|scrapy/downloadermiddlewares/|middlewares/"
            r"|handlers/|twisted/web/|scrapy/core/http|twisted/internet/(tcp|abstract)",
        ),
    ]
]
OTHER = "engine, reactor, logging, other"
# a thread waiting (py-spy sees some waits as running): not CPU, left out
IDLE = re.compile(
    r"^(Condition\.wait|Event\.wait|Semaphore\.acquire|_wait_for_tstate_lock"
    r"|EPollReactor\.doPoll|doPoll|select) "
)


def stage_of(frames: list[str]) -> str:
    """The stage of one sample (``frames`` from the outermost to the innermost)."""
    for frame in reversed(frames):
        for name, pattern in STAGES:
            if pattern.search(frame):
                return name
    return OTHER


def read_samples(raw: str) -> tuple[Counter[str], Counter[str]]:
    """Samples per stage from py-spy's ``--format raw`` output (collapsed stacks), and
    per innermost frame of the samples no stage claims (where "other" goes)."""
    stages: Counter[str] = Counter()
    unclaimed: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            frames = stack.split(";")
            if IDLE.search(frames[-1]):
                continue
            stage = stage_of(frames)
            stages[stage] += int(count)
            if stage == OTHER:
                unclaimed[frames[-1]] += int(count)
    return stages, unclaimed


def profile_crawl(
    args: argparse.Namespace, seeds: list[str], workdir: Path
) -> tuple[int, float, tuple[Counter[str], Counter[str]]]:
    """(pages, CPU seconds of the crawl process, :func:`read_samples`) of one profiled
    crawl."""
    from tools.bench.plain import plain_command, plain_env
    from webcrawl.bench.common import COMMON, project_env
    from webcrawl.demo import crawl_command

    pyspy = shutil.which("py-spy")
    if pyspy is None:
        raise SystemExit("bench stages needs py-spy: pip install py-spy")
    data = Path(tempfile.mkdtemp(dir=workdir))
    log, raw = data / "crawl.log", data / "samples.txt"
    if args.setup == "plain":
        cmd = plain_command(seeds, data, f"LOG_FILE={log}")
        env, cwd = plain_env(), data
    else:
        warc = [f"WARC_ENABLED={args.warc}", f"WARC_DIR={data / 'warc'}"]
        cmd = crawl_command(seeds, data, *COMMON, *warc, f"LOG_FILE={log}")
        env, cwd = project_env(args.project)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spy = [pyspy, "record", "--rate", str(RATE), "--format", "raw", "--output", str(raw), "--"]
    proc = subprocess.run(
        [*spy, *cmd], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = log.read_text() if log.exists() else ""
    if proc.returncode or "response_received_count" not in text:
        raise RuntimeError(
            f"profiled crawl failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
            f"\n{text[-2000:]}"
        )
    # py-spy's own CPU is in RUSAGE_CHILDREN too: it is not Python, and small beside it
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if args.raw:
        shutil.copyfile(raw, args.raw)
    return int(stat(text, "response_received_count")), cpu, read_samples(raw.read_text())


def run(args: argparse.Namespace) -> int:
    from webcrawl.bench.common import serve

    workdir = Path(tempfile.mkdtemp(prefix="webcrawl-bench-"))
    try:
        with serve(args) as info:
            what = f"site {', '.join(args.site)}" if args.site else "demo web"
            setup = args.setup + (f" of {args.project}" if args.project else "")
            setup += ", WARC output" if args.warc else ""
            print(
                f"{what}: {info['pages']} pages on {len(info['hosts'])} hosts; setup {setup}",
                flush=True,
            )
            pages, cpu, (samples, unclaimed) = profile_crawl(args, info["seeds"], workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total = sum(samples.values())
    print(
        f"\n{pages} pages; CPU of the crawl process (and py-spy) {cpu * 1000 / pages:.2f} ms "
        f"a page; {total} samples at {RATE}/s\n"
    )
    print(f"{'stage':<34} {'ms/page':>8} {'share':>7}")
    order = [name for name, _ in STAGES] + [OTHER]
    for name in order:
        ms = samples.get(name, 0) * 1000 / RATE / pages
        print(f"{name:<34} {ms:>8.2f} {samples.get(name, 0) / max(total, 1):>7.1%}")
    print(f"{'all sampled':<34} {total * 1000 / RATE / pages:>8.2f} {1:>7.1%}")
    print(f"\nmost sampled frames of {OTHER!r}:")
    for frame, n in unclaimed.most_common(12):
        print(f"  {n * 1000 / RATE / pages:>6.2f} ms  {frame[:110]}")
    return 0
