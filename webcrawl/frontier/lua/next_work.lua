-- earliest(names): the first score of the sorted sets named (nil when all are empty).
-- next_work(now, names): when a shard may next have work for a worker: the first score
-- of the sorted sets named (its first ready host, expiring lease, due delayed request or
-- due revisit...), as seconds from now (0 if now), or -1 when they are all empty.
-- Returned as a string (Lua numbers become integers).
local function earliest(names)
  local best = nil
  for _, name in ipairs(names) do
    -- ZCARD first: a script's ZRANGE costs several times more, and most of these are empty
    if redis.call('ZCARD', name) > 0 then
      local top = redis.call('ZRANGE', name, '0', '0', 'WITHSCORES')
      if best == nil or tonumber(top[2]) < best then best = tonumber(top[2]) end
    end
  end
  return best
end

-- seconds_until(now, t): t as seconds from now (0 if past), a string
local function seconds_until(now, t) return string.format('%.17g', math.max(0, t - now)) end

local function next_work(now, names)
  local best = earliest(names)
  if best == nil then return '-1' end
  return seconds_until(now, best)
end
