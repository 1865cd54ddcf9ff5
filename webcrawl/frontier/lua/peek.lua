--! keys: ready leases delayed revisits spill refilling refill_wait queued reserved
--! uses: clock next_work tiers
-- When does a shard have work (next_work): its ready hosts, leases, delayed requests,
-- revisits, spill set, refill leases that may expire, and hosts waiting for a refill
-- when the budget has room for them.
-- ARGV: 1 now, 2 budget.
local names = {K.ready, K.leases, K.delayed, K.revisits, K.spill, K.refilling}
if budget_room(tonumber(ARGV[2])) > 0 then names[#names + 1] = K.refill_wait end
return next_work(clock(ARGV[1]), names)
