--! keys: leases turn_holds
--! uses: clock
-- Push back the deadline of leases that still exist, and of turns still held by the
-- holders named (their requests are still in flight).
-- ARGV: 1 now, 2 timeout (seconds), 3 the number n of lease ids, then the lease ids,
-- then (host, holder) pairs.  Returns n.
local deadline = string.format('%.17g', clock(ARGV[1]) + tonumber(ARGV[2]))
local n = tonumber(ARGV[3])
for k = 4, 3 + n do redis.call('ZADD', K.leases, 'XX', deadline, ARGV[k]) end
for k = 4 + n, #ARGV, 2 do
  local host, holder = ARGV[k], ARGV[k + 1]
  local value = redis.call('HGET', K.turn_holds, host)
  if value and string.match(value, '^%S+ (.*)$') == holder then
    redis.call('HSET', K.turn_holds, host, deadline .. ' ' .. holder)
  end
end
return n
