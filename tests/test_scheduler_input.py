"""What the scheduler refuses to queue (in process: no Redis is reached)."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from webcrawl.frontier.scheduler import Scheduler


@pytest.mark.parametrize("url", ["http:///x", "http://@/x", "http://:80/x"])
def test_a_request_that_names_no_host_is_dropped_with_a_reason(url, caplog):
    """Found by a review: a redirect to such a URL (``Location: http://@/x``) made a
    request of host '' that no store row can be named after: once spilled, it failed
    its whole spill batch, claim after claim, and the URLs with it stayed in Redis."""
    settings = {k: v for k, v in get_project_settings().copy_to_dict().items()
                if not k.startswith("TWISTED_REACTOR")}  # whichever this process has  # fmt: skip
    crawler = get_crawler(settings_dict=settings)
    scheduler = Scheduler.from_crawler(crawler)  # not opened: enqueue refuses it first
    assert scheduler.enqueue_request(Request(url, dont_filter=True)) is False
    assert crawler.stats.get_value("scheduler/no_host") == 1
    assert f"Dropped <GET {url}>: its URL names no host" in caplog.text
