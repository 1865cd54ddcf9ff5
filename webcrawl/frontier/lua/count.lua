--! keys: queued delayed revisits leases cold_total
--! uses: clock
-- A shard's counts, the one definition of "queued" (webcrawl/frontier/inspection.py):
-- {queued in Redis (host queues and delayed), queued in the store (the cold tier),
-- revisits due now, leases}.
-- ARGV: 1 now.
local now = clock(ARGV[1])
return {tonumber(redis.call('GET', K.queued) or '0') + redis.call('ZCARD', K.delayed),
        tonumber(redis.call('GET', K.cold_total) or '0'),
        redis.call('ZCOUNT', K.revisits, '-inf', now), redis.call('ZCARD', K.leases)}
