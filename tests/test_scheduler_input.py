"""What the scheduler refuses to queue (in process: no Redis is reached)."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.utils.test import get_crawler

from webcrawl.frontier.scheduler import Scheduler


def _crawler(**overrides: object) -> object:
    """A crawler of the project's settings (the reactor: whichever this process has)."""
    from webcrawl.settings import base, defaults

    settings = {k: getattr(base, k) for k in dir(base) if k.isupper()}
    # (get_crawler, in a process with no reactor, sets Scrapy's aiohttp handlers)
    settings["DOWNLOAD_HANDLERS"] = defaults.DOWNLOAD_HANDLERS
    return get_crawler(settings_dict={**settings, **overrides})


@pytest.mark.parametrize("url", ["http:///x", "http://@/x", "http://:80/x"])
def test_a_request_that_names_no_host_is_dropped_with_a_reason(url, caplog):
    """Found by a review: a redirect to such a URL (``Location: http://@/x``) made a
    request of host '' that no store row can be named after: once spilled, it failed
    its whole spill batch, claim after claim, and the URLs with it stayed in Redis."""
    crawler = _crawler()
    scheduler = Scheduler.from_crawler(crawler)  # not opened: enqueue refuses it first
    assert scheduler.enqueue_request(Request(url, dont_filter=True)) is False
    assert crawler.stats.get_value("scheduler/no_host") == 1
    assert f"Dropped <GET {url}>: its URL names no host" in caplog.text


@pytest.mark.parametrize("url", ["ftp://h/x", "file://h/etc/passwd", "s3://bucket/key"])
def test_a_request_of_another_scheme_is_dropped_with_a_reason(url, caplog):
    """Its queue entry would be refused by every worker (FRONTIER_SCHEMES)."""
    crawler = _crawler()
    scheduler = Scheduler.from_crawler(crawler)
    assert scheduler.enqueue_request(Request(url, dont_filter=True)) is False
    assert crawler.stats.get_value("scheduler/bad_scheme") == 1
    assert "is not in FRONTIER_SCHEMES" in caplog.text
