--! keys: refill refilling moved cold spilling refill_wait hq
--! uses: clock tiers
-- The rows of a refill are deleted from the store: the lease ends, and the host asks for
-- another refill if it still wants one, unless this one moved nothing because rows of
-- claims in progress filled its scan (that claim's SPILLED, or the next claim's once it
-- expires, asks: asking now would only scan the same rows again).
-- ARGV: 1 now, 2 host, 3 token, 4 hot_per_host, 5 '1' to ask again.  Returns 1, or 0 if
-- the lease is another's.
local now, host, token = clock(ARGV[1]), ARGV[2], ARGV[3]
local lease = redis.call('HGET', K.refill, host)
if not lease or string.match(lease, '^([^|]*)|') ~= token then return 0 end
redis.call('HDEL', K.refill, host)
redis.call('ZREM', K.refilling, host)
redis.call('DEL', K.moved .. host)
if ARGV[5] == '1' then want_refill(host, tonumber(ARGV[4]), now) end
return 1
