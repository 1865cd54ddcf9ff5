"""The shared crawl frontier in Redis: scheduler, per-host queues, dupefilters, leases.

:mod:`~webcrawl.frontier.scheduler` (``SCHEDULER``) drives
:mod:`~webcrawl.frontier.queue` (``SCHEDULER_QUEUE_CLASS``: host queues, politeness
turns and leases, one Lua step per round trip) and
:mod:`~webcrawl.frontier.dupefilter` (``DUPEFILTER_CLASS``, exact or
:mod:`~webcrawl.frontier.bloom`).  Beside them: Redis key names
(:mod:`~webcrawl.frontier.keys`), the worker registry, the Redis connection and the
embedded Redis, the queue's JSON serialisation, the adaptive politeness policy
(:mod:`~webcrawl.frontier.adaptive_delay`, pure) and the ``Requeue`` exception.
"""

from webcrawl._lazy import lazy

# exported lazily: the scheduler module pulls in scrapy-redis and Twisted
_EXPORTS = {
    "Scheduler": "scheduler",
    "HostQueue": "queue",
    "RedisDupeFilter": "dupefilter",
    "RedisBloomDupeFilter": "dupefilter",
    "CrawlKeys": "keys",
    "CrawlRedis": "redisconn",
    "Requeue": "requeue",
}
__all__ = [
    "CrawlKeys",
    "CrawlRedis",
    "HostQueue",
    "RedisBloomDupeFilter",
    "RedisDupeFilter",
    "Requeue",
    "Scheduler",
]

__getattr__ = lazy(__name__, _EXPORTS)
