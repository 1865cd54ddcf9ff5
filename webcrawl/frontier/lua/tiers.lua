-- The cold tier (FRONTIER_HOT_PER_HOST), with the keys of the script that uses it:
-- budget_room reads queued and reserved; want_refill cold, spilling, hq and refill_wait;
-- add_cold writes cold and cold_total.
local function num(v) return tonumber(v or '0') or 0 end

-- queue places left under the shard's budget (budget 0: no limit)
local function budget_room(budget)
  if budget <= 0 then return 1e15 end
  return budget - num(redis.call('GET', K.queued)) - num(redis.call('GET', K.reserved))
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
  if redis.call('HINCRBY', K.cold, host, n) <= 0 then redis.call('HDEL', K.cold, host) end
  redis.call('INCRBY', K.cold_total, n)
end
