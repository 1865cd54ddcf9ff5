"""The frontier's Lua scripts: what each shard does in one atomic call.

:class:`~webcrawl.frontier.queue.HostQueue` runs them (its docstring describes the
keys).  Each script names its KEYS and ARGV in the comment above it; every key of a
shard script carries the shard's hash tag (one slot).
"""

from __future__ import annotations

from webcrawl.frontier.shards import Lua

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


# When a shard may next have work for a worker: its first ready host, expiring
# lease, due delayed request or due revisit (seconds from now, 0 if now), or -1
# when it has nothing at all.  Returned as a string (Lua numbers become integers).
_NEXT_WORK = """
local function next_work(now, names)
  local best = nil
  for _, name in ipairs(names) do
    -- ZCARD first: a script's ZRANGE costs several times more, and most of these are empty
    if redis.call('ZCARD', name) > 0 then
      local top = redis.call('ZRANGE', name, 0, 0, 'WITHSCORES')
      if best == nil or tonumber(top[2]) < best then best = tonumber(top[2]) end
    end
  end
  if best == nil then return '-1' end
  return string.format('%.17g', math.max(0, best - now))
end
"""


# The cold tier (FRONTIER_HOT_PER_HOST): a script that uses these declares, before them,
# a local table T of its keys (queued, reserved, cold, cold_total, refill_wait, hq: the
# host queue prefix).
_TIERS = """
local function num(v) return tonumber(v or '0') or 0 end

-- queue places left under the shard's budget (budget 0: no limit)
local function budget_room(budget)
  if budget <= 0 then return 1e15 end
  return budget - num(redis.call('GET', T.queued)) - num(redis.call('GET', T.reserved))
end

-- a host with requests in the cold tier and its queue under half full asks for a refill
local function want_refill(host, per_host, now)
  if per_host > 0 and num(redis.call('HGET', T.cold, host)) > 0
      and redis.call('ZCARD', T.hq .. host) * 2 < per_host then
    redis.call('ZADD', T.refill_wait, 'NX', string.format('%.17g', now), host)
  end
end

local function add_cold(host, n)
  if redis.call('HINCRBY', T.cold, host, n) <= 0 then redis.call('HDEL', T.cold, host) end
  redis.call('INCRBY', T.cold_total, n)
end
"""


def _with_clock(script: str, tiers: str = "") -> str:
    """``script`` with ``clock(now_arg)`` (Redis's time, or the caller's in tests) and
    ``next_work(now, keys)``; with ``tiers`` (a Lua table of key names, ``T``), the cold
    tier's functions (``_TIERS``) too."""
    if tiers:
        script = f"local T = {tiers}\n{_TIERS}{script}"
    return _CLOCK + _NEXT_WORK + script


# One step on one shard.  KEYS: 1 ready, 2 next, 3 delay, 4 leases, 5 leased,
# 6 seen (or the Bloom filter), 7 seq, 8 queued, 9 host queue prefix, 10 delayed,
# 11 lease_seq, 12 overflow prefix, 13 revisits, 14 revisit requests, then the cold
# tier's: 15 cold, 16 cold_total, 17 spill, 18 spilling, 19 refill_wait, 20 refilling,
# 21 refill, 22 reserved, 23 moved prefix; 24 host_pages, 25 over_budget.  Every key,
# the per-host ones included, carries the shard's hash tag: one slot.
_STEP = _with_clock("""
local now = clock(ARGV[1])
local default_delay = tonumber(ARGV[2])
local lease_timeout = tonumber(ARGV[3])
local want_pop = tonumber(ARGV[4])
local requeue_limit = tonumber(ARGV[5])
local slack = tonumber(ARGV[6])
local bloom = ARGV[7] == 'bloom'
local hot_per_host = tonumber(ARGV[8])
local budget = tonumber(ARGV[9])
local spill_batch = tonumber(ARGV[10])
local max_grants = tonumber(ARGV[11])
local max_pages = tonumber(ARGV[12])
local hq, over = KEYS[9], KEYS[12]

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

local function schedule(host)
  local nxt = tonumber(redis.call('HGET', KEYS[2], host) or '0')
  redis.call('ZADD', KEYS[1], 'NX', string.format('%.17g', math.max(now, nxt)), host)
end

-- ZADD entries[from..to] (score, member pairs; from odd) in calls of at most 500
-- pairs: unpack's limit
local function zadd_all(key, entries, from, to)
  for s = from, to, 1000 do
    redis.call('ZADD', key, unpack(entries, s, math.min(s + 999, to)))
  end
end

-- Requests into a host's queue: entries are score, member pairs.  A host holds at
-- most hot_per_host requests in its queue, and the shard at most budget; the rest
-- goes to the cold tier: into the spill set, from which a worker moves it to the
-- store.  Once a host has requests in the cold tier its new ones follow them there,
-- in order, and move up with the refills.
local function enqueue_all(host, entries, force)
  local n = #entries / 2
  local room = n
  if hot_per_host > 0 and not force then
    if num(redis.call('HGET', T.cold, host)) > 0 then
      room = 0
    else
      room = math.min(n, hot_per_host - redis.call('ZCARD', hq .. host), budget_room(budget))
      room = math.max(0, room)
    end
  end
  if room > 0 then
    zadd_all(hq .. host, entries, 1, 2 * room)
    redis.call('INCRBY', KEYS[8], room)
    schedule(host)
  end
  if room < n then
    local spilled = {}
    for s = 2 * room + 1, #entries, 2 do
      spilled[#spilled + 1] = '0'
      spilled[#spilled + 1] = host .. '\\n' .. entries[s] .. '\\n' .. entries[s + 1]
    end
    zadd_all(KEYS[17], spilled, 1, #spilled)
    redis.call('HINCRBY', KEYS[18], host, n - room)
    add_cold(host, n - room)
  end
  return n
end

local function enqueue(host, score, member, force)
  enqueue_all(host, {score, member}, force)
end

-- Up to spill_batch requests of the spill set, claimed for lease_timeout seconds (a
-- claim that is not completed expires, and the next worker stores them again)
local function claim_spills()
  local claimed = redis.call('ZRANGEBYSCORE', KEYS[17], '-inf', now, 'LIMIT', 0, spill_batch)
  local until_ = string.format('%.17g', now + lease_timeout)
  for _, entry in ipairs(claimed) do redis.call('ZADD', KEYS[17], 'XX', until_, entry) end
  return claimed
end

-- Refill leases for hosts waiting for one (at most max_grants): {host, token, room,
-- rows a dead worker's refill moved up but did not delete from the store}.  A host
-- is refilled only when none of its requests is on its way to the store (the rows
-- come up in order), by one worker at a time, within the shard's budget.
local function grant_refills()
  local grants = {}
  if hot_per_host <= 0 then return grants end
  for _, h in ipairs(redis.call('ZRANGEBYSCORE', KEYS[20], '-inf', now, 'LIMIT', 0, 20)) do
    -- the worker of this refill died: the host waits again
    redis.call('ZREM', KEYS[20], h)
    local lease = redis.call('HGET', KEYS[21], h)
    if lease then redis.call('DECRBY', KEYS[22], tonumber(string.match(lease, '^[^|]*|(%d+)'))) end
    redis.call('HDEL', KEYS[21], h)
    redis.call('ZADD', KEYS[19], 'NX', string.format('%.17g', now), h)
  end
  local room_left, looked = budget_room(budget), 0
  while #grants < max_grants and room_left > 0 and looked < 4 * max_grants do
    looked = looked + 1
    local top = redis.call('ZPOPMIN', KEYS[19])
    if #top == 0 then break end
    local h = top[1]
    local room = math.max(0, math.min(hot_per_host - redis.call('ZCARD', hq .. h), room_left))
    -- wanted: room, rows in the store and none on its way there; or rows a dead
    -- worker's refill moved up are still in the store (deleted by this refill)
    local wanted = room > 0 and num(redis.call('HGET', T.cold, h)) > 0
      and num(redis.call('HGET', KEYS[18], h)) == 0
    if wanted or redis.call('EXISTS', KEYS[23] .. h) == 1 then
      local token = tostring(redis.call('INCR', KEYS[11]))
      -- the host's rows in the store now: its count, less what is on its way there
      local stored = num(redis.call('HGET', T.cold, h)) - num(redis.call('HGET', KEYS[18], h))
      redis.call('HSET', KEYS[21], h, token .. '|' .. room .. '|' .. math.max(0, stored))
      redis.call('ZADD', KEYS[20], string.format('%.17g', now + lease_timeout), h)
      redis.call('INCRBY', KEYS[22], room)
      room_left = room_left - room
      grants[#grants + 1] = {h, token, room, redis.call('SMEMBERS', KEYS[23] .. h)}
    end
  end
  return grants
end

-- When the shard has work: its ready hosts, leases, delayed requests and revisits, its
-- spill set, refill leases that may expire, and hosts waiting for a refill when the
-- budget has room for them
local function shard_next_work()
  local names = {KEYS[1], KEYS[4], KEYS[10], KEYS[13], KEYS[17], KEYS[20]}
  if budget_room(budget) > 0 then names[#names + 1] = KEYS[19] end
  return next_work(now, names)
end

-- 1. acknowledgements, then leases handed back (their request could not be
-- completed: it goes back to its host queue when the lease expires, after a wait)
local i = 13
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

-- 2. new requests, by host: n requests, n hosts, then per host: host, count, and
-- count times (fingerprint, priority, seconds to wait, data); a host's new requests
-- go into its queue together.  A host takes at most max_pages new URLs in all
-- (FRONTIER_MAX_PAGES_PER_HOST, 0: no limit); beyond, new URLs are dropped (and seen)
-- and the host joins the set of hosts over their budget.
local added, over_budget = 0, 0
local n_push, n_hosts = tonumber(ARGV[i]), tonumber(ARGV[i+1]); i = i + 2
local seq = 0
if n_push > 0 then seq = redis.call('INCRBY', KEYS[7], n_push) - n_push end
for _ = 1, n_hosts do
  local host, count = ARGV[i], tonumber(ARGV[i+1]); i = i + 2
  local entries = {}
  local pages, counted, over_before = 0, 0, over_budget
  if max_pages > 0 then pages = num(redis.call('HGET', KEYS[24], host)) end
  for _ = 1, count do
    local fp, data = ARGV[i], ARGV[i+3]
    local prio, wait = tonumber(ARGV[i+1]), tonumber(ARGV[i+2])
    i = i + 4
    local new = is_new(fp)
    if new and max_pages > 0 and fp ~= '' then
      if pages + counted >= max_pages then
        new = false
        over_budget = over_budget + 1
      else
        counted = counted + 1
      end
    end
    if new then
      seq = seq + 1
      local score = string.format('%.17g', -prio * 1e12 + seq)
      -- the sequence number prefix keeps identical (dont_filter) requests apart
      local member = seq .. '|' .. data
      if wait > 0 then
        local entry = host .. '\\n' .. score .. '\\n' .. member
        redis.call('ZADD', KEYS[10], string.format('%.17g', now + wait), entry)
      else
        entries[#entries + 1] = score
        entries[#entries + 1] = member
      end
      added = added + 1
    end
  end
  if #entries > 0 then enqueue_all(host, entries) end
  if counted > 0 then redis.call('HINCRBY', KEYS[24], host, counted) end
  if over_budget > over_before then redis.call('SADD', KEYS[25], host) end
end

-- 3. revisits scheduled (url key, host, priority, seconds until due, data): one
-- entry per URL
local n_rev = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_rev do
  local key, host, prio, due, data = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4]
  i = i + 5
  redis.call('ZADD', KEYS[13], string.format('%.17g', now + tonumber(due)), key)
  redis.call('HSET', KEYS[14], key, host .. '\\n' .. prio .. '\\n' .. data)
end

-- 4. expired leases, due delayed requests and due revisits go to their host queues;
-- only in a call that pops (a shard with such work is due in every worker's map, so
-- one pops there), the rest ends here: a call that only pushes says nothing of when
-- the shard has work (''), and takes spilled requests to store only when there are
-- a batch of them
local requeued, revisited = 0, 0
if want_pop == 0 then
  local spills = {}
  if hot_per_host > 0 and redis.call('ZCARD', KEYS[17]) >= spill_batch then
    spills = claim_spills()
  end
  return {added, requeued, revisited, '', {}, spills, over_budget}
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, requeue_limit)
for _, id in ipairs(expired) do
  local entry = redis.call('HGET', KEYS[5], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  if entry then
    local host, score, member = string.match(entry, '^([^\\n]*)\\n([^\\n]*)\\n(.*)$')
    -- back to its host queue, whatever its limits: it was there, and comes first
    enqueue(host, score, member, true)
    requeued = requeued + 1
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now, 'LIMIT', 0, requeue_limit)
for _, entry in ipairs(due) do
  redis.call('ZREM', KEYS[10], entry)
  local host, score, member = string.match(entry, '^([^\\n]*)\\n([^\\n]*)\\n(.*)$')
  enqueue(host, score, member)
end
local revisits = redis.call('ZRANGEBYSCORE', KEYS[13], '-inf', now, 'LIMIT', 0, requeue_limit)
for _, key in ipairs(revisits) do
  local entry = redis.call('HGET', KEYS[14], key)
  redis.call('ZREM', KEYS[13], key)
  redis.call('HDEL', KEYS[14], key)
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
local out = {added, requeued, revisited, false, false, false, over_budget}
local tries = 0
while #out < 7 + 2 * want_pop and tries < 10 + 2 * want_pop do
  tries = tries + 1
  local top = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #top == 0 or tonumber(top[2]) > now then break end
  local host = top[1]
  local item = redis.call('ZPOPMIN', hq .. host)
  if #item == 0 then
    -- its requests left are in the cold tier: it is ready again when they move up
    redis.call('ZREM', KEYS[1], host)
    want_refill(host, hot_per_host, now)
  else
    redis.call('DECR', KEYS[8])
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
    want_refill(host, hot_per_host, now)
    local id = tostring(redis.call('INCR', KEYS[11]))
    redis.call('ZADD', KEYS[4], string.format('%.17g', now + lease_timeout), id)
    redis.call('HSET', KEYS[5], id, host .. '\\n' .. item[2] .. '\\n' .. item[1])
    out[#out + 1] = item[1]
    out[#out + 1] = id
  end
end
out[5] = grant_refills()
out[6] = {}
if hot_per_host > 0 then out[6] = claim_spills() end
out[4] = shard_next_work()
return out
""", tiers="{queued = KEYS[8], reserved = KEYS[22], cold = KEYS[15], cold_total = KEYS[16], "
         "refill_wait = KEYS[19], hq = KEYS[9]}")  # fmt: skip

# A worker stored these spilled requests (ARGV: now, hot_per_host, entries...): they
# leave the spill set, and a host none of whose requests is spilling any more may be
# refilled.  Entries already gone (another worker's claim after ours expired) count
# once.  KEYS: spill, spilling, cold, refill_wait, host queue prefix.
_SPILLED = _with_clock("""
local now, per_host, done = clock(ARGV[1]), tonumber(ARGV[2]), 0
for k = 3, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[k]) == 1 then
    done = done + 1
    local host = string.match(ARGV[k], '^([^\\n]*)\\n')
    if redis.call('HINCRBY', KEYS[2], host, -1) <= 0 then
      redis.call('HDEL', KEYS[2], host)
      want_refill(host, per_host, now)
    end
  end
end
return done
""", tiers="{cold = KEYS[3], refill_wait = KEYS[4], hq = KEYS[5]}")  # fmt: skip

# A refill: rows of a host's cold tier read from the store move into its queue, if the
# caller's lease (ARGV[3], its token) is still the host's.  ARGV: now, host, token,
# hot_per_host, '1' if the store had no more rows of the host, then (row key, score,
# member) per row.  A row is put in the queue once: its key joins the host's moved
# set in the same step, and a row already there (put there by a refill whose worker
# died before deleting it from the store) is skipped.  Returns how many moved up, or
# -1 (the lease is another's: nothing done).  KEYS: 1 ready, 2 next, 3 queued,
# 4 reserved, 5 cold, 6 cold_total, 7 refill_wait, 8 host queue prefix, 9 refill,
# 10 moved prefix.
_REFILL = _with_clock("""
local now, host, token = clock(ARGV[1]), ARGV[2], ARGV[3]
local lease = redis.call('HGET', KEYS[9], host)
if not lease or string.match(lease, '^([^|]*)|') ~= token then return -1 end
local entries = {}
for k = 6, #ARGV, 3 do
  if redis.call('SADD', KEYS[10] .. host, ARGV[k]) == 1 then
    entries[#entries + 1] = ARGV[k + 1]
    entries[#entries + 1] = ARGV[k + 2]
  end
end
local n = #entries / 2
for s = 1, #entries, 1000 do
  redis.call('ZADD', T.hq .. host, unpack(entries, s, math.min(s + 999, #entries)))
end
if n > 0 then
  redis.call('INCRBY', T.queued, n)
  add_cold(host, -n)
end
local room, cold = string.match(lease, '^[^|]*|(%d+)|(%d+)$')
redis.call('DECRBY', T.reserved, tonumber(room))
redis.call('HSET', KEYS[9], host, token .. '|0|0')
if ARGV[5] == '1' then
  -- the store had fewer rows than asked for: the rows it should have held at the grant
  -- beyond those read are not there (rows stored since can only make this smaller)
  local extra = math.min(tonumber(cold) - (#ARGV - 5) / 3, num(redis.call('HGET', T.cold, host)))
  if extra > 0 then add_cold(host, -extra) end
end
if redis.call('EXISTS', T.hq .. host) == 1 then
  local nxt = tonumber(redis.call('HGET', KEYS[2], host) or '0')
  redis.call('ZADD', KEYS[1], 'NX', string.format('%.17g', math.max(now, nxt)), host)
end
return n
""", tiers="{queued = KEYS[3], reserved = KEYS[4], cold = KEYS[5], cold_total = KEYS[6], "
         "refill_wait = KEYS[7], hq = KEYS[8]}")  # fmt: skip

# The rows of a refill are deleted from the store: the lease ends (ARGV: now, host,
# token, hot_per_host).  KEYS: refill, refilling, moved prefix, cold, refill_wait,
# host queue prefix.
_REFILLED = _with_clock("""
local now, host, token = clock(ARGV[1]), ARGV[2], ARGV[3]
local lease = redis.call('HGET', KEYS[1], host)
if not lease or string.match(lease, '^([^|]*)|') ~= token then return 0 end
redis.call('HDEL', KEYS[1], host)
redis.call('ZREM', KEYS[2], host)
redis.call('DEL', KEYS[3] .. host)
want_refill(host, tonumber(ARGV[4]), now)
return 1
""", tiers="{cold = KEYS[4], refill_wait = KEYS[5], hq = KEYS[6]}")  # fmt: skip

# When does a shard have work (see _NEXT_WORK)?  KEYS: ready, leases, delayed, revisits,
# spill, refilling, refill_wait (work when the budget, ARGV[2], has room), queued,
# reserved.
_PEEK = _with_clock("""
local names = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]}
if budget_room(tonumber(ARGV[2])) > 0 then names[#names + 1] = KEYS[7] end
return next_work(clock(ARGV[1]), names)
""", tiers="{queued = KEYS[8], reserved = KEYS[9]}")  # fmt: skip

# A shard's counts: {queued (host queues, delayed and the cold tier), revisits due now,
# leases}.  KEYS: queued, delayed, revisits, leases, cold_total.
_COUNT = _with_clock("""
local now = clock(ARGV[1])
return {tonumber(redis.call('GET', KEYS[1]) or '0') + redis.call('ZCARD', KEYS[2])
          + tonumber(redis.call('GET', KEYS[5]) or '0'),
        redis.call('ZCOUNT', KEYS[3], '-inf', now), redis.call('ZCARD', KEYS[4])}
""")

# The crawl-wide half of an idle check: this worker is idle now; how many other
# workers are busy and alive, and how many seeds wait?  KEYS: busy, start; the
# heartbeats (ARGV[2] .. id) share the crawl-wide hash tag.
IDLE = """
redis.call('HDEL', KEYS[1], ARGV[1])
local busy = 0
for _, wid in ipairs(redis.call('HKEYS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[2] .. wid) == 1 then
    busy = busy + 1
  else
    redis.call('HDEL', KEYS[1], wid)
  end
end
return {redis.call('LLEN', KEYS[2]), busy}
"""

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


STEP, PEEK, COUNT = Lua(_STEP), Lua(_PEEK), Lua(_COUNT)
SPILLED, REFILL, REFILLED = Lua(_SPILLED), Lua(_REFILL), Lua(_REFILLED)
RENEW, ACQUIRE, SET_DELAY = Lua(_RENEW), Lua(_ACQUIRE), Lua(_SET_DELAY)
