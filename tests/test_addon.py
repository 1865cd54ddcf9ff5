"""webcrawl as a Scrapy add-on: its defaults under a project's own settings, and a fresh
``scrapy startproject`` project of someone else's, with its own spider, crawling with it."""

import subprocess
import sys
import textwrap
from itertools import pairwise

import pytest
from conftest import _demo, crawl_env
from scrapy import Spider
from scrapy.utils.test import get_crawler

from webcrawl.settings import defaults
from webcrawl.store import open_store

OURS = "webcrawl.middlewares.failpath.FailPathMiddleware"


def crawler_with(settings: dict, custom: dict | None = None):
    """A crawler of a project with the add-on.  (Scrapy's get_crawler, in a process with
    no reactor, sets its aiohttp handlers as the project's: ours are put back.)"""

    class ASpider(Spider):
        name = "a"
        custom_settings = custom or {}

    handlers = {**defaults.DOWNLOAD_HANDLERS, **settings.pop("DOWNLOAD_HANDLERS", {})}
    project = {"ADDONS": {"webcrawl.Addon": 0}, "DOWNLOAD_HANDLERS": handlers, **settings}
    return get_crawler(ASpider, project)


def test_the_addon_brings_every_default_and_the_project_still_wins():
    crawler = crawler_with({"CONCURRENT_REQUESTS": 7, "FRONTIER_HOST_DELAY": 2.5})
    settings = crawler.settings
    assert settings.getint("CONCURRENT_REQUESTS") == 7  # the project's
    assert settings.getfloat("FRONTIER_HOST_DELAY") == 2.5
    assert settings.get("SCHEDULER") == defaults.SCHEDULER  # the add-on's
    assert settings.getint("FRONTIER_SHARDS") == defaults.FRONTIER_SHARDS
    assert settings.getbool("COOKIES_ENABLED") is False
    assert settings.getpriority("FRONTIER_SHARDS") == 15  # add-on priority


def test_a_spiders_custom_settings_win_over_the_addon():
    crawler = crawler_with({}, custom={"FRONTIER_HOST_DELAY": 0.5, "WEBCRAWL_SCOPE": "broad"})
    assert crawler.settings.getfloat("FRONTIER_HOST_DELAY") == 0.5
    assert crawler.settings.get("WEBCRAWL_SCOPE") == "broad"


def test_component_lists_are_merged_and_the_projects_entries_kept():
    mine = "myproject.middlewares.Mine"
    crawler = crawler_with(
        {
            "DOWNLOADER_MIDDLEWARES": {mine: 543, OURS: None},
            "ITEM_PIPELINES": {"myproject.pipelines.Export": 900},
            "DOWNLOAD_HANDLERS": {"ftp": "myproject.handlers.Ftp"},
        }
    )
    middlewares = crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")
    assert middlewares[mine] == 543
    assert middlewares[OURS] is None  # turned off by the project, stays off
    for path, order in defaults.DOWNLOADER_MIDDLEWARES.items():
        if path != OURS:
            assert middlewares[path] == order, path
    pipelines = crawler.settings.getdict("ITEM_PIPELINES")
    assert pipelines == {"myproject.pipelines.Export": 900, **defaults.ITEM_PIPELINES}
    handlers = crawler.settings.getdict("DOWNLOAD_HANDLERS")
    assert handlers["ftp"] == "myproject.handlers.Ftp"
    assert handlers["http"] == defaults.DOWNLOAD_HANDLERS["http"]
    assert handlers["file"] is None


def test_a_component_given_as_a_class_is_not_listed_twice():
    from webcrawl.middlewares.failpath import FailPathMiddleware

    crawler = crawler_with({"DOWNLOADER_MIDDLEWARES": {FailPathMiddleware: 96}})
    middlewares = crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")
    assert middlewares[FailPathMiddleware] == 96
    assert OURS not in middlewares


def test_the_package_exports_the_addon():
    import webcrawl
    from webcrawl.addon import Addon

    assert webcrawl.Addon is Addon


SPIDER = """\
import scrapy

from webcrawl.page import page_from_response


class DocsSpider(scrapy.Spider):
    name = "docs"
    start_urls = {seeds!r}

    def parse(self, response):
        page = page_from_response(response)
        yield page
        for url in page.outlinks:
            if url.startswith(tuple(self.start_urls)):
                yield scrapy.Request(url)
"""


@pytest.fixture
def small_demo(tmp_path):
    """The demo web, 4 seed hosts of 12 pages (the project's template keeps Scrapy's
    DOWNLOAD_DELAY = 1 per worker)."""
    yield from _demo(tmp_path, 12)


@pytest.mark.e2e
def test_a_fresh_scrapy_project_crawls_with_the_addon(small_demo, redis_server, tmp_path):
    """A user's own project: `scrapy startproject` (its template's DOWNLOAD_DELAY = 1 and
    CONCURRENT_REQUESTS_PER_DOMAIN = 1 kept), their spider, the add-on in their settings.
    Two processes share one frontier: every page is fetched once, stored, and each host's
    requests keep the crawl's delay between them although two processes send them."""
    demo = small_demo
    delay = 0.1
    subprocess.run(
        [sys.executable, "-m", "scrapy", "startproject", "docs"], cwd=tmp_path, check=True
    )
    project = tmp_path / "docs"
    (project / "docs" / "spiders" / "docs.py").write_text(SPIDER.format(seeds=demo.seeds))
    data = tmp_path / "data"
    with (project / "docs" / "settings.py").open("a") as settings:
        settings.write(
            textwrap.dedent(f"""
            ADDONS = {{"webcrawl.Addon": 0}}
            REDIS_URL = {redis_server.url!r}
            WEBCRAWL_DATA_DIR = {str(data)!r}
            ADDRESSES_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # the demo web is on loopback
            FRONTIER_HOST_DELAY = {delay}
            CONCURRENT_REQUESTS_PER_DOMAIN = 4
            """)
        )
    workers = []
    for i in range(2):
        with (tmp_path / f"{i}.log").open("w") as log:
            workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "scrapy", "crawl", "docs"],
                    cwd=project,
                    env=crawl_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            )
    assert [w.wait(180) for w in workers] == [0, 0]
    logs = [(tmp_path / f"{i}.log").read_text() for i in range(2)]
    assert all("webcrawl.frontier.scheduler.Scheduler" in log for log in logs)
    assert all("'response_received_count'" in log for log in logs), logs[1][-3000:]
    fetches = demo.page_fetches()
    assert max(fetches.values()) == 1
    with open_store(f"sqlite:///{data}/webtable.sqlite3") as store:
        assert sorted(r["url"] for r in store.scan_pages()) == sorted(demo.web.reachable())
    times: dict[str, list[float]] = {}
    for r in demo.requests():
        if r["path"] != "/robots.txt":
            times.setdefault(r["host"], []).append(r["t"])
    gaps = [b - a for t in times.values() for a, b in pairwise(sorted(t))]
    assert len(times) == 4 and min(gaps) >= delay, min(gaps)
    # Scrapy's own commands in the project: their requests' callbacks are not spider
    # methods, so they cannot be shared, and their worker fetches them itself
    seed = demo.seeds[0]
    for command, shown in (
        (["fetch", seed], "<html"),
        (["shell", seed, "-c", "response.status"], "200"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "scrapy", *command],
            cwd=project,
            env=crawl_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and shown in done.stdout, done.stderr[-2000:]
        if command[0] == "fetch":  # (shell ends without its stats)
            assert "'scheduler/local': 1" in done.stderr


def test_our_components_import_without_installing_a_reactor():
    """A project may list them as classes in its settings.py, imported before Scrapy
    installs its reactor: importing one must not install Twisted's default one."""
    paths = [
        path
        for name in ("DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS")
        for path, order in getattr(defaults, name).items()
        if path.startswith("webcrawl.") and order is not None
    ]
    paths += [p for p in defaults.DOWNLOAD_HANDLERS.values() if p]
    code = (
        "import sys\nfrom scrapy.utils.misc import load_object\n"
        f"for path in {paths!r}:\n    load_object(path)\n"
        "print('twisted.internet.reactor' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_a_project_handler_that_would_go_without_the_address_policy_fails_at_start():
    """Politeness across workers and the address policy are in webcrawl's download
    handler: a project's own http(s) handler would silently go without both."""
    from webcrawl.frontier.scheduler import Scheduler

    scrapys = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
    crawler = crawler_with({"DOWNLOAD_HANDLERS": {"https": scrapys}})
    with pytest.raises(ValueError, match=r"DOWNLOAD_HANDLERS\['https'\] is .*HTTP11Download"):
        Scheduler.from_crawler(crawler)


@pytest.mark.parametrize(
    ("name", "value"), [("WEBCRAWL_STORE_URL", "hbase://h:9090"), ("WEBCRAWL_SCOPES", "broad")]
)
def test_a_webcrawl_setting_we_do_not_have_fails_at_start(name, value):
    """A typo, or a name that changed (the store's settings are STORE_*): never ignored."""
    from webcrawl.frontier.scheduler import Scheduler

    with pytest.raises(ValueError, match=f"unknown setting {name}"):
        Scheduler.from_crawler(crawler_with({name: value}))


def test_a_scrapy_commands_own_crawl_takes_nothing_of_the_shared_one():
    """scrapy fetch, view and parse replace the spider's start with a function of theirs,
    scrapy shell runs Scrapy's DefaultSpider: such a worker fetches its own requests and
    pops no shared entry (whose callbacks its spider may not have: they would be refused,
    and their pages lost to the crawl)."""
    from scrapy.utils.spider import DefaultSpider

    from webcrawl.frontier.scheduler import one_off
    from webcrawl.spiders.web import WebSpider

    async def start(self):  # as scrapy/commands/fetch.py defines it
        yield None

    start.__module__ = "scrapy.commands.fetch"
    fetched = type("Fetched", (WebSpider,), {"start": start})
    assert one_off(DefaultSpider())
    assert one_off(fetched())
    assert not one_off(WebSpider())
