"""robots.txt holds for every request, even those waiting for the host's robots.txt."""

import pytest
from conftest import run_crawl

STOCK = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"


def seeds_with_private_pages(demo):
    home = demo.seeds[0]
    private = sorted(u for u in demo.web.pages if u.startswith(home + "private/"))
    articles = sorted(u for u in demo.web.pages if u.startswith(home + "s0/"))[:6]
    return [home, *articles[:2], *private, *articles[2:]], private


@pytest.mark.parametrize("middleware", ["ours", "stock"])
def test_requests_waiting_for_robots_txt_are_checked(slow_demo, tmp_path, middleware):
    demo = slow_demo  # robots.txt takes 20 ms: the seeds queue up behind it
    seeds, private = seeds_with_private_pages(demo)
    settings = ["CONCURRENT_REQUESTS_PER_DOMAIN=16"]
    if middleware == "stock":  # the control run: Scrapy 2.19's own middleware
        settings.append(
            'DOWNLOADER_MIDDLEWARES={"middlewares.robotstxt.RobotsTxtMiddleware": null, '
            f'"{STOCK}": 100}}'
        )
    result = run_crawl(seeds, tmp_path / "data", *settings, "DEPTH_LIMIT=1")
    assert result.returncode == 0, result.stderr[-2000:]
    fetched_private = [u for u in demo.page_fetches() if u in private]
    if middleware == "ours":
        assert fetched_private == []
        assert f"'robotstxt/forbidden': {len(private)}" in result.stderr
    else:
        # Documents the upstream bug our middleware works around.  If this
        # starts failing, Scrapy fixed it: drop middlewares/robotstxt.py.
        assert fetched_private, "stock RobotsTxtMiddleware no longer leaks: remove our fix"
