"""Start requests as seeds of the shared crawl.

Every worker of a crawl runs the spider's ``start`` and sends the same start requests,
which Scrapy's own ``Spider.start`` marks ``dont_filter``: each worker would fetch each
start URL again, and a link back to it later would not be known.  This spider middleware
clears ``dont_filter`` on the start requests alone, as they leave ``start``: the crawl
takes each start URL once.  Their retries, which go back to the frontier with
``dont_filter`` set by the retry middleware, are not start requests and keep it.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.http import Response
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware


class SharedStartMiddleware(BaseSpiderMiddleware):
    def get_processed_request(self, request: Request, response: Response | None) -> Request:
        if response is None and request.dont_filter:  # a start request
            return request.replace(dont_filter=False)
        return request
