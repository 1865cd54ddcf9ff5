--! keys: ready leases delayed revisits spill refilling refill_wait queued reserved popped
--! uses: clock next_work tiers
-- When does a shard have work (next_work): its ready hosts, leases, delayed requests,
-- revisits, spill set, refill leases that may expire, and hosts waiting for a refill
-- when the budget has room for them; and seconds since a worker last popped it (or,
-- never popped, since it first took work; -1: neither).
-- ARGV: 1 now, 2 budget.
local now = clock(ARGV[1])
local names = {K.ready, K.leases, K.delayed, K.revisits, K.spill, K.refilling}
if budget_room(tonumber(ARGV[2])) > 0 then names[#names + 1] = K.refill_wait end
local popped = redis.call('GET', K.popped)
local since = '-1'
if popped then since = string.format('%.17g', math.max(0, now - tonumber(popped))) end
return {next_work(now, names), since}
