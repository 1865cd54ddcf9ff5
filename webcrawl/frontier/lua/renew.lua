--! keys: leases
--! uses: clock
-- Push back the deadline of leases that still exist.
-- ARGV: 1 now, 2 timeout (seconds), then the lease ids.
local deadline = string.format('%.17g', clock(ARGV[1]) + tonumber(ARGV[2]))
for k = 3, #ARGV do redis.call('ZADD', K.leases, 'XX', deadline, ARGV[k]) end
return #ARGV - 2
