--! keys: refill refilling moved cold spilling refill_wait hq
--! uses: clock tiers
-- The rows of a refill are deleted from the store: the lease ends.
-- ARGV: 1 now, 2 host, 3 token, 4 hot_per_host.  Returns 1, or 0 if the lease is
-- another's.
local now, host, token = clock(ARGV[1]), ARGV[2], ARGV[3]
local lease = redis.call('HGET', K.refill, host)
if not lease or string.match(lease, '^([^|]*)|') ~= token then return 0 end
redis.call('HDEL', K.refill, host)
redis.call('ZREM', K.refilling, host)
redis.call('DEL', K.moved .. host)
want_refill(host, tonumber(ARGV[4]), now)
return 1
