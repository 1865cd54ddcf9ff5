-- The cold tier (FRONTIER_HOT_PER_HOST), with the keys of the script that uses it:
-- budget_room reads queued and reserved (add_count writes them); want_refill cold,
-- spilling, hq and refill_wait; add_cold writes cold and cold_total.
local function num(v) return tonumber(v or '0') or 0 end

-- queued and reserved as this call last read or wrote them: read once a call, then
-- kept with its own changes (a step stores the links of many hosts); unwritten, the
-- changes add_count_later keeps for write_counts
local counts, unwritten = {}, {}
local function count_of(key)
  local v = counts[key]
  if v == nil then
    v = num(redis.call('GET', key)) + (unwritten[key] or 0)
    counts[key] = v
  end
  return v
end
-- (n 0 writes nothing: -0, which a negated 0 is, is no integer to INCRBY)
local function add_count(key, n)
  if n ~= 0 then
    counts[key] = redis.call('INCRBY', key, string.format('%d', n)) + (unwritten[key] or 0)
  end
end
-- add_count, written by write_counts: one INCRBY a key a call, not one a host.  A
-- script that uses it calls write_counts before every return.
local function add_count_later(key, n)
  unwritten[key] = (unwritten[key] or 0) + n
  if counts[key] ~= nil then counts[key] = counts[key] + n end
end
local function write_counts()
  for key, n in pairs(unwritten) do
    unwritten[key] = nil  -- (a field set to nil while pairs walks the table: allowed)
    add_count(key, n)
  end
end

-- queue places left under the shard's budget (budget 0: no limit)
local function budget_room(budget)
  if budget <= 0 then return 1e15 end
  return budget - count_of(K.queued) - count_of(K.reserved)
end

-- a host with requests in the store (not only on their way there) and its queue under
-- half full asks for a refill
local function want_refill(host, per_host, now)
  if per_host <= 0 then return end
  local cold = num(redis.call('HGET', K.cold, host))  -- (0 for most hosts: no more asked)
  if cold > 0 and cold > num(redis.call('HGET', K.spilling, host))
      and redis.call('ZCARD', K.hq .. host) * 2 < per_host then
    redis.call('ZADD', K.refill_wait, 'NX', string.format('%.17g', now), host)
  end
end

local function add_cold(host, n)
  n = string.format('%d', n)
  if redis.call('HINCRBY', K.cold, host, n) <= 0 then redis.call('HDEL', K.cold, host) end
  redis.call('INCRBY', K.cold_total, n)
end
