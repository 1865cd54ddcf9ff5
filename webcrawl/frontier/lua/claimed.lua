--! keys: spill spill_claim spill_live replicated
--! uses: clock
-- Before a worker stores spilled requests: whether its claim is still live in Redis:
-- not expired, not dead (taken again: out of `spill_live`), not lost (a failover after
-- the step that made it: rows written under it would be counted and refilled by
-- nobody).  A claim is made in one script, so one of its entries tells.  A live claim
-- bumps the `replicated` counter: a write, so that the WAIT sent after this call
-- confirms the claim (WAIT counts the replicas that have this connection's last
-- write, and every write before it).
-- ARGV: 1 now, 2 the claim's token, 3 one of its entries.  Returns 1 (live) or 0.
local now, token, entry = clock(ARGV[1]), ARGV[2], ARGV[3]
if redis.call('SISMEMBER', K.spill_live, token) == 0 then return 0 end
if redis.call('HGET', K.spill_claim, entry) ~= token then return 0 end
local deadline = redis.call('ZSCORE', K.spill, entry)
if not deadline or tonumber(deadline) <= now then return 0 end
redis.call('INCR', K.replicated)
return 1
