"""The crawl's shared request queue in Redis.

A sorted set ordered by request priority, then arrival (FIFO within a
priority).  :meth:`push_many` checks fingerprints against the dupefilter set
and queues the new requests in one round trip (a Lua script), so following
the links of a page costs one round trip, not one per link.  :meth:`pop` is
also one round trip and never blocks: it marks the popping worker busy in the
same script, which is what lets an idle worker tell "nothing left anywhere"
from "another worker is still busy".
"""

from __future__ import annotations

from collections.abc import Sequence

import redis
from scrapy import Request, Spider
from scrapy.http.request import _find_method as request_to_name  # the slow, general path
from scrapy.utils.request import request_from_dict

from webcrawl import serialize
from webcrawl.keys import CrawlKeys

# A priority outside this range is clamped so the score keeps FIFO order
# exact in a double (|priority| * 1e12 + seq < 2**53).
MAX_PRIORITY = 8000

_PUSH_MANY = """
local n = tonumber(ARGV[1])
local seq = redis.call('INCRBY', KEYS[3], n) - n
local added = 0
for i = 0, n - 1 do
  local fp = ARGV[2 + i * 3]
  if fp == '' or redis.call('SADD', KEYS[2], fp) == 1 then
    seq = seq + 1
    local score = -tonumber(ARGV[3 + i * 3]) * 1e12 + seq
    -- the sequence number prefix keeps identical (dont_filter) requests apart
    redis.call('ZADD', KEYS[1], string.format('%.17g', score), seq .. '|' .. ARGV[4 + i * 3])
    added = added + 1
  end
end
return added
"""

_POP = """
local item = redis.call('ZPOPMIN', KEYS[1])
if #item == 0 then return false end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return item[1]
"""

_IDLE = """
redis.call('HDEL', KEYS[3], ARGV[1])
local busy = 0
for _, wid in ipairs(redis.call('HKEYS', KEYS[3])) do
  if redis.call('EXISTS', ARGV[2] .. wid) == 1 then
    busy = busy + 1
  else
    redis.call('HDEL', KEYS[3], wid)
  end
end
return {redis.call('ZCARD', KEYS[1]), redis.call('LLEN', KEYS[2]), busy}
"""


class PriorityQueue:
    """Shared priority queue with dupefilter-aware batch push and busy tracking."""

    def __init__(self, server: redis.Redis, spider: Spider, keys: CrawlKeys) -> None:
        self.server = server
        self.spider = spider
        self.keys = keys
        self._push_many = server.register_script(_PUSH_MANY)
        self._pop = server.register_script(_POP)
        self._idle = server.register_script(_IDLE)

    def encode(self, request: Request) -> bytes:
        """JSON bytes of ``request.to_dict(spider=...)``, without its per-call cost.

        ``Request.to_dict`` finds a callback's name by scanning every method
        of the spider with ``inspect.getmembers`` for each request (~180 us,
        a quarter of a page's CPU time here).  We resolve names once per
        function and build the same dict.
        """
        d = {
            "url": request.url,
            "callback": self._method_name(request.callback),
            "errback": self._method_name(request.errback),
            "headers": dict(request.headers),
        }
        for attr in request.attributes:
            d.setdefault(attr, getattr(request, attr))
        if type(request) is not Request:
            d["_class"] = type(request).__module__ + "." + type(request).__name__
        return serialize.dumps(d)

    def _method_name(self, func: object) -> object:
        if not callable(func):
            return func  # None, or already a name
        underlying = getattr(func, "__func__", None)
        name = getattr(func, "__name__", None)
        if underlying is not None and name is not None:
            own = getattr(self.spider, name, None)
            if getattr(own, "__func__", None) is underlying:
                return name
        return request_to_name(self.spider, func)

    def decode(self, member: bytes) -> Request:
        """The request in a queue member (``<seq>|<json>``)."""
        data = member.split(b"|", 1)[1]
        return request_from_dict(serialize.loads(data), spider=self.spider)

    def __len__(self) -> int:
        return int(self.server.zcard(self.keys.queue))

    def push_many(self, entries: Sequence[tuple[bytes, int, bytes]]) -> int:
        """Queue ``(fingerprint, priority, data)`` entries whose fingerprint is new.

        An empty fingerprint bypasses the dupefilter (``dont_filter``).
        Returns how many were queued.
        """
        if not entries:
            return 0
        args: list[bytes | int] = [len(entries)]
        for fingerprint, priority, data in entries:
            args += [fingerprint, max(-MAX_PRIORITY, min(MAX_PRIORITY, priority)), data]
        keys = [self.keys.queue, self.keys.seen, self.keys.seq]
        return int(self._push_many(keys=keys, args=args))

    def pop(self, worker_id: str, now: float) -> Request | None:
        data = self._pop(keys=[self.keys.queue, self.keys.busy], args=[worker_id, now])
        return self.decode(data) if data else None

    def idle_check(self, worker_id: str) -> tuple[int, int, int]:
        """Mark ``worker_id`` idle; return (queued, submitted seeds, busy live workers)."""
        keys = [self.keys.queue, self.keys.start, self.keys.busy]
        queued, submitted, busy = self._idle(keys=keys, args=[worker_id, self.keys.worker_prefix])
        return int(queued), int(submitted), int(busy)

    def clear(self) -> None:
        self.server.delete(self.keys.queue, self.keys.seq)
