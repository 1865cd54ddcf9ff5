--! keys: refill refilling moved cold spilling refill_wait hq spill_live
--! uses: clock tiers
-- The rows of a refill are deleted from the store: the lease ends, and the host asks for
-- another refill if it still wants one, unless this one moved nothing because rows of
-- claims in progress filled its scan and they are all still in progress (their SPILLED,
-- or the next claim's once one expires, asks: asking now would only scan the same rows
-- again).  One completed meanwhile may have asked while this lease was live, and been
-- dropped: then this asks.
-- ARGV: 1 now, 2 host, 3 token, 4 hot_per_host, 5 '1' to ask again, or '0' and the
-- tokens of the claims in progress it kept rows of.  Returns 1, or 0 if the lease is
-- another's.
local now, host, token = clock(ARGV[1]), ARGV[2], ARGV[3]
local lease = redis.call('HGET', K.refill, host)
if not lease or string.match(lease, '^([^|]*)|') ~= token then return 0 end
redis.call('HDEL', K.refill, host)
redis.call('ZREM', K.refilling, host)
redis.call('DEL', K.moved .. host)
local again = ARGV[5] == '1'
for k = 6, #ARGV do
  if redis.call('SISMEMBER', K.spill_live, ARGV[k]) == 0 then again = true end
end
if again then want_refill(host, tonumber(ARGV[4]), now) end
return 1
