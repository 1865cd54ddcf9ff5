--! keys: ready leases delayed revisits spill refilling refill_wait queued reserved popped
--! uses: clock next_work tiers
-- When does a shard have work (next_work): its ready hosts, leases, delayed requests,
-- revisits, spill set, refill leases that may expire, and hosts waiting for a refill
-- when the budget has room for them; and how long work due has waited with no pop by
-- the shard's owner (since it came due, or since the owner's last pop if later; 0 when
-- nothing is due).
-- ARGV: 1 now, 2 budget.
local now = clock(ARGV[1])
local names = {K.ready, K.leases, K.delayed, K.revisits, K.spill, K.refilling}
if budget_room(tonumber(ARGV[2])) > 0 then names[#names + 1] = K.refill_wait end
local first = earliest(names)
if first == nil then return {'-1', '0'} end
local waited = 0
if first <= now then
  local popped = redis.call('GET', K.popped)
  waited = now - math.max(first, popped and tonumber(popped) or first)
end
return {seconds_until(now, first), string.format('%.17g', waited)}
