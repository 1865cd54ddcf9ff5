"""The crawl's shared frontier in Redis: per-host queues, politeness, leases.

Data (all under the crawl's prefix):

- ``hq:<host>``: a sorted set per host, by request priority then arrival.
- ``ready``: hosts that have queued requests, scored by the time they may be
  fetched from next.  ``next``: per host, the earliest time of its next pop
  (last pop + its delay), kept while the host's queue is empty too.
- ``delay``: per-host delay overrides (seconds); the default is the caller's.
  ``delay_hold``: per host, until when a back-off delay may not be lowered.
- ``leases`` / ``leased``: popped requests, by deadline, and their data.
  A request is leased, not deleted, until the worker acknowledges it; a
  lease whose deadline passes (a killed worker) goes back to its host queue.
- ``delayed``: requests that may not be fetched before a time (re-queued
  failures with back-off), moved into their host queue when due.
- ``revisits`` / ``revisit_req``: pages scheduled for a revisit, one entry
  per URL (a new schedule replaces the old), moved into their host queue
  when due, bypassing the dupefilter.  A move is part of a step, so no two
  workers take the same revisit.

Everything a worker does per page is one round trip: :meth:`step` runs one
Lua script that acknowledges finished leases, pushes new requests (dupefilter
check included), requeues expired leases and due delayed requests, and pops
the next request from the host whose turn it is.  Hosts take turns by ready
time, so a host with 100 000 queued URLs does not hold up one with 10, and
one host is never handed out twice within its delay, whichever workers ask.

Every shared time is Redis's clock (``TIME`` in the scripts); workers pass
durations, so their own clocks may be off.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import redis
from scrapy import Request, Spider
from scrapy.http.request import _find_method as request_to_name  # the slow, general path
from scrapy.utils.request import request_from_dict

from webcrawl.frontier import serialize
from webcrawl.frontier.keys import CrawlKeys

# Request classes a queue entry may name (``_class``); others are refused before
# anything is imported (FRONTIER_REQUEST_CLASSES adds a project's own).
DEFAULT_REQUEST_CLASSES = (
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
    "scrapy.http.request.rpc.XmlRpcRequest",
)

# A priority outside this range is clamped so the score keeps FIFO order
# exact in a double (|priority| * 1e12 + seq < 2**53).
MAX_PRIORITY = 8000

# Every time shared between workers (lease deadlines, host turns, back-offs, due
# revisits) is Redis's own clock: a worker whose clock is a minute ahead must not
# requeue every live lease nor hand a host out early.  Callers pass durations;
# ARGV "now" is '' except in tests that simulate time.
_CLOCK = """
local function clock(given)
  if given ~= nil and given ~= '' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""


def _with_clock(script: str) -> str:
    """``script`` with ``clock(now_arg)``: Redis's time, or the caller's in tests."""
    return _CLOCK + script


_STEP = _with_clock("""
local now = clock(ARGV[1])
local default_delay = tonumber(ARGV[3])
local lease_timeout = tonumber(ARGV[4])
local want_pop = tonumber(ARGV[5])
local requeue_limit = tonumber(ARGV[6])
local slack = tonumber(ARGV[7])
local bloom = ARGV[8] == 'bloom'
local max_per_host = tonumber(ARGV[9])
local over = KEYS[13]

-- is a request new?  '' (dont_filter) always; else add it to the seen set, or
-- set its bits in the Bloom filter: new if any bit was 0
local function is_new(fp)
  if fp == '' then return true end
  if not bloom then return redis.call('SADD', KEYS[6], fp) == 1 end
  local new = false
  for offset in string.gmatch(fp, '%d+') do
    if redis.call('SETBIT', KEYS[6], tonumber(offset), 1) == 0 then new = true end
  end
  return new
end

local function host_delay(host)
  local delay = tonumber(redis.call('HGET', KEYS[3], host) or default_delay)
  if delay > 0 then return delay + slack end
  return 0
end
local hq = KEYS[10]

local function schedule(host)
  local nxt = tonumber(redis.call('HGET', KEYS[2], host) or '0')
  redis.call('ZADD', KEYS[1], 'NX', string.format('%.17g', math.max(now, nxt)), host)
end

local function enqueue(host, score, member)
  -- a host holds at most max_per_host requests in its queue; the rest waits
  -- in its overflow, and moves up as the queue drains (nothing is dropped)
  if max_per_host > 0 and redis.call('ZCARD', hq .. host) >= max_per_host then
    redis.call('ZADD', over .. host, score, member)
  else
    redis.call('ZADD', hq .. host, score, member)
  end
  redis.call('INCR', KEYS[9])
  schedule(host)
end

-- 1. acknowledgements, then leases handed back (their request could not be
-- completed: it goes back to its host queue when the lease expires, after a wait)
local i = 10
local n_acks = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_acks do
  redis.call('ZREM', KEYS[4], ARGV[i])
  redis.call('HDEL', KEYS[5], ARGV[i])
  i = i + 1
end
local n_nacks = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_nacks do
  redis.call('ZADD', KEYS[4], 'XX', string.format('%.17g', now + tonumber(ARGV[i+1])), ARGV[i])
  i = i + 2
end

-- 2. new requests (fingerprint, host, priority, seconds to wait, data)
local added = 0
local n_push = tonumber(ARGV[i]); i = i + 1
local seq = redis.call('INCRBY', KEYS[7], n_push) - n_push
for _ = 1, n_push do
  local fp, host, data = ARGV[i], ARGV[i+1], ARGV[i+4]
  local prio, wait = tonumber(ARGV[i+2]), tonumber(ARGV[i+3])
  i = i + 5
  if is_new(fp) then
    seq = seq + 1
    local score = string.format('%.17g', -prio * 1e12 + seq)
    -- the sequence number prefix keeps identical (dont_filter) requests apart
    local member = seq .. '|' .. data
    if wait > 0 then
      local entry = host .. '\\n' .. score .. '\\n' .. member
      redis.call('ZADD', KEYS[11], string.format('%.17g', now + wait), entry)
    else
      enqueue(host, score, member)
    end
    added = added + 1
  end
end

-- 3. revisits scheduled (url key, host, priority, seconds until due, data): one
-- entry per URL
local n_rev = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_rev do
  local key, host, prio, due, data = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4]
  i = i + 5
  redis.call('ZADD', KEYS[14], string.format('%.17g', now + tonumber(due)), key)
  redis.call('HSET', KEYS[15], key, host .. '\\n' .. prio .. '\\n' .. data)
end

-- 4. expired leases, due delayed requests and due revisits go to their host queues
local requeued = 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, requeue_limit)
for _, id in ipairs(expired) do
  local entry = redis.call('HGET', KEYS[5], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  if entry then
    local host, score, member = string.match(entry, '^([^\\n]*)\\n([^\\n]*)\\n(.*)$')
    enqueue(host, score, member)
    requeued = requeued + 1
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[11], '-inf', now, 'LIMIT', 0, requeue_limit)
for _, entry in ipairs(due) do
  redis.call('ZREM', KEYS[11], entry)
  local host, score, member = string.match(entry, '^([^\\n]*)\\n([^\\n]*)\\n(.*)$')
  enqueue(host, score, member)
end
local revisited = 0
local revisits = redis.call('ZRANGEBYSCORE', KEYS[14], '-inf', now, 'LIMIT', 0, requeue_limit)
for _, key in ipairs(revisits) do
  local entry = redis.call('HGET', KEYS[15], key)
  redis.call('ZREM', KEYS[14], key)
  redis.call('HDEL', KEYS[15], key)
  if entry then
    local host, prio, data = string.match(entry, '^([^\\n]*)\\n([^\\n]*)\\n(.*)$')
    local n = redis.call('INCR', KEYS[7])
    enqueue(host, string.format('%.17g', -tonumber(prio) * 1e12 + n), n .. '|' .. data)
    revisited = revisited + 1
  end
end

-- 5. pop up to want_pop requests, each from the host whose turn it is (a
-- host handed out is not ready again before its delay, so with a delay one
-- call never hands out one host twice)
local out = {added, requeued, false, revisited}
local tries = 0
while #out < 4 + 2 * want_pop and tries < 10 + 2 * want_pop do
  tries = tries + 1
  local top = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #top == 0 then break end
  local host, ready_at = top[1], tonumber(top[2])
  if ready_at > now then
    if #out == 4 then out[3] = string.format('%.17g', ready_at - now) end
    break
  end
  local item = redis.call('ZPOPMIN', hq .. host)
  if #item == 0 then
    redis.call('ZREM', KEYS[1], host)
  else
    redis.call('DECR', KEYS[9])
    local up = redis.call('ZPOPMIN', over .. host)
    if #up > 0 then redis.call('ZADD', hq .. host, up[2], up[1]) end
    -- the host's turn is claimed until now + delay (or its next send, if later)
    local sent = tonumber(redis.call('HGET', KEYS[2], host) or '0')
    local nxt = math.max(now + host_delay(host), sent)
    if redis.call('EXISTS', hq .. host) == 1 then
      redis.call('ZADD', KEYS[1], string.format('%.17g', nxt), host)
    else
      redis.call('ZREM', KEYS[1], host)
    end
    local id = tostring(redis.call('INCR', KEYS[12]))
    redis.call('ZADD', KEYS[4], string.format('%.17g', now + lease_timeout), id)
    redis.call('HSET', KEYS[5], id, host .. '\\n' .. item[2] .. '\\n' .. item[1])
    redis.call('HSET', KEYS[8], ARGV[2], ARGV[1])
    out[#out + 1] = item[1]
    out[#out + 1] = id
  end
end
return out
""")

_IDLE = _with_clock("""
local now = clock(ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[1])
local busy = 0
for _, wid in ipairs(redis.call('HKEYS', KEYS[3])) do
  if redis.call('EXISTS', ARGV[2] .. wid) == 1 then
    busy = busy + 1
  else
    redis.call('HDEL', KEYS[3], wid)
  end
end
local queued = tonumber(redis.call('GET', KEYS[1]) or '0') + redis.call('ZCARD', KEYS[5])
  + redis.call('ZCOUNT', KEYS[6], '-inf', now)
return {queued, redis.call('LLEN', KEYS[2]), busy, redis.call('ZCARD', KEYS[4])}
""")

# Is there work for an idle worker: a ready host, a submitted seed, an expired
# lease, a due delayed request or revisit?  (1 or 0)
_POLL = _with_clock("""
local now = clock(ARGV[1])
if #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1) > 0 then return 1 end
if redis.call('LLEN', KEYS[2]) > 0 then return 1 end
for k = 3, 5 do
  if #redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now, 'LIMIT', 0, 1) > 0 then return 1 end
end
return 0
""")

# Push back the deadline of leases that still exist (ARGV: now, timeout, ids...).
_RENEW = _with_clock("""
local deadline = string.format('%.17g', clock(ARGV[1]) + tonumber(ARGV[2]))
for k = 3, #ARGV do redis.call('ZADD', KEYS[1], 'XX', deadline, ARGV[k]) end
return #ARGV - 2
""")


_ACQUIRE = _with_clock("""
local host, now, default_delay, slack = ARGV[1], clock(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local nxt = tonumber(redis.call('HGET', KEYS[1], host) or '0')
if ARGV[5] == 'take' and now < nxt then return tostring(nxt - now) end
local delay = tonumber(redis.call('HGET', KEYS[2], host) or default_delay)
if delay > 0 then delay = delay + slack end
if now + delay <= nxt then return '0' end
nxt = now + delay
redis.call('HSET', KEYS[1], host, string.format('%.17g', nxt))
local score = redis.call('ZSCORE', KEYS[3], host)
if score and tonumber(score) < nxt then
  redis.call('ZADD', KEYS[3], 'XX', string.format('%.17g', nxt), host)
end
return '0'
""")

# A host's delay, written by any worker.  A back-off (hold > 0 seconds) holds:
# until it expires, no worker's write lowers the delay below it (each worker
# adapts from what it alone saw; the last writer must not undo another's 503).
# not_before > 0: the host's next turn is no sooner than now + not_before (a
# Retry-After window), whoever pops next.  Returns the delay now in force.
_SET_DELAY = _with_clock("""
local host, delay, hold, not_before = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local now = clock(ARGV[5])
local held_until = tonumber(redis.call('HGET', KEYS[4], host) or '0')
local stored = tonumber(redis.call('HGET', KEYS[1], host) or '-1')
if held_until > now and stored > delay then delay = stored end
redis.call('HSET', KEYS[1], host, string.format('%.17g', delay))
if hold > 0 and now + hold > held_until then
  redis.call('HSET', KEYS[4], host, string.format('%.17g', now + hold))
elseif held_until > 0 and held_until <= now then
  redis.call('HDEL', KEYS[4], host)
end
if not_before > 0 then
  local nxt = now + not_before
  if nxt > tonumber(redis.call('HGET', KEYS[2], host) or '0') then
    redis.call('HSET', KEYS[2], host, string.format('%.17g', nxt))
    local score = redis.call('ZSCORE', KEYS[3], host)
    if score and tonumber(score) < nxt then
      redis.call('ZADD', KEYS[3], 'XX', string.format('%.17g', nxt), host)
    end
  end
end
return string.format('%.17g', delay)
""")


@dataclass
class StepResult:
    popped: list[tuple[Request, str]] = field(default_factory=list)  # (request, lease)
    next_ready: float | None = None  # when no host was ready: seconds until the next one is
    added: int = 0
    requeued: int = 0
    pushed: int = 0
    revisited: int = 0  # due revisits moved into the host queues
    refused: list[tuple[str, str]] = field(default_factory=list)  # (lease, why): unreadable

    @property
    def request(self) -> Request | None:
        """The first request popped, if any."""
        return self.popped[0][0] if self.popped else None

    @property
    def lease(self) -> str | None:
        return self.popped[0][1] if self.popped else None


class RefusedEntry(ValueError):
    """A queue entry this worker will not turn into a request (unreadable, or a class
    that is not allowed)."""


def _now_arg(now: float | None) -> str:
    """The scripts' "now": Redis's clock, unless a test simulates time."""
    return "" if now is None else repr(float(now))


class HostQueue:
    """Per-host queues with cluster-wide politeness and leased pops."""

    def __init__(
        self,
        server: redis.Redis,
        spider: Spider,
        keys: CrawlKeys,
        request_classes: Iterable[str] = DEFAULT_REQUEST_CLASSES,
    ) -> None:
        self.server = server
        self.spider = spider
        self.keys = keys
        self.request_classes = frozenset(request_classes)
        agent = getattr(spider, "settings", None) and spider.settings.get("USER_AGENT")
        self._own_agent: bytes | None = agent.encode() if agent else None
        self._step = server.register_script(_STEP)
        self._idle = server.register_script(_IDLE)
        self._poll = server.register_script(_POLL)
        self._renew = server.register_script(_RENEW)
        self._set_delay = server.register_script(_SET_DELAY)
        self._acquire = server.register_script(_ACQUIRE)

    # -- encoding ------------------------------------------------------------

    def encode(self, request: Request) -> bytes:
        """JSON bytes of ``request.to_dict(spider=...)``, without its per-call cost.

        ``Request.to_dict`` finds a callback's name by scanning every method
        of the spider with ``inspect.getmembers`` for each request (~180 us,
        a quarter of a page's CPU time here).  We resolve names once per
        function and build the same dict.
        """
        headers = dict(request.headers)
        if self._own_agent is not None and headers.get(b"User-Agent") == [self._own_agent]:
            # Set by this worker's UserAgentMiddleware, and copied into redirects:
            # the worker that fetches the request sets its own.
            del headers[b"User-Agent"]
        d = {
            "url": request.url,
            "callback": self._method_name(request.callback),
            "errback": self._method_name(request.errback),
            "headers": headers,
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
        """The request in a queue member (``<seq>|<json>``).

        Raises :class:`RefusedEntry` for an entry that is not a request dict, or
        that names a request class (``_class``) outside ``request_classes``: on a
        shared Redis whoever can write the queue would otherwise choose what every
        worker imports.  The name is checked before anything is imported.
        """
        try:
            d = serialize.loads(member.split(b"|", 1)[1])
        except (IndexError, ValueError, UnicodeDecodeError) as exc:
            raise RefusedEntry(f"not a serialised request: {exc}") from None
        if not isinstance(d, dict) or not isinstance(d.get("url"), str):
            raise RefusedEntry("not a serialised request")
        name = d.get("_class")
        if name is not None and name not in self.request_classes:
            raise RefusedEntry(
                f"request class {name!r} is not in FRONTIER_REQUEST_CLASSES"
                if isinstance(name, str) else "bad request class"
            )  # fmt: skip
        try:
            request = request_from_dict(d, spider=self.spider)
        except Exception as exc:  # a bad callback name, bad field types...
            raise RefusedEntry(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(request, Request):
            raise RefusedEntry(f"{type(request).__name__} is not a scrapy Request")
        return request

    # -- operations ----------------------------------------------------------

    def step(
        self,
        *,
        worker_id: str,
        acks: Sequence[str] = (),
        nacks: Sequence[tuple[str, float]] = (),
        pushes: Sequence[tuple[bytes, str, int, float, bytes]] = (),
        revisits: Sequence[tuple[str, str, int, float, bytes]] = (),
        pop: bool | int = True,
        default_delay: float = 0.0,
        lease_timeout: float = 60.0,
        requeue_limit: int = 20,
        slack: float = 0.0,
        seen_key: str | None = None,
        seen_mode: str = "set",
        max_per_host: int = 0,
        now: float | None = None,
    ) -> StepResult:
        """Ack leases, hand back ``nacks`` ``(lease, seconds)`` (their requests go back
        to their host queues after that long), push ``(fingerprint, host, priority,
        seconds to wait, data)``, schedule ``revisits`` ``(url key, host, priority,
        seconds until due, data)``, move expired leases and due delayed requests and
        revisits into the host queues, and pop ``pop`` requests (True: one) from
        ready hosts.

        Times are Redis's clock (``now`` simulates it, for tests).  An empty
        fingerprint bypasses the dupefilter (``dont_filter``); with ``seen_mode``
        "bloom" a fingerprint is its comma-separated bit offsets in the Bloom
        filter at ``seen_key``.  A host's delay (``default_delay`` unless set per
        host) is stretched by ``slack`` seconds, when it is not 0, for the jitter
        between a request leaving a worker and reaching the server.
        ``max_per_host`` (0: no cap) bounds a host's queue; what is over waits in
        its overflow, in order.  Popped entries that cannot be read are refused:
        acknowledged (dropped) with the next step, and listed in ``refused``.
        """
        args: list[object] = [_now_arg(now), worker_id, default_delay, lease_timeout, int(pop),
                              requeue_limit, slack, seen_mode, max_per_host, len(acks),
                              *acks, len(nacks)]  # fmt: skip
        for lease, wait in nacks:
            args += [lease, max(0.0, float(wait))]
        args.append(len(pushes))
        for fingerprint, host, priority, wait, data in pushes:
            args += [fingerprint, host, max(-MAX_PRIORITY, min(MAX_PRIORITY, priority)),
                     max(0.0, float(wait)), data]  # fmt: skip
        args.append(len(revisits))
        for key, host, priority, due, data in revisits:
            args += [key, host, max(-MAX_PRIORITY, min(MAX_PRIORITY, priority)),
                     repr(float(due)), data]  # fmt: skip
        k = self.keys
        keys = [k.ready, k.next, k.delay, k.leases, k.leased, seen_key or k.seen, k.seq, k.busy,
                k.queued, k.host_queue_prefix, k.delayed, k.lease_seq,
                k.overflow_prefix, k.revisits, k.revisit_requests]  # fmt: skip
        added, requeued, next_ready, revisited, *popped = self._step(keys=keys, args=args)
        result = StepResult(added=int(added), requeued=int(requeued), pushed=len(pushes),
                            revisited=int(revisited))  # fmt: skip
        for i in range(0, len(popped), 2):
            lease = popped[i + 1].decode()
            try:
                result.popped.append((self.decode(popped[i]), lease))
            except RefusedEntry as exc:
                result.refused.append((lease, str(exc)))
        if next_ready:
            result.next_ready = float(next_ready)
        return result

    def renew(self, leases: Sequence[str], timeout: float, *, now: float | None = None) -> None:
        """Leases still in progress (only those that exist) run ``timeout`` seconds more
        (0: they expire now, and their requests go back at the next step)."""
        if leases:
            self._renew(keys=[self.keys.leases], args=[_now_arg(now), timeout, *leases])

    def __len__(self) -> int:
        """Requests queued (ready or waiting for their host's turn, or delayed)."""
        pipe = self.server.pipeline(transaction=False)
        pipe.get(self.keys.queued).zcard(self.keys.delayed)
        queued, delayed = pipe.execute()
        return int(queued or 0) + int(delayed)

    def idle_check(self, worker_id: str, *, now: float | None = None) -> tuple[int, int, int, int]:
        """Mark ``worker_id`` idle; return (queued, submitted seeds, busy live workers, leases).

        Queued counts revisits that are due now; revisits due later do not keep
        a (non-continuous) crawl open.
        """
        k = self.keys
        result = self._idle(keys=[k.queued, k.start, k.busy, k.leases, k.delayed, k.revisits],
                            args=[worker_id, k.worker_prefix, _now_arg(now)])  # fmt: skip
        return tuple(int(x) for x in result)  # type: ignore[return-value]

    def has_work(self, *, now: float | None = None) -> bool:
        """Whether a step would find work now: a ready host, a submitted seed, an
        expired lease, a due delayed request or revisit (one round trip)."""
        k = self.keys
        return bool(self._poll(keys=[k.ready, k.start, k.leases, k.delayed, k.revisits],
                               args=[_now_arg(now)]))  # fmt: skip

    def acquire(
        self, host: str, *, default_delay: float, slack: float = 0.0, now: float | None = None
    ) -> float:
        """Take ``host``'s turn to send a request now: 0.0, or the seconds to wait first.

        The hard politeness check, made as the request leaves the worker: a
        request can wait after its pop (for robots.txt, for a busy reactor),
        and the delay counts between sends, whichever workers send them.
        """
        k = self.keys
        wait = self._acquire(keys=[k.next, k.delay, k.ready],
                             args=[host, _now_arg(now), default_delay, slack, "take"])  # fmt: skip
        return float(wait)

    def mark_sent(
        self, host: str, *, default_delay: float, slack: float = 0.0, now: float | None = None
    ) -> None:
        """A request to ``host`` really leaves (or its answer came in) now: its next turn
        is no sooner than now + delay (a busy worker can send well after it took its turn)."""
        k = self.keys
        self._acquire(keys=[k.next, k.delay, k.ready],
                      args=[host, _now_arg(now), default_delay, slack, "mark"])  # fmt: skip

    def set_delay(
        self,
        host: str,
        delay: float,
        *,
        hold: float = 0.0,
        not_before: float = 0.0,
        now: float | None = None,
    ) -> float:
        """Set ``host``'s delay for every worker; return the delay in force.

        ``hold`` > 0 makes it a back-off: for that many seconds no write lowers the
        delay below it (another worker's healthy answers included).  ``not_before``
        > 0: the host's next turn is at least that many seconds from now.
        """
        k = self.keys
        value = self._set_delay(keys=[k.delay, k.next, k.ready, k.delay_hold],
                                args=[host, delay, hold, not_before, _now_arg(now)])  # fmt: skip
        return float(value)

    def clear(self) -> None:
        k = self.keys
        hosts = self.server.zrange(k.ready, 0, -1)
        names = [k.host_queue_prefix + h.decode() for h in hosts]
        names += [k.overflow_prefix + h.decode() for h in hosts]
        names += [
            k.ready,
            k.next,
            k.leases,
            k.leased,
            k.seq,
            k.queued,
            k.delayed,
            k.lease_seq,
            k.revisits,
            k.revisit_requests,
        ]
        self.server.delete(*names)
