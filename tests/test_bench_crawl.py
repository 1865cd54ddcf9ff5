"""The crawl benchmark's setups run for real: its plain Scrapy baseline crawls the same
site as the web spider, and a before-and-after runs another checkout's spider."""

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.bench.compare import plain
from tools.bench.stages import OTHER, read_samples, stage_of
from webcrawl.bench.common import CpuSampler, project_env
from webcrawl.bench.crawl import crawl_parallel

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_plain_spider_crawls_the_pages_the_web_spider_does(demo, tmp_path):
    wall = {"wall": 0.0}
    pages, seconds = crawl_parallel(demo.seeds, tmp_path, [], 1, command=plain, totals=wall)
    assert 0 < seconds < wall["wall"]  # first to last response, within the run
    wall = {"wall": 0.0, "frontier/redis_round_trips": 0.0}
    ours, seconds = crawl_parallel(
        demo.seeds, tmp_path, ["WEBCRAWL_CRAWL=bench-test"], 1, totals=wall
    )
    assert 0 < seconds < wall["wall"]  # (and the project's own settings still apply:)
    assert wall["frontier/redis_round_trips"] > 0
    # the same web, the same robots.txt; Scrapy's deny list drops the PDFs we fetch
    pdfs = sum(1 for u in demo.web.reachable() if u.endswith(".pdf"))
    assert ours - pdfs - 5 <= pages <= ours


@pytest.mark.e2e
def test_project_must_be_a_webcrawl_checkout(tmp_path):
    env, cwd = project_env(str(ROOT))
    installed = Path(env["PYTHONPATH"].split(":")[0])
    assert cwd == installed and (installed / "scrapy.cfg").is_file()
    assert (installed / "webcrawl" / "spiders" / "web.py").is_file()
    assert not (installed / "spiders").exists()  # one package, webcrawl
    # the crawl imports that checkout's modules, not those of an editable install
    where = subprocess.run(
        [sys.executable, "-c", "import webcrawl.middlewares as m; print(m.__file__)"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(where.strip()).is_relative_to(installed), where
    with pytest.raises(SystemExit, match="not a webcrawl checkout"):
        project_env(str(tmp_path))


def test_profile_samples_go_to_the_innermost_stage():
    raw = "\n".join(
        [
            "run (twisted/internet/base.py:1);WebSpider.parse (spiders/web.py:3);"
            "page_links (webcrawl/links.py:9);canonical_url (webcrawl/urls/urlkey.py:28) 7",
            "run (twisted/internet/base.py:1);WebSpider.parse (spiders/web.py:3);"
            "page_links (webcrawl/links.py:9) 5",
            "run (twisted/internet/base.py:1);Condition.wait (threading.py:327) 50",
            "run (twisted/internet/base.py:1);Handle._run (asyncio/events.py:80) 2",
        ]
    )
    stages, unclaimed = read_samples(raw)
    assert stages == {"canonicalisation": 7, "link extraction": 5, OTHER: 2}
    assert unclaimed == {"Handle._run (asyncio/events.py:80)": 2}
    assert (
        stage_of(["x (scrapy/core/scheduler.py:1)", "fingerprint (scrapy/utils/request.py:9)"])
        == "scheduler"
    )
    assert stage_of(["x (a.py:1)", "dataReceived (webcrawl/handlers/tee.py:87)"]) == "WARC output"


def test_cpu_sampler_reads_the_machine_between_two_moments():
    """What the machine's cores did between two Unix times, from samples taken meanwhile:
    a busy thread of this process shows, and times outside the samples have no answer."""
    with CpuSampler(every=0.01) as cpu:
        begin = time.time()
        while time.time() < begin + 0.3:  # one core busy
            pass
        end = time.time()
    busy = cpu.at(end) - cpu.at(begin)
    assert 0.2 <= busy <= 0.3 * (os.cpu_count() or 1) + 0.05, busy
    assert math.isnan(cpu.at(begin - 60)) and math.isnan(cpu.at(end + 60))
