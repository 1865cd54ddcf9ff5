--! keys: ready next queued reserved cold cold_total spilling refill_wait hq refill moved
--! keys: spill_live spill_done
--! uses: clock tiers ready
-- A refill: rows of a host's cold tier read from the store move into its queue, if the
-- caller's lease (its token) is still the host's.  Only rows of completed spill claims
-- (spill_done, which counts each claim's rows not moved yet) move, and each once: its
-- key joins the host's moved set in the same step, and a row already there (put there
-- by a refill whose worker died before deleting it from the store) is skipped.  A row
-- of any other claim is garbage: dead (it expired and was taken again: its worker's
-- store write may land at any time, after the live claim's rows were refilled too) or
-- lost; neither counted nor moved.  The caller deletes those from the store.  A row of
-- a claim still in progress (its SPILLED has not run: if the claim expires, its entries
-- are stored again under another) stays in the store for a later refill: the caller
-- keeps it.
-- ARGV: 1 now, 2 host, 3 token, 4 hot_per_host, 5 '1' if the store had no more rows of
-- the host, then (row key, score, member) per row.
-- Returns {how many moved up (-1: the lease is another's, nothing done), then the keys
-- of the rows of claims in progress}.
local now, host, token = clock(ARGV[1]), ARGV[2], ARGV[3]
local lease = redis.call('HGET', K.refill, host)
if not lease or string.match(lease, '^([^|]*)|') ~= token then return {-1} end
local room, cold = string.match(lease, '^[^|]*|(%d+)|(%d+)$')
local entries, live, keep = {}, 0, {}
-- per claim (a claim's rows are many, in a row): 'live' (in progress), or its rows
-- left to move (0: none, or a dead or lost claim), and how many this refill moved
local state, taken = {}, {}
for k = 6, #ARGV, 3 do
  local claim = string.match(ARGV[k], '/([^/]*)$')
  if state[claim] == nil then
    if redis.call('SISMEMBER', K.spill_live, claim) == 1 then
      state[claim] = 'live'
    else
      state[claim] = num(redis.call('HGET', K.spill_done, claim))
      taken[claim] = 0
    end
  end
  if state[claim] == 'live' then
    keep[#keep + 1] = ARGV[k]  -- counted with the spill set's entries until complete
  elseif redis.call('SADD', K.moved .. host, ARGV[k]) == 0 then
    live = live + 1  -- moved up by a refill whose worker died
  elseif taken[claim] < state[claim] then
    taken[claim] = taken[claim] + 1
    live = live + 1
    entries[#entries + 1] = ARGV[k + 1]
    entries[#entries + 1] = ARGV[k + 2]
  else  -- a row of a dead or lost claim: garbage, neither counted nor moved
    redis.call('SREM', K.moved .. host, ARGV[k])
  end
end
for claim, n in pairs(taken) do
  if n > 0 then
    if n >= state[claim] then
      redis.call('HDEL', K.spill_done, claim)
    else
      redis.call('HINCRBY', K.spill_done, claim, -n)
    end
  end
end
local n = #entries / 2
for s = 1, #entries, 1000 do
  redis.call('ZADD', K.hq .. host, unpack(entries, s, math.min(s + 999, #entries)))
end
if n > 0 then
  add_count(K.queued, n)
  add_cold(host, -n)
end
add_count(K.reserved, -tonumber(room))
redis.call('HSET', K.refill, host, token .. '|0|0')
if ARGV[5] == '1' then
  -- the store had fewer rows than asked for: the rows it should have held at the grant
  -- (those of completed claims) beyond those read are not there (rows stored since can
  -- only make this smaller)
  local extra = math.min(tonumber(cold) - live,
    num(redis.call('HGET', K.cold, host)) - num(redis.call('HGET', K.spilling, host)))
  if extra > 0 then add_cold(host, -extra) end
end
if redis.call('EXISTS', K.hq .. host) == 1 then schedule(host, now) end
-- (not {n, unpack(keep)}: unpack fails past ~8 000 values)
table.insert(keep, 1, n)
return keep
