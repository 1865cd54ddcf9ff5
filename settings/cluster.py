"""Profile for a cluster of workers sharing one Redis.

    export REDIS_URL=redis://redis.internal:6379/0
    SCRAPY_SETTINGS_MODULE=webcrawl.settings.cluster scrapy crawl web -a seeds=seeds.txt

Every worker needs the same REDIS_URL and the same store (STORE_URL: HBase
on several machines): a worker whose store is not the crawl's is refused at start.
"""

import os

from webcrawl.settings.base import *  # noqa: F403

REDIS_URL = os.environ.get("REDIS_URL") or None
# Workers on several machines cannot share an embedded Redis: fail at start
# when REDIS_URL is missing instead of crawling alone.
REDIS_EMBEDDED = False
# More in flight per worker; politeness per host is unchanged.
CONCURRENT_REQUESTS = 64
# Workers on other machines: give a dead worker a little longer before it is written off.
STATUS_HEARTBEAT_TTL = 60.0
