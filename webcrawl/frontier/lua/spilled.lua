--! keys: spill spilling cold refill_wait hq
--! uses: clock tiers
-- A worker stored these spilled requests: they leave the spill set, and a host none of
-- whose requests is spilling any more may be refilled.  Entries already gone (another
-- worker's claim after ours expired) count once.
-- ARGV: 1 now, 2 hot_per_host, then the entries (host \n score \n member).
-- Returns how many left the spill set.
local now, per_host, done = clock(ARGV[1]), tonumber(ARGV[2]), 0
for k = 3, #ARGV do
  if redis.call('ZREM', K.spill, ARGV[k]) == 1 then
    done = done + 1
    local host = string.match(ARGV[k], '^([^\n]*)\n')
    if redis.call('HINCRBY', K.spilling, host, -1) <= 0 then
      redis.call('HDEL', K.spilling, host)
      want_refill(host, per_host, now)
    end
  end
end
return done
