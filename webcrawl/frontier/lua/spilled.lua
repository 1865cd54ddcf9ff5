--! keys: spill spilling cold refill_wait hq spill_claim spill_live spill_done
--! uses: clock tiers
-- A worker stored these spilled requests under its claim's token: those still claimed
-- by that token leave the spill set, and their hosts may be refilled.  Only a live
-- claim completes (in `spill_live`: not taken again, not lost in a failover): a dead
-- one (it expired and some of its entries were claimed again: every row written under
-- it is garbage) takes nothing out, and its entries not claimed again yet will be, by
-- the next claim.
-- ARGV: 1 now, 2 hot_per_host, 3 the claim's token, then the entries (host \n score \n
-- member).  Returns how many left the spill set.
local now, per_host, token, done, hosts = clock(ARGV[1]), tonumber(ARGV[2]), ARGV[3], 0, {}
-- complete (a refill may move its rows), unless it is dead, or lost in a failover, or
-- completed already (a call sent twice)
if redis.call('SREM', K.spill_live, token) == 0 then return 0 end
for k = 4, #ARGV do
  if redis.call('HGET', K.spill_claim, ARGV[k]) == token then
    redis.call('HDEL', K.spill_claim, ARGV[k])
    redis.call('ZREM', K.spill, ARGV[k])
    done = done + 1
    local host = string.match(ARGV[k], '^([^\n]*)\n')
    if redis.call('HINCRBY', K.spilling, host, -1) <= 0 then
      redis.call('HDEL', K.spilling, host)
    end
    hosts[host] = true
  end
end
for host in pairs(hosts) do want_refill(host, per_host, now) end
-- its rows may be refilled now, and only those: a row of a claim that is not listed here
-- (dead, or lost) is garbage, whenever it lands
if done > 0 then redis.call('HINCRBY', K.spill_done, token, done) end
return done
