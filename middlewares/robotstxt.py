"""robots.txt, with a fix for concurrent waiters (Scrapy 2.19).

Scrapy 2.19's ``RobotsTxtMiddleware.robot_parser`` lets every request to a
host whose robots.txt is still downloading ``await`` the same Deferred.  Under
the asyncio reactor each await adds a callback that returns None, so only
the first waiter receives the parser; every other request gets None and is
let through **without a robots.txt check**.  A crawl that starts with many
requests to one host (several seeds, or a worker joining a running crawl
with a full queue) fetches disallowed pages.  ``tests/test_robotstxt.py``
shows the stock middleware doing it and this one not.

We give each waiter its own Deferred, fed from the shared one without
consuming its result.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobotsTxt
from scrapy.robotstxt import RobotParser
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred


class RobotsTxtMiddleware(ScrapyRobotsTxt):
    async def robot_parser(self, request: Request) -> RobotParser | None:
        parser = self._parsers.get(urlparse_cached(request).netloc)
        if isinstance(parser, Deferred):
            waiter: Deferred[Any] = Deferred()

            def relay(result: Any) -> Any:
                waiter.callback(result)
                return result  # keep the result for the next waiter

            parser.addBoth(relay)
            return await maybe_deferred_to_future(waiter)
        return await super().robot_parser(request)
