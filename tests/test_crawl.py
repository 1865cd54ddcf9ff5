"""End to end: `scrapy crawl web` through the whole stack on the embedded default."""

import json

import pytest
from conftest import crawl_env, read_items

from webcrawl.bench.common import stat
from webcrawl.store import open_store

pytestmark = pytest.mark.e2e

FIELDS = {
    "url",
    "final_url",
    "status",
    "fetched_at",
    "title",
    "text",
    "outlinks",
    "etag",
    "last_modified",
    "content_length",
    "depth",
    "kind",
    "content_type",
}


def stored_rows(data_dir):
    with open_store(f"sqlite:///{data_dir}/webtable.sqlite3") as store:
        return list(store.scan_pages())


def test_full_crawl_stores_every_reachable_page_once(demo, tmp_path, crawls):
    data, items_path = tmp_path / "data", tmp_path / "items.jsonl"
    result = crawls.run(demo.seeds, data, items=items_path)
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stderr
    expected = demo.web.reachable()

    rows = stored_rows(data)
    assert sorted(r["url"] for r in rows) == sorted(expected)  # complete, and once each
    fetches = demo.page_fetches()
    assert max(fetches.values()) == 1, [u for u, n in fetches.items() if n > 1]
    assert not any("/private/" in u for u in fetches)  # robots.txt obeyed
    # seeds are linked back from every page, yet fetched once
    assert all(fetches[s] == 1 for s in demo.seeds)

    items = read_items(items_path)
    assert len(items) == len(expected)
    assert all(item.keys() >= FIELDS for item in items)
    by_url = {i["url"]: i for i in items}
    home = by_url[demo.seeds[0]]
    assert home["status"] == 200 and home["kind"] == "html" and home["depth"] == 0
    assert home["title"].endswith("Home") and "not visible text" not in home["text"]
    assert len(home["text"]) > 200 and home["etag"] and home["last_modified"]
    assert home["content_length"] > 0 and home["outlinks"]
    pdf = next(i for i in items if i["url"].endswith(".pdf"))
    assert (pdf["kind"], pdf["content_type"], pdf["text"], pdf["outlinks"]) == (
        "other",
        "application/pdf",
        "",
        [],
    )
    moved = next(i for i in items if "/old/" in i["url"])
    assert moved["final_url"].endswith(moved["url"].rsplit("/", 1)[1] + ".html")
    assert moved["redirects"] == [moved["url"]]
    assert sorted(i["status"] for i in items if i["status"] != 200) == [404] * 8

    # the components we promise, and the consoles we promise are off
    assert "webcrawl.frontier.scheduler" in log and "webcrawl.pipelines.store.StorePipeline" in log
    assert "Telnet console listening" not in log
    assert "TelnetConsole" not in log and "RemoteControl" not in log
    assert " ERROR: " not in log and "Traceback" not in log
    assert "Stopped embedded Redis" in log
    assert not (data / "redis.pid").exists()

    # most links lead to pages the crawl has: they never become Requests
    found, known = stat(log, "links/found"), stat(log, "links/known")
    assert found == sum(len(i["outlinks"]) for i in items)
    assert known > 0.7 * found
    scheduled = stat(log, "scheduler/enqueued/redis") + stat(log, "dupefilter/filtered", 0)
    assert scheduled <= found - known - stat(log, "links/out_of_scope") + 2 * len(expected)


def test_bad_seed_lines_are_reported_and_skipped(demo, tmp_path, crawls):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"# seeds\nnot-a-url\n{demo.seeds[0]}\nftp://127.0.0.2/\n")
    result = crawls.run(str(seeds), tmp_path / "data", "DEPTH_LIMIT=1")
    assert result.returncode == 0
    assert f"Skipping bad seed {seeds}:2: not an absolute URL" in result.stderr
    assert f"Skipping bad seed {seeds}:4: unsupported scheme 'ftp'" in result.stderr
    assert "'seeds/invalid': 2" in result.stderr
    urls = {r["url"] for r in stored_rows(tmp_path / "data")}
    assert demo.seeds[0] in urls and len(urls) > 1


def test_missing_seed_file_fails_at_start(tmp_path, crawls):
    result = crawls.run("no-such-file.txt", tmp_path / "data")
    assert result.returncode != 0
    assert "seed file not found: 'no-such-file.txt'" in result.stderr


def test_depth_limit(demo, tmp_path, crawls):
    result = crawls.run(demo.seeds, tmp_path / "data", "DEPTH_LIMIT=1")
    assert result.returncode == 0
    urls = {r["url"] for r in stored_rows(tmp_path / "data")}
    assert urls == set(demo.web.reachable(depth_limit=1))


def test_scope_broad_follows_other_hosts(demo, tmp_path, crawls):
    result = crawls.run(
        demo.seeds[:1],
        tmp_path / "data",
        "WEBCRAWL_SCOPE=broad",
        "ADDRESSES_ALLOWED_NETWORKS=127.0.0.0/8",
    )  # the other demo hosts
    assert result.returncode == 0
    urls = {r["url"] for r in stored_rows(tmp_path / "data")}
    assert urls == set(demo.web.reachable(demo.seeds[:1], scope="broad"))
    assert len({u.split("/")[2] for u in urls}) == 5  # the out-of-scope host too


def test_scope_argument_overrides_setting(demo, tmp_path, crawls):
    seed = demo.seeds[0]
    result = crawls.run(seed, tmp_path / "data", "WEBCRAWL_SCOPE=broad", args=("-a", "scope=host"))
    assert result.returncode == 0
    urls = {r["url"] for r in stored_rows(tmp_path / "data")}
    assert urls == set(demo.web.reachable([seed]))


def test_bad_setting_fails_at_start_with_its_name(tmp_path, crawls):
    result = crawls.run(["http://127.0.0.2:1/"], tmp_path / "data", "WEBCRAWL_SCOPE=site")
    assert result.returncode != 0
    assert "WEBCRAWL_SCOPE must be one of host, domain, broad; got 'site'" in result.stderr
    result = crawls.run(["http://127.0.0.2:1/"], tmp_path / "data", "FRONTIER_BATCH_SIZE=0")
    assert "FRONTIER_BATCH_SIZE must be a positive integer" in result.stderr


def test_same_spider_on_plain_scrapy_scheduler(demo, tmp_path, crawls):
    """The spider does not depend on Redis: the benchmark's plain-Scrapy baseline."""
    result = crawls.run(
        demo.seeds,
        tmp_path / "data",
        "SCHEDULER=scrapy.core.scheduler.Scheduler",
        "DUPEFILTER_CLASS=scrapy.dupefilters.RFPDupeFilter",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(stored_rows(tmp_path / "data")) == len(demo.web.reachable())
    assert stat(result.stderr, "links/known") > 0.7 * stat(result.stderr, "links/found")


def test_with_another_fingerprinter_every_link_is_asked_of_it(demo, tmp_path, crawls):
    """Known URLs are skipped before a Request only with Scrapy's own fingerprinter (a GET
    is its URL); with another one the scheduler's dupefilter decides, as in Scrapy."""
    result = crawls.run(
        demo.seeds,
        tmp_path / "data",
        "REQUEST_FINGERPRINTER_CLASS=tests.support.fingerprinter.CustomFingerprinter",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(stored_rows(tmp_path / "data")) == len(demo.web.reachable())
    assert stat(result.stderr, "links/known", 0) == 0
    assert stat(result.stderr, "dupefilter/filtered") > 0.7 * stat(result.stderr, "links/found")


def test_rerun_resumes_from_redis_not_from_scratch(demo, tmp_path, crawls):
    """State lives in the (embedded) Redis: a second run of a finished crawl fetches nothing."""
    data = tmp_path / "data"
    assert crawls.run(demo.seeds, data).returncode == 0
    first = sum(demo.page_fetches().values())
    result = crawls.run(demo.seeds, data)
    assert result.returncode == 0
    assert sum(demo.page_fetches().values()) == first
    assert json.dumps(demo.seeds[0])  # the seeds were filtered as seen
    assert "'dupefilter/filtered': 4" in result.stderr


def test_deployment_settings_come_from_the_environment_too(demo, tmp_path, crawls):
    """As REDIS_URL: WEBCRAWL_DATA_DIR, WEBCRAWL_STORE_URL and WEBCRAWL_CRAWL, never ignored."""
    data = tmp_path / "from-env"
    env = crawl_env(WEBCRAWL_DATA_DIR=str(data), WEBCRAWL_CRAWL="envcrawl")
    # no WEBCRAWL_DATA_DIR -s (data_dir None): the environment says where
    result = crawls.run(demo.seeds, None, "DEPTH_LIMIT=1", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert stored_rows(data)
    assert "joined crawl 'envcrawl'" in result.stderr
    assert "in the environment is overridden" not in result.stderr
    # a -s that says otherwise wins, and says so
    result = crawls.run(demo.seeds, tmp_path / "other", "DEPTH_LIMIT=0", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    said = (
        f"WEBCRAWL_DATA_DIR={data} in the environment is overridden by "
        f"WEBCRAWL_DATA_DIR={tmp_path / 'other'} (cmdline settings)"
    )
    assert said in result.stderr
