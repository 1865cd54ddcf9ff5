--! keys: spill spilling cold refill_wait hq spill_claim spill_live spill_done
--! uses: clock tiers
-- A worker stored these spilled requests under its claim's token: those still claimed
-- by that token leave the spill set, and their hosts may be refilled.  Only a live
-- claim completes (in `spill_live`: not taken again, not lost in a failover): a dead
-- one (it expired and some of its entries were claimed again: every row written under
-- it is garbage) takes nothing out, and its entries not claimed again yet will be, by
-- the next claim.
-- ARGV: 1 now, 2 hot_per_host, 3 the claim's token, 4 how many of the entries, the last
-- ones, the worker could not read and stored nowhere (they leave the set all the same: each
-- would fail every claim of it), then the entries (host \n score \n member).  Returns how
-- many left the spill set.
local now, per_host, token, done, hosts = clock(ARGV[1]), tonumber(ARGV[2]), ARGV[3], 0, {}
local stored_until, stored = #ARGV - tonumber(ARGV[4]), 0
-- complete (a refill may move its rows), unless it is dead, or lost in a failover, or
-- completed already (a call sent twice)
if redis.call('SREM', K.spill_live, token) == 0 then return 0 end
for k = 5, #ARGV do
  if redis.call('HGET', K.spill_claim, ARGV[k]) == token then
    redis.call('HDEL', K.spill_claim, ARGV[k])
    redis.call('ZREM', K.spill, ARGV[k])
    done = done + 1
    if k <= stored_until then stored = stored + 1 end
    -- (an unread entry a step spilled was counted in its host's spilling and cold: it
    -- leaves spilling here, and cold, which counts a row that is not there, is set right
    -- by the host's next refill, which finds fewer rows than it counts.  One without a
    -- host no step wrote; one whose host is damaged, or that no step wrote but names a
    -- host, leaves counts that no refill sets right: see docs/frontier.md)
    local host = string.match(ARGV[k], '^([^\n]*)\n')
    if host then
      if redis.call('HINCRBY', K.spilling, host, -1) <= 0 then
        redis.call('HDEL', K.spilling, host)
      end
      hosts[host] = true
    end
  end
end
for host in pairs(hosts) do want_refill(host, per_host, now) end
-- its rows may be refilled now, and only those: a row of a claim that is not listed here
-- (dead, or lost) is garbage, whenever it lands
if stored > 0 then redis.call('HINCRBY', K.spill_done, token, stored) end
return done
