"""The crawl's shared frontier in Redis: per-host queues, politeness, leases, in shards.

A host lives in one shard (:mod:`~webcrawl.frontier.keys`); each shard has,
under its own hash tag:

- ``hq:<host>``: a sorted set per host, by request priority then arrival.
- ``ready``: hosts that have queued requests, scored by the time they may be
  fetched from next.  ``next``: per host, the earliest time of its next pop
  (last pop + its delay), kept while the host's queue is empty too.
- ``delay``: per-host delay overrides (seconds); the default is the caller's.
  ``delay_hold``: per host, until when a back-off delay may not be lowered.
- ``leases`` / ``leased``: popped requests, by deadline, and their data.
  A request is leased, not deleted, until the worker acknowledges it; a
  lease whose deadline passes (a killed worker) goes back to its host queue.
  A lease id is ``<shard>:<n>``.
- ``delayed``: requests that may not be fetched before a time (re-queued
  failures with back-off), moved into their host queue when due.
- ``revisits`` / ``revisit_req``: pages scheduled for a revisit, one entry
  per URL (a new schedule replaces the old), moved into their host queue
  when due, bypassing the dupefilter.  A move is part of a step, so no two
  workers take the same revisit.
- ``seen`` (or ``bloom``): the fingerprints of the shard's hosts' URLs.

What a worker does per page is one round trip per Redis node: :meth:`HostQueue.step`
runs one Lua script on each shard it touches (in one pipeline per node) that
acknowledges finished leases, pushes new requests (dupefilter check included),
and, in one shard, requeues expired leases and due delayed requests and pops the
next requests from the hosts whose turn it is.  With many links in a step it
first asks each shard which of their fingerprints it has (a plain set lookup, one
more round trip), so that a duplicate's request is never sent to a script.
Within a shard hosts take turns by ready time, so a host with 100 000 queued
URLs does not hold up one with 10, and one host is never handed out twice
within its delay, whichever workers ask; across shards a worker pops from the
shards that have work in turn, from a map of when each shard has work that
every answer updates (and a look at every shard, one cheap script each, at most
once a second).  Nothing on the per-page path is crawl-wide.

Every shared time is Redis's clock (``TIME`` in the scripts); workers pass
durations, so their own clocks may be off.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import redis
from scrapy import Request, Spider
from scrapy.http.request import _find_method as request_to_name  # the slow, general path
from scrapy.utils.request import request_from_dict

from webcrawl.frontier import serialize
from webcrawl.frontier.cold import (
    clear_cold,
    cold_key,
    host_prefix,
    parse_cold_key,
    parse_revisit_key,
    revisit_key,
    revisit_prefix,
)
from webcrawl.frontier.keys import CrawlKeys, ShardKeys
from webcrawl.frontier.shards import Call, Lua, ShardRouter
from webcrawl.store.base import Store, StoreError

logger = logging.getLogger(__name__)

# What a plain Request's constructor gives an argument left out: its queue entry
# leaves these out (workers of every version read it the same way)
_DEFAULTS = {"callback": None, "errback": None, "headers": {}, "body": b"", "cookies": {},
             "meta": {}, "encoding": "utf-8", "flags": [], "cb_kwargs": {},
             "dont_filter": False, "method": "GET", "priority": 0}  # fmt: skip
_KEEP = object()


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL."""
    return "/".join(url.split("/", 3)[:3])


def _own_origin_path(url: str, headers: dict) -> str | None:
    """The path of the request's Referer when it is its only header and of the URL's
    own origin (a link within a site: the usual case), else None."""
    if len(headers) != 1:
        return None
    values = headers.get(b"Referer")
    if not values or len(values) != 1:
        return None
    referer, origin = values[0].decode("latin-1"), _origin(url)
    if referer.startswith(origin + "/") or referer == origin:
        return referer[len(origin) :]
    return None


# Request classes a queue entry may name (``_class``); others are refused before
# anything is imported (FRONTIER_REQUEST_CLASSES adds a project's own).
DEFAULT_REQUEST_CLASSES = (
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
    "scrapy.http.request.rpc.XmlRpcRequest",
)

# Whether to ask which of a step's fingerprints Redis already has before the step
# (one more round trip): when this many of its pushes are expected to be duplicates
# (from the share of duplicates in recent steps).  A known duplicate then costs Redis
# a set lookup (SMISMEMBER, or BITFIELD_RO for the Bloom filter) instead of the step
# script reading its whole serialised request.
PRECHECK_DUPLICATES = 8

# Spilled requests a worker takes to the store at once (and the spill set's size from
# which a step that only pushes takes them); refill leases one step hands out per shard.
SPILL_BATCH = 500
REFILLS_PER_STEP = 4

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
# 21 refill, 22 reserved, 23 moved prefix.  Every key, the per-host ones included,
# carries the shard's hash tag: one slot.
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
local i = 12
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
-- go into its queue together
local added = 0
local n_push, n_hosts = tonumber(ARGV[i]), tonumber(ARGV[i+1]); i = i + 2
local seq = 0
if n_push > 0 then seq = redis.call('INCRBY', KEYS[7], n_push) - n_push end
for _ = 1, n_hosts do
  local host, count = ARGV[i], tonumber(ARGV[i+1]); i = i + 2
  local entries = {}
  for _ = 1, count do
    local fp, data = ARGV[i], ARGV[i+3]
    local prio, wait = tonumber(ARGV[i+1]), tonumber(ARGV[i+2])
    i = i + 4
    if is_new(fp) then
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
  return {added, requeued, revisited, '', {}, spills}
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
local out = {added, requeued, revisited, false, false, false}
local tries = 0
while #out < 6 + 2 * want_pop and tries < 10 + 2 * want_pop do
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
_IDLE = """
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


@dataclass
class StepResult:
    popped: list[tuple[Request, str]] = field(default_factory=list)  # (request, lease)
    next_ready: float | None = None  # when nothing was popped: seconds until a shard has work
    added: int = 0
    known: int = 0  # pushes found duplicates before the step (not sent to its script)
    requeued: int = 0
    pushed: int = 0
    revisited: int = 0  # due revisits moved into the host queues
    refused: list[tuple[str, str]] = field(default_factory=list)  # (lease, why): unreadable
    # shards whose call failed (node down, failing over, slot migrating): what the step
    # had for them was not applied, the caller keeps it and sends it again
    failed: dict[int, Exception] = field(default_factory=dict)
    # shards whose pushes a master applied but fewer than FRONTIER_REDIS_WAIT_REPLICAS
    # replicas confirmed
    unconfirmed: set[int] = field(default_factory=set)
    calls: int = 0  # shard calls made (script runs)

    @property
    def request(self) -> Request | None:
        """The first request popped, if any."""
        return self.popped[0][0] if self.popped else None

    @property
    def lease(self) -> str | None:
        return self.popped[0][1] if self.popped else None


@dataclass
class TierStats:
    """What a worker's queue moved between Redis and the store (the cold tier)."""

    spilled: int = 0  # requests stored
    refilled: int = 0  # requests moved up into their host queues
    refills: int = 0  # refill leases completed
    recovered: int = 0  # rows a dead worker's refill left in the store, deleted
    store_seconds: float = 0.0  # time in store calls
    spill_seconds: float = 0.0  # time in spills (store and Redis)
    refill_seconds: float = 0.0  # time in refills (store and Redis)
    errors: int = 0  # spills or refills left to expire (store or Redis error)


class RefusedEntry(ValueError):
    """A queue entry this worker will not turn into a request (unreadable, or a class
    that is not allowed)."""


def _now_arg(now: float | None) -> str:
    """The scripts' "now": Redis's clock, unless a test simulates time."""
    return "" if now is None else repr(float(now))


def _seen_key(k: ShardKeys, seen_mode: str) -> str:
    """The shard's dupefilter: its set of fingerprints, or its Bloom filter."""
    return k.bloom if seen_mode == "bloom" else k.seen


def _known(fps: list[bytes], reply: list[int], seen_mode: str) -> set[bytes]:
    """The fingerprints a pre-check's ``reply`` (SMISMEMBER's, or BITFIELD_RO's: a bit
    per offset) says the dupefilter has."""
    if seen_mode != "bloom":
        return {fp for fp, hit in zip(fps, reply, strict=True) if hit}
    known, at = set(), 0
    for fp in fps:
        n = fp.count(b",") + 1
        if all(reply[at : at + n]):
            known.add(fp)
        at += n
    return known


def lease_shard(lease: str) -> tuple[int, str]:
    """``(shard, id)`` of a lease (``<shard>:<id>``)."""
    shard, _, ident = lease.partition(":")
    return int(shard), ident


@dataclass
class _ShardWork:
    acks: list[str] = field(default_factory=list)
    nacks: list[tuple[str, float]] = field(default_factory=list)
    pushes: list[tuple[bytes, str, int, float, bytes]] = field(default_factory=list)
    revisits: list[tuple[str, str, int, float, bytes]] = field(default_factory=list)


_STEP_LUA, _PEEK_LUA, _COUNT_LUA = Lua(_STEP), Lua(_PEEK), Lua(_COUNT)
_SPILLED_LUA, _REFILL_LUA, _REFILLED_LUA = Lua(_SPILLED), Lua(_REFILL), Lua(_REFILLED)
_RENEW_LUA, _ACQUIRE_LUA, _SET_DELAY_LUA = Lua(_RENEW), Lua(_ACQUIRE), Lua(_SET_DELAY)


class HostQueue:
    """Per-host queues in shards, with cluster-wide politeness and leased pops.

    One instance per worker: it remembers when each shard may next have work
    (from every answer, and from a look at all shards at most every
    ``refresh`` seconds), and pops from the shards that have it in turn.
    """

    def __init__(
        self,
        server: redis.Redis | redis.RedisCluster,
        spider: Spider,
        keys: CrawlKeys,
        request_classes: Iterable[str] = DEFAULT_REQUEST_CLASSES,
        *,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
        refresh: float = 1.0,
        store: Store | None = None,
        hot_per_host: int = 0,
        hot_budget: int = 0,
    ) -> None:
        if hot_per_host < 0 or hot_budget < 0:
            raise ValueError("hot_per_host and hot_budget must be >= 0")
        if hot_per_host and store is None:
            raise ValueError("a frontier with a cold tier (hot_per_host > 0) needs a store")
        if hot_budget and not hot_per_host:
            raise ValueError("a budget (FRONTIER_HOT_BUDGET) needs FRONTIER_HOT_PER_HOST > 0")
        self.server = server
        self.spider = spider
        self.keys = keys
        self.request_classes = frozenset(request_classes)
        agent = getattr(spider, "settings", None) and spider.settings.get("USER_AGENT")
        self._own_agent: bytes | None = agent.encode() if agent else None
        self.router = ShardRouter(server, keys, wait_replicas, wait_timeout)
        self._idle = server.register_script(_IDLE)  # crawl-wide keys: one slot, redis-py's way
        self.refresh = refresh
        # per shard: when it may next have work (the clock of :meth:`_clock`); inf:
        # nothing as far as we know (another worker's push is found by the next look)
        self._due = [0.0] * keys.shards
        self._looked = float("-inf")
        self._cursor = random.randrange(keys.shards)  # workers start on different shards
        self._dup_share = 0.5  # of recent steps' fingerprinted pushes: duplicates
        self._precheck = True  # False: the server lacks SMISMEMBER (Redis < 6.2)
        self.store = store
        self.hot_per_host = hot_per_host
        # the budget of a shard: hosts spread evenly over the shards
        self.shard_budget = -(-hot_budget // keys.shards) if hot_budget else 0
        self.tier_stats = TierStats()

    # -- encoding ------------------------------------------------------------

    def encode(self, request: Request) -> bytes:
        """JSON bytes of ``request.to_dict(spider=...)``, without its per-call cost, and
        small: a plain Request's entry leaves out what its constructor would give anyway
        (``_DEFAULTS``), and a Referer of the URL's own origin is kept as its path
        (``_ref``).  A typical link's entry is then its URL, its depth and that path.

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
        if type(request) is not Request:  # another constructor: its own defaults
            d["_class"] = type(request).__module__ + "." + type(request).__name__
            return serialize.dumps(d)
        ref = _own_origin_path(request.url, headers)
        if ref is not None:
            d["_ref"], d["headers"] = ref, {}
        return serialize.dumps({k: v for k, v in d.items()
                                if k == "url" or _DEFAULTS.get(k, _KEEP) != v})  # fmt: skip

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
        ref = d.pop("_ref", None)
        if isinstance(ref, str) and "headers" not in d:
            d["headers"] = {b"Referer": [(_origin(d["url"]) + ref).encode("latin-1")]}
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

    @staticmethod
    def _clock(now: float | None) -> float:
        return time.monotonic() if now is None else now

    def _shard_keys(self, shard: int, seen_mode: str) -> list[str]:
        k = self.keys.shard(shard)
        return [k.ready, k.next, k.delay, k.leases, k.leased, _seen_key(k, seen_mode), k.seq,
                k.queued,
                k.host_queue_prefix, k.delayed, k.lease_seq, k.overflow_prefix,
                k.revisits, k.revisit_requests, k.cold, k.cold_total, k.spill, k.spilling,
                k.refill_wait, k.refilling, k.refill, k.reserved, k.moved_prefix]  # fmt: skip

    def look(self, *, now: float | None = None) -> list[float]:
        """Ask every shard when it has work (one round trip per node); returns and
        remembers seconds from now per shard (inf: none)."""
        calls = []
        for shard in range(self.keys.shards):
            k = self.keys.shard(shard)
            calls.append(Call(shard, _PEEK_LUA, [k.ready, k.leases, k.delayed, k.revisits,
                                                 k.spill, k.refilling, k.refill_wait, k.queued,
                                                 k.reserved],
                              [_now_arg(now), self.shard_budget]))  # fmt: skip
        self.router.run(calls)
        clock = self._clock(now)
        self._looked = clock
        waits = []
        for call in calls:
            if call.error is not None:
                wait = 0.0  # unknown: try it
            else:
                wait = float(call.result)
                wait = float("inf") if wait < 0 else wait
            self._due[call.shard] = clock + wait
            waits.append(wait)
        if all(c.error is not None for c in calls):
            raise calls[0].error
        return waits

    def _pop_order(self, clock: float) -> list[int]:
        """Shards that may have work now, in turn from the cursor."""
        n = self.keys.shards
        order = [(self._cursor + i) % n for i in range(n)]
        return [s for s in order if self._due[s] <= clock]

    def step(
        self,
        *,
        worker_id: str = "",
        acks: Sequence[str] = (),
        nacks: Sequence[tuple[str, float]] = (),
        pushes: Sequence[tuple[bytes, str, int, float, bytes]] = (),
        revisits: Sequence[tuple[str, str, int, float, bytes]] = (),
        pop: bool | int = True,
        default_delay: float = 0.0,
        lease_timeout: float = 60.0,
        requeue_limit: int = 20,
        slack: float = 0.0,
        seen_mode: str = "set",
        now: float | None = None,
    ) -> StepResult:
        """Ack leases, hand back ``nacks`` ``(lease, seconds)`` (their requests go back
        to their host queues after that long), push ``(fingerprint, host, priority,
        seconds to wait, data)``, schedule ``revisits`` ``(url key, host, priority,
        seconds until due, data)``, and in one shard, the next in turn that has work,
        move expired leases and due delayed requests and revisits into the host
        queues and pop ``pop`` requests (True: one) from its ready hosts.

        Each shard touched is one script call; the calls go in one pipeline per
        Redis node.  Times are Redis's clock (``now`` simulates it, for tests).
        An empty fingerprint bypasses the dupefilter (``dont_filter``); with
        ``seen_mode`` "bloom" a fingerprint is its comma-separated bit offsets in
        the shard's Bloom filter.  A host's delay (``default_delay`` unless set
        per host) is stretched by ``slack`` seconds, when it is not 0, for the
        jitter between a request leaving a worker and reaching the server.
        With a cold tier (``hot_per_host``), what is over a host's limit or the
        budget goes to the store, and comes back as the host's queue drains
        (:meth:`_spill`, :meth:`_refill`, after the step's calls).  Popped entries
        that cannot be read are refused: listed in ``refused``, for the caller to
        acknowledge (drop).

        A shard whose call fails is listed in ``failed`` and nothing of its part
        was applied; if every call fails, the first error is raised.
        """
        del worker_id  # kept for callers; busy marks are crawl-wide (WorkerRegistry)
        work = self._group(acks, nacks, pushes, revisits)
        want = int(pop)
        result = StepResult(pushed=len(pushes))
        filtered = sum(1 for p in pushes if p[0])
        if self._precheck and filtered * self._dup_share >= PRECHECK_DUPLICATES:
            result.known = self._drop_known(work, seen_mode)
        clock = self._clock(now)
        if want and (clock - self._looked >= self.refresh or clock < self._looked):
            self.look(now=now)  # now and then, so that no shard with work is left out
            clock = self._clock(now)
        tried: set[int] = set()
        while True:
            pop_shard = None
            if want:
                order = [s for s in self._pop_order(self._clock(now)) if s not in tried]
                pop_shard = order[0] if order else None
            if pop_shard is not None:
                work.setdefault(pop_shard, _ShardWork())
                tried.add(pop_shard)
                self._cursor = (pop_shard + 1) % self.keys.shards
            if not work:
                break
            self._run(work, pop_shard, want, result, now=now, default_delay=default_delay,
                      lease_timeout=lease_timeout, requeue_limit=requeue_limit, slack=slack,
                      seen_mode=seen_mode)  # fmt: skip
            work = {}
            # the shard in turn had nothing after all (another worker took it): the next
            if result.popped or pop_shard is None or len(tried) >= 4:
                break
        if result.calls and len(result.failed) == result.calls:
            raise next(iter(result.failed.values()))  # nothing was applied
        if filtered and not result.failed:
            dups = len(pushes) - result.added  # only fingerprinted pushes can be duplicates
            self._dup_share += 0.2 * (min(1.0, dups / filtered) - self._dup_share)
        if want and not result.popped:
            result.next_ready = self._next_ready(now)
        return result

    def _group(
        self, acks: Sequence[str], nacks: Sequence[tuple[str, float]], pushes: Sequence[tuple],
        revisits: Sequence[tuple],
    ) -> dict[int, _ShardWork]:  # fmt: skip
        """What a step has for each shard."""
        work: dict[int, _ShardWork] = {}
        for lease in acks:
            shard, ident = lease_shard(lease)
            work.setdefault(shard, _ShardWork()).acks.append(ident)
        for lease, wait in nacks:
            shard, ident = lease_shard(lease)
            work.setdefault(shard, _ShardWork()).nacks.append((ident, wait))
        for entry in pushes:
            work.setdefault(self.keys.shard_of(entry[1]), _ShardWork()).pushes.append(entry)
        for entry in revisits:
            work.setdefault(self.keys.shard_of(entry[1]), _ShardWork()).revisits.append(entry)
        return work

    def _drop_known(self, work: dict[int, _ShardWork], seen_mode: str) -> int:
        """Drop from ``work`` the pushes whose fingerprints their shard's dupefilter has
        (one command per shard, one round trip per node); returns how many.

        Only a hint: the step script checks every fingerprint again, so a shard whose
        check failed, or another worker's push meanwhile, changes nothing."""
        calls = []
        for shard, w in work.items():
            fps = [p[0] for p in w.pushes if p[0]]
            if not fps:
                continue
            key = _seen_key(self.keys.shard(shard), seen_mode)
            if seen_mode == "bloom":  # known: every bit of it set
                args = [a for fp in fps for off in fp.split(b",") for a in (b"GET", b"u1", off)]
                calls.append(Call(shard, "BITFIELD_RO", [key], args))
            else:
                calls.append(Call(shard, "SMISMEMBER", [key], fps))
        self.router.run(calls)
        dropped = 0
        for call in calls:
            if call.error is not None:
                if "unknown command" in str(call.error).lower():
                    self._precheck = False
                    logger.warning("This Redis lacks %s (Redis 6.2 has it): duplicates are "
                                   "found by the step script alone", call.script)  # fmt: skip
                continue
            w = work[call.shard]
            known = _known([p[0] for p in w.pushes if p[0]], call.result, seen_mode)
            if known:
                keep = [p for p in w.pushes if not p[0] or p[0] not in known]
                dropped += len(w.pushes) - len(keep)
                w.pushes = keep
        for shard in [s for s, w in work.items() if not (w.acks or w.nacks or w.pushes
                                                         or w.revisits)]:  # fmt: skip
            del work[shard]
        return dropped

    def _next_ready(self, now: float | None) -> float:
        """Seconds until a shard has work, as far as this worker knows."""
        clock = self._clock(now)
        soonest = min(due - clock for due in self._due)
        if soonest == float("inf"):  # no shard has work we know of: look again soon
            soonest = self._looked + self.refresh - clock
        return max(0.0, soonest)

    def _run(self, work: dict[int, _ShardWork], pop_shard: int | None, want: int,
             result: StepResult, *, now: float | None, default_delay: float,
             lease_timeout: float, requeue_limit: int, slack: float,
             seen_mode: str) -> None:  # fmt: skip
        calls = []
        for shard, w in work.items():
            args: list[object] = [_now_arg(now), default_delay, lease_timeout,
                                  want if shard == pop_shard else 0, requeue_limit, slack,
                                  seen_mode, self.hot_per_host, self.shard_budget, SPILL_BATCH,
                                  REFILLS_PER_STEP, len(w.acks), *w.acks,
                                  len(w.nacks)]  # fmt: skip
            for lease, wait in w.nacks:
                args += [lease, max(0.0, float(wait))]
            by_host: dict[str, list[object]] = {}
            for fingerprint, host, priority, wait, data in w.pushes:
                by_host.setdefault(host, []).extend((
                    fingerprint, max(-MAX_PRIORITY, min(MAX_PRIORITY, priority)),
                    max(0.0, float(wait)), data))  # fmt: skip
            args += [len(w.pushes), len(by_host)]
            for host, entries in by_host.items():
                args += [host, len(entries) // 4, *entries]
            args.append(len(w.revisits))
            for key, host, priority, due, data in w.revisits:
                args += [key, host, max(-MAX_PRIORITY, min(MAX_PRIORITY, priority)),
                         repr(float(due)), data]  # fmt: skip
            calls.append(Call(shard, _STEP_LUA, self._shard_keys(shard, seen_mode), args,
                              confirm=bool(w.pushes or w.revisits)))  # fmt: skip
        self.router.run(calls)
        result.calls += len(calls)
        clock = self._clock(now)
        for call in calls:
            if call.error is not None:
                result.failed[call.shard] = call.error
                self._due[call.shard] = clock  # try it again soon
                continue
            if not call.confirmed:
                result.unconfirmed.add(call.shard)
            added, requeued, revisited, next_work, grants, spills, *popped = call.result
            result.added += int(added)
            result.requeued += int(requeued)
            result.revisited += int(revisited)
            if next_work:
                wait = float(next_work)
                self._due[call.shard] = clock + (float("inf") if wait < 0 else wait)
            elif int(added):  # pushed to, not asked: it may have work now
                self._due[call.shard] = min(self._due[call.shard], clock)
            for i in range(0, len(popped), 2):
                lease = f"{call.shard}:{popped[i + 1].decode()}"
                try:
                    result.popped.append((self.decode(popped[i]), lease))
                except RefusedEntry as exc:
                    result.refused.append((lease, str(exc)))
            self._move(call.shard, spills, grants, now=now)

    def _move(self, shard: int, spills: list[bytes], grants: list, *, now: float | None) -> None:
        """What a step call handed this worker to move between the tiers."""
        stats, started = self.tier_stats, time.perf_counter()
        if spills:
            self._spill(shard, spills, now=now)
        moved = time.perf_counter()
        for host, token, room, stale in grants or ():
            self._refill(shard, host.decode(), token.decode(), int(room),
                         [k.decode() for k in stale], now=now)  # fmt: skip
        stats.spill_seconds += moved - started
        stats.refill_seconds += time.perf_counter() - moved

    def _spill(self, shard: int, entries: list[bytes], *, now: float | None) -> None:
        """Store claimed spill entries (``host\\nscore\\n<seq>|data``) in the cold tier, then
        take them out of the spill set.  Storing again is harmless (same row, same key):
        if this worker dies in between, the claim expires and another stores them."""
        crawl = self.keys.crawl
        rows = []
        for entry in entries:
            host, score, member = entry.split(b"\n", 2)
            seq, data = member.split(b"|", 1)
            priority = round((int(seq) - float(score)) / 1e12)
            rows.append((cold_key(crawl, shard, host.decode(), priority, int(seq)), data))
        k = self.keys.shard(shard)
        started = time.perf_counter()
        try:
            self.store.frontier_put(rows)
            self.tier_stats.store_seconds += time.perf_counter() - started
            self._single(shard, _SPILLED_LUA,
                         [k.spill, k.spilling, k.cold, k.refill_wait, k.host_queue_prefix],
                         [_now_arg(now), self.hot_per_host, *entries])  # fmt: skip
        except (StoreError, redis.RedisError) as exc:
            self.tier_stats.errors += 1
            logger.warning("Could not move %d requests to the store (retried when their "
                           "claim expires): %s", len(entries), exc)  # fmt: skip
            return
        self.tier_stats.spilled += len(rows)

    def _refill(self, shard: int, host: str, token: str, room: int, stale: list[str], *,
                now: float | None) -> None:  # fmt: skip
        """Move up to ``room`` of ``host``'s next requests from the store into its queue,
        under the refill lease ``token``.

        Exactly once, whatever the moment a worker dies: the rows go into the queue
        in one script that also records their keys in the host's moved set (and skips
        keys already there); only then are they deleted from the store, and only then
        is the moved set cleared, with the lease.  A dead worker's lease expires and
        the next refill of the host first deletes the rows its moved set names
        (``stale``)."""
        k = self.keys.shard(shard)
        started = time.perf_counter()
        try:
            if stale:
                logger.info("Refill of %s: deleting from the store %d rows that a refill "
                            "whose worker died had moved up", host, len(stale))  # fmt: skip
                self.store.frontier_delete(stale)
                self.tier_stats.recovered += len(stale)
            rows = self.store.frontier_scan(host_prefix(self.keys.crawl, shard, host), room)
            self.tier_stats.store_seconds += time.perf_counter() - started
            args: list[object] = [_now_arg(now), host, token, self.hot_per_host,
                                  "1" if len(rows) < room else "0"]  # fmt: skip
            for key, data in rows:
                priority, seq = parse_cold_key(key)[3:]
                args += [key, repr(float(-priority * 10**12 + seq)), b"%d|%s" % (seq, data)]
            moved = int(self._single(shard, _REFILL_LUA,
                                     [k.ready, k.next, k.queued, k.reserved, k.cold,
                                      k.cold_total, k.refill_wait, k.host_queue_prefix, k.refill,
                                      k.moved_prefix], args))  # fmt: skip
            if moved < 0:
                logger.warning("Refill of %s: the lease expired (another worker has it)", host)
                return
            started = time.perf_counter()
            if rows:
                self.store.frontier_delete([key for key, _ in rows])
            self.tier_stats.store_seconds += time.perf_counter() - started
            self._single(shard, _REFILLED_LUA,
                         [k.refill, k.refilling, k.moved_prefix, k.cold, k.refill_wait,
                          k.host_queue_prefix],
                         [_now_arg(now), host, token, self.hot_per_host])  # fmt: skip
        except (StoreError, redis.RedisError) as exc:
            self.tier_stats.errors += 1
            logger.warning("Could not refill %s from the store (retried when the lease "
                           "expires): %s", host, exc)  # fmt: skip
            return
        self.tier_stats.refilled += moved
        self.tier_stats.refills += 1

    def put_far_revisits(self, revisits: Sequence[tuple[str, str, int, float, bytes]]) -> None:
        """Revisits ``(url key, host, priority, due as Unix time, data)`` due beyond the
        horizon: into the store, until :meth:`move_revisits_up` brings them to Redis."""
        rows = [(revisit_key(self.keys.crawl, due, key),
                 b"%s\n%d\n%s" % (host.encode(), priority, data))
                for key, host, priority, due, data in revisits]  # fmt: skip
        self.store.frontier_put(rows)

    def move_revisits_up(self, horizon: float, *, now: float, batch: int = 500) -> int:
        """Move the revisits the store holds that fall due within ``horizon`` seconds of
        ``now`` (Unix time) into the revisit schedule in Redis; returns how many.

        One worker at a time (a lease in Redis).  Each batch goes to Redis first (a
        revisit is one entry per URL: sending it again changes nothing), then leaves
        the store; a worker that dies between the two leaves rows that the next one
        sends again."""
        k = self.keys
        lease = max(30.0, 10.0 * batch / 1000)
        if not self.server.set(k.revisit_mover, "1", nx=True, px=int(lease * 1000)):
            return 0
        moved = 0
        try:
            while True:
                rows = self.store.frontier_scan(revisit_prefix(k.crawl), batch)
                due_rows = [
                    (key, v) for key, v in rows if parse_revisit_key(key)[0] <= now + horizon
                ]
                if not due_rows:
                    return moved
                revisits = []
                for key, value in due_rows:
                    due, url_key = parse_revisit_key(key)
                    host, priority, data = value.split(b"\n", 2)
                    revisits.append((url_key, host.decode(), int(priority), max(0.0, due - now),
                                     data))  # fmt: skip
                result = self.step(revisits=revisits, pop=False)
                if result.failed:
                    raise next(iter(result.failed.values()))
                self.store.frontier_delete([key for key, _ in due_rows])
                moved += len(due_rows)
                if len(due_rows) < batch:
                    return moved
        finally:
            self.server.delete(k.revisit_mover)

    def _single(self, shard: int, script: Lua, keys: list[str], args: list[object]) -> object:
        (call,) = self.router.run([Call(shard, script, keys, args)])
        if call.error is not None:
            raise call.error
        return call.result

    def renew(self, leases: Sequence[str], timeout: float, *, now: float | None = None) -> None:
        """Leases still in progress (only those that exist) run ``timeout`` seconds more
        (0: they expire now, and their requests go back at the next step)."""
        by_shard: dict[int, list[str]] = {}
        for lease in leases:
            shard, ident = lease_shard(lease)
            by_shard.setdefault(shard, []).append(ident)
        calls = [Call(shard, _RENEW_LUA, [self.keys.shard(shard).leases],
                      [_now_arg(now), timeout, *ids])
                 for shard, ids in by_shard.items()]  # fmt: skip
        for call in self.router.run(calls):
            if call.error is not None:
                raise call.error

    def counts(self, *, now: float | None = None) -> tuple[int, int, int]:
        """Over all shards: (queued, including delayed; revisits due now; leases)."""
        calls = []
        for shard in range(self.keys.shards):
            k = self.keys.shard(shard)
            calls.append(Call(shard, _COUNT_LUA, [k.queued, k.delayed, k.revisits, k.leases,
                                                  k.cold_total],
                              [_now_arg(now)]))  # fmt: skip
        totals = [0, 0, 0]
        for call in self.router.run(calls):
            if call.error is not None:
                raise call.error
            for i, value in enumerate(call.result):
                totals[i] += int(value)
        return totals[0], totals[1], totals[2]

    def __len__(self) -> int:
        """Requests queued (ready or waiting for their host's turn, or delayed)."""
        return self.counts()[0]

    def idle_check(self, worker_id: str, *, now: float | None = None) -> tuple[int, int, int, int]:
        """Mark ``worker_id`` idle; return (queued, submitted seeds, busy live workers, leases).

        Queued counts revisits that are due now; revisits due later do not keep
        a (non-continuous) crawl open.  The crawl-wide part is read first: a
        worker that is busy there has its work in a shard (a lease, or pushes it
        made before its leases were acknowledged) until it is idle again.
        """
        k = self.keys
        submitted, busy = self._idle(keys=[k.busy, k.start], args=[worker_id, k.worker_prefix])
        queued, due, leases = self.counts(now=now)
        return queued + due, int(submitted), int(busy), leases

    def has_work(self, *, now: float | None = None) -> bool:
        """Whether a step would find work now: a ready host, an expired lease, a due
        delayed request or revisit in some shard, or a submitted seed."""
        if self.server.llen(self.keys.start):
            return True
        return any(wait <= 0 for wait in self.look(now=now))

    def acquire(
        self, host: str, *, default_delay: float, slack: float = 0.0, now: float | None = None
    ) -> float:
        """Take ``host``'s turn to send a request now: 0.0, or the seconds to wait first.

        The hard politeness check, made as the request leaves the worker: a
        request can wait after its pop (for robots.txt, for a busy reactor),
        and the delay counts between sends, whichever workers send them.
        """
        shard = self.keys.shard_of(host)
        k = self.keys.shard(shard)
        wait = self._single(shard, _ACQUIRE_LUA, [k.next, k.delay, k.ready],
                            [host, _now_arg(now), default_delay, slack, "take"])  # fmt: skip
        return float(wait)

    def mark_sent(
        self, host: str, *, default_delay: float, slack: float = 0.0, now: float | None = None
    ) -> None:
        """A request to ``host`` really leaves (or its answer came in) now: its next turn
        is no sooner than now + delay (a busy worker can send well after it took its turn)."""
        shard = self.keys.shard_of(host)
        k = self.keys.shard(shard)
        self._single(shard, _ACQUIRE_LUA, [k.next, k.delay, k.ready],
                     [host, _now_arg(now), default_delay, slack, "mark"])  # fmt: skip

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
        shard = self.keys.shard_of(host)
        k = self.keys.shard(shard)
        value = self._single(shard, _SET_DELAY_LUA, [k.delay, k.next, k.ready, k.delay_hold],
                             [host, delay, hold, not_before, _now_arg(now)])  # fmt: skip
        return float(value)

    def close(self) -> None:
        """Release what the queue holds besides the Redis client (the router's threads)."""
        self.router.close()

    def clear(self) -> None:
        """Delete every shard's queues, leases, delays and revisits (not the dupefilter)."""
        for k in self.keys.all_shards():
            hosts = [h.decode() for h in self.server.zrange(k.ready, 0, -1)]
            hosts += [h.decode() for h in self.server.hkeys(k.cold)]
            hosts += [h.decode() for h in self.server.zrange(k.refilling, 0, -1)]
            names = [k.host_queue(h) for h in hosts] + [k.overflow_prefix + h for h in hosts]
            names += [k.moved_prefix + h for h in hosts]
            names += [k.ready, k.next, k.leases, k.leased, k.seq, k.queued, k.delayed,
                      k.lease_seq, k.revisits, k.revisit_requests, k.cold, k.cold_total, k.spill,
                      k.spilling, k.refill_wait, k.refilling, k.refill, k.reserved]  # fmt: skip
            self.server.delete(*names)
        if self.store is not None:
            clear_cold(self.store, self.keys.crawl)
