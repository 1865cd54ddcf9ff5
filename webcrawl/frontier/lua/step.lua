--! keys: ready next delay leases leased seen seq queued hq delayed lease_seq
--! keys: revisits revisit_requests cold cold_total spill spilling refill_wait refilling
--! keys: refill reserved moved host_pages over_budget spill_claim spill_live popped
--! uses: clock next_work tiers ready
-- One step on one shard: acknowledgements, leases handed back, new requests (the
-- dupefilter checked), revisits scheduled; and, in a call that pops, expired leases,
-- due delayed requests and due revisits into their host queues, then up to want_pop
-- requests popped from the hosts whose turn it is.  Every key, the per-host ones (hq,
-- moved) included, carries the shard's hash tag: one slot.
-- ARGV: 1 now, 2 default delay, 3 lease timeout, 4 want_pop (0: this call does not
-- pop), 5 requeue limit, 6 slack, 7 seen mode ('set' or 'bloom'), 8 hot_per_host,
-- 9 budget, 10 spill batch, 11 max refill grants, 12 max pages per host, 13 this
-- call's id prefix (the worker's random prefix and its step number), 14 '1' when the
-- caller owns the shard (or owns none: no ownership), else '0'; then the acks,
-- the nacks, the pushes and the revisits, each a count and its items (see the
-- numbered parts below).
-- Returns {added, requeued, revisited, next work ('' when it did not pop), refill
-- grants, spill entries claimed, over budget, then (member, lease id) per pop}.
local now = clock(ARGV[1])
local default_delay = tonumber(ARGV[2])
local lease_timeout = tonumber(ARGV[3])
local want_pop = tonumber(ARGV[4])
local requeue_limit = ARGV[5]  -- (text: LIMIT takes it as it comes)
local slack = tonumber(ARGV[6])
local bloom = ARGV[7] == 'bloom'
local hot_per_host = tonumber(ARGV[8])
local budget = tonumber(ARGV[9])
local spill_batch = tonumber(ARGV[10])
local max_grants = tonumber(ARGV[11])
local max_pages = tonumber(ARGV[12])
local id_prefix = ARGV[13]
local owner = ARGV[14] == '1'
-- Numbers go to Redis as text, printed once: redis.call prints a Lua number with '%.17g'
-- (glibc's exact decimal conversion, thousands of instructions), and Lua prints one it
-- joins to a string with '%.14g'; '%d' prints an integer for a fraction of that.
-- Constants are written as text.  (tools.bench redis_profile counts the difference.)
local now_s = string.format('%.17g', now)
-- (the lease deadline: in calls that pop or claim, printed when first wanted)
local lease_text = nil
local function lease_until()
  if lease_text == nil then lease_text = string.format('%.17g', now + lease_timeout) end
  return lease_text
end
local function int(n) return string.format('%d', n) end

-- Lease ids, spill claim tokens and refill lease tokens: the call's prefix, a number
-- from lease_seq (one per call that makes any: a call that redis-py sends again after
-- a lost reply must not make its first run's ids again, which its HSETs would
-- overwrite) and a count in the call.  The prefix keeps ids apart when a failover
-- loses increments: another worker, or this worker's next step, counts the same then.
local ids, id_base = 0, nil
local function new_id()
  if id_base == nil then id_base = id_prefix .. redis.call('INCR', K.lease_seq) .. '.' end
  ids = ids + 1
  return id_base .. ids
end

-- is a request new?  Its bits set in the Bloom filter: new if any was 0
local function bloom_add(fp)
  local new = false
  for offset in string.gmatch(fp, '%d+') do
    if redis.call('SETBIT', K.seen, tonumber(offset), 1) == 0 then new = true end
  end
  return new
end

-- The seen set's answers for this call's pushes (set mode): known[k] is 1 when the
-- seen set had the k-th push's fingerprint before the call; to_add, the new ones (added
-- together at the end of part 2: two commands a call, not one a link).  The caller sends
-- a fingerprint once a call (HostQueue._group keeps a step's first push of each): no
-- table of what the call added is kept, which costs Lua more than the SADDs it saves.
local known, to_add = {}, {}

-- has the dupefilter the k-th push's request? (looked up, not added)
local function is_known(fp, k)
  if fp == '' then return false end
  if not bloom then return known[k] == 1 end
  for offset in string.gmatch(fp, '%d+') do
    if redis.call('GETBIT', K.seen, tonumber(offset)) == 0 then return false end
  end
  return true
end

-- redis.call(command, key, values[from..to]) in calls of at most 1 000 values (unpack
-- takes at most ~8 000); pairs (score and member, field and value) from `from` stay whole
local function in_parts(command, key, values, from, to)
  for s = from, to, 1000 do
    redis.call(command, key, unpack(values, s, math.min(s + 999, to)))
  end
end

-- Requests into a host's queue: entries are score, member pairs.  A host holds at
-- most hot_per_host requests in its queue, and the shard at most budget; the rest
-- goes to the cold tier: into the spill set, from which a worker moves it to the
-- store.  Once a host has requests in the cold tier its new ones follow them there,
-- in order, and move up with the refills.  The queued count and the host's turn are
-- written later, for all the call's hosts at once (finish).
local function enqueue_all(host, entries, force)
  local n = #entries / 2
  local room = n
  if hot_per_host > 0 and not force then
    if num(redis.call('HGET', K.cold, host)) > 0 then
      room = 0
    else
      room = math.min(n, hot_per_host - redis.call('ZCARD', K.hq .. host), budget_room(budget))
      room = math.max(0, room)
    end
  end
  if room > 0 then
    in_parts('ZADD', K.hq .. host, entries, 1, 2 * room)
    add_count_later(K.queued, room)
    schedule_later(host)
  end
  if room < n then
    local spilled = {}
    for s = 2 * room + 1, #entries, 2 do
      spilled[#spilled + 1] = '0'
      spilled[#spilled + 1] = host .. '\n' .. entries[s] .. '\n' .. entries[s + 1]
    end
    in_parts('ZADD', K.spill, spilled, 1, #spilled)
    redis.call('HINCRBY', K.spilling, host, int(n - room))
    add_cold(host, n - room)
  end
  return n
end

local function enqueue(host, score, member, force)
  enqueue_all(host, {score, member}, force)
end

-- Up to spill_batch requests of the spill set, claimed for lease_timeout seconds (a
-- claim that is not completed expires, and the next worker stores them again)
local function claim_spills()
  -- {token, entries}: a claim's token names the rows its worker writes; a claim that
  -- expires and is taken again is dead, and the rows its worker may still write (a
  -- late store write) are left out of every refill (SPILLED and REFILL check it)
  local claimed = redis.call('ZRANGEBYSCORE', K.spill, '-inf', now_s, 'LIMIT', '0', ARGV[10])
  if #claimed == 0 then return {} end
  local token = new_id()
  for _, entry in ipairs(claimed) do
    local old = redis.call('HGET', K.spill_claim, entry)
    if old then redis.call('SREM', K.spill_live, old) end  -- dead: taken again
    redis.call('HSET', K.spill_claim, entry, token)
    redis.call('ZADD', K.spill, 'XX', lease_until(), entry)
  end
  redis.call('SADD', K.spill_live, token)
  return {token, claimed}
end

-- Refill leases for hosts waiting for one (at most max_grants): {host, token, room,
-- rows a dead worker's refill moved up but did not delete from the store}.  A host
-- is refilled by one worker at a time, within the shard's budget; requests of it on
-- their way to the store come up with a later refill (a host whose pages keep finding
-- new links always has some: waiting for none would starve it).
local function grant_refills()
  local grants = {}
  if hot_per_host <= 0 then return grants end
  for _, h in ipairs(redis.call('ZRANGEBYSCORE', K.refilling, '-inf', now_s, 'LIMIT', '0', '20')) do
    -- the worker of this refill died: the host waits again
    redis.call('ZREM', K.refilling, h)
    local lease = redis.call('HGET', K.refill, h)
    if lease then add_count(K.reserved, -tonumber(string.match(lease, '^[^|]*|(%d+)'))) end
    redis.call('HDEL', K.refill, h)
    redis.call('ZADD', K.refill_wait, 'NX', now_s, h)
  end
  local room_left, looked = budget_room(budget), 0
  while #grants < max_grants and room_left > 0 and looked < 4 * max_grants do
    looked = looked + 1
    local top = redis.call('ZPOPMIN', K.refill_wait)
    if #top == 0 then break end
    local h = top[1]
    -- a host whose refill lease is live is not granted another: that refill's end
    -- (REFILLED) or its lease's expiry (above) puts it back in the wait list
    local room = math.max(0, math.min(hot_per_host - redis.call('ZCARD', K.hq .. h), room_left))
    -- wanted: room and rows in the store (not only on their way there); or rows a dead
    -- worker's refill moved up are still in the store (deleted by this refill)
    local wanted = room > 0
      and num(redis.call('HGET', K.cold, h)) > num(redis.call('HGET', K.spilling, h))
    local leased = redis.call('HEXISTS', K.refill, h) == 1
    if not leased and (wanted or redis.call('EXISTS', K.moved .. h) == 1) then
      local token = new_id()
      -- the host's rows in the store now: its count, less what is on its way there
      local stored = num(redis.call('HGET', K.cold, h)) - num(redis.call('HGET', K.spilling, h))
      redis.call('HSET', K.refill, h, token .. '|' .. room .. '|' .. math.max(0, stored))
      redis.call('ZADD', K.refilling, lease_until(), h)
      add_count(K.reserved, room)
      room_left = room_left - room
      grants[#grants + 1] = {h, token, room, redis.call('SMEMBERS', K.moved .. h)}
    end
  end
  return grants
end

-- What enqueue_all left for later: the hosts' turns and the queued count.  Before the
-- call reads ready, and before it returns.
local function finish()
  write_ready(now, now_s)
  write_counts()
end

-- When the shard has work: its ready hosts, leases, delayed requests and revisits, its
-- spill set, refill leases that may expire, and hosts waiting for a refill when the
-- budget has room for them
local function shard_next_work()
  local names = {K.ready, K.leases, K.delayed, K.revisits, K.spill, K.refilling}
  if budget_room(budget) > 0 then names[#names + 1] = K.refill_wait end
  return next_work(now, names)
end

-- 1. acknowledgements, then leases handed back (their request could not be
-- completed: it goes back to its host queue when the lease expires, after a wait)
local i = 15
local n_acks = tonumber(ARGV[i]); i = i + 1
in_parts('ZREM', K.leases, ARGV, i, i + n_acks - 1)
in_parts('HDEL', K.leased, ARGV, i, i + n_acks - 1)
i = i + n_acks
local n_nacks = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_nacks do
  redis.call('ZADD', K.leases, 'XX', string.format('%.17g', now + tonumber(ARGV[i+1])), ARGV[i])
  i = i + 2
end

-- 2. new requests, by host: n requests, n call numbers they take (one a
-- PUSHES_PER_CALL of them), n hosts, the n requests' fingerprints (in the order of the
-- requests below), then per host: host, n groups, and per group (a run of the host's
-- pushes with one priority, wait and call number): score (-priority), seconds to wait,
-- count, which of the call's numbers (0, 1, ...; only when it takes more than one), and
-- count times the push's place among those of its number and its data:
-- '<5 digits>|<data>'; a host's new requests go into its queue together.  A member is
-- its number (15 digits, the shard's counter) joined to what was sent: its sequence
-- number, which orders a host's requests of one score (members.py); nothing is printed
-- a request.  A host takes at most max_pages new URLs in all
-- (FRONTIER_MAX_PAGES_PER_HOST, 0: no limit); beyond, new URLs are dropped and the host
-- joins the set of hosts over their budget.  A dropped URL stays out of the
-- dupefilter: a host's links beyond its budget would otherwise fill its shard's Bloom
-- filter without end, and other hosts' new URLs there would be taken for seen.
-- The seen set is asked for every fingerprint in one SMISMEMBER and given the new ones
-- in one SADD, at the end: a redis.call is most of a link's cost in Lua.
local added, over_budget = 0, 0
local n_push, n_numbers, n_hosts = tonumber(ARGV[i]), tonumber(ARGV[i+1]), tonumber(ARGV[i+2])
local fp_at = i + 3  -- ARGV[fp_at + k - 1]: the k-th push's fingerprint
i = fp_at + n_push
local first_number, single = 0, nil
if n_push > 0 then
  first_number = redis.call('INCRBY', K.seq, ARGV[fp_at - 2]) - n_numbers + 1
  if first_number + n_numbers > 1e15 then  -- (30 000 years at a thousand calls a second)
    return redis.error_reply('the shard has used every call number (members.py)')
  end
  if n_numbers == 1 then single = string.format('%015d', first_number) end
  if not bloom then
    local last = fp_at + n_push - 1
    for s = fp_at, last, 1000 do  -- (in parts: unpack takes at most ~8 000 values)
      local upto = math.min(s + 999, last)
      local reply = redis.pcall('SMISMEMBER', K.seen, unpack(ARGV, s, upto))
      -- a Redis before 6.2, or SMISMEMBER renamed away or denied: one at a time (Redis 7
      -- counts the error reply in errorstat_ERR, a step call; docs/operations.md)
      if reply.err then
        reply = {}
        for j = s, upto do reply[#reply + 1] = redis.call('SISMEMBER', K.seen, ARGV[j]) end
      end
      if s == fp_at then
        known = reply
      else
        for j = 1, #reply do known[s - fp_at + j] = reply[j] end
      end
    end
  end
end
local k = 0  -- the push read last
for _ = 1, n_hosts do
  local host, n_groups = ARGV[i], tonumber(ARGV[i+1]); i = i + 2
  local entries = {}
  local pages, counted, over_before = 0, 0, over_budget
  if max_pages > 0 then pages = num(redis.call('HGET', K.host_pages, host)) end
  for _ = 1, n_groups do
    local score, wait, count = ARGV[i], tonumber(ARGV[i+1]), tonumber(ARGV[i+2])
    local prefix = single
    if prefix then
      i = i + 3
    else
      prefix = string.format('%015d', first_number + tonumber(ARGV[i+3]))
      i = i + 4
    end
    local due = wait > 0 and string.format('%.17g', now + wait)
    for _ = 1, count do
      k = k + 1
      local fp = ARGV[fp_at + k - 1]
      local new
      if fp == '' then
        new = true
      elseif max_pages > 0 and pages + counted >= max_pages then
        new = false
        if not is_known(fp, k) then over_budget = over_budget + 1 end
      else
        if bloom then
          new = bloom_add(fp)
        else
          new = known[k] == 0
          if new then to_add[#to_add + 1] = fp end
        end
        if new and max_pages > 0 then counted = counted + 1 end
      end
      if new then
        local member = prefix .. ARGV[i]
        if due then
          redis.call('ZADD', K.delayed, due, host .. '\n' .. score .. '\n' .. member)
        else
          entries[#entries + 1] = score
          entries[#entries + 1] = member
        end
        added = added + 1
      end
      i = i + 1
    end
  end
  if #entries > 0 then enqueue_all(host, entries) end
  if counted > 0 then redis.call('HINCRBY', K.host_pages, host, int(counted)) end
  if over_budget > over_before then redis.call('SADD', K.over_budget, host) end
end
in_parts('SADD', K.seen, to_add, 1, #to_add)

-- 3. revisits scheduled (url key, host, priority, seconds until due, data): one
-- entry per URL
local n_rev = tonumber(ARGV[i]); i = i + 1
for _ = 1, n_rev do
  local key, host, prio, due, data = ARGV[i], ARGV[i+1], ARGV[i+2], ARGV[i+3], ARGV[i+4]
  i = i + 5
  redis.call('ZADD', K.revisits, string.format('%.17g', now + tonumber(due)), key)
  redis.call('HSET', K.revisit_requests, key, host .. '\n' .. prio .. '\n' .. data)
end

-- when the shard's owner last popped it (HostQueue._pop_order: other workers help a
-- shard whose due work its owner leaves unpopped; their own pops do not count, so a
-- dead owner's shard stays neglected until the registry gives it to another)
if want_pop > 0 and owner then redis.call('SET', K.popped, now_s) end

-- 4. expired leases, due delayed requests and due revisits go to their host queues;
-- only in a call that pops (a shard with such work is due in every worker's map, so
-- one pops there), the rest ends here: a call that only pushes says nothing of when
-- the shard has work (''), and takes spilled requests to store only when there are
-- a batch of them
local requeued, revisited = 0, 0
if want_pop == 0 then
  local spills = {}
  if hot_per_host > 0 and redis.call('ZCARD', K.spill) >= spill_batch then
    spills = claim_spills()
  end
  finish()
  return {added, requeued, revisited, '', {}, spills, over_budget}
end
local expired = redis.call('ZRANGEBYSCORE', K.leases, '-inf', now_s, 'LIMIT', '0', requeue_limit)
for _, id in ipairs(expired) do
  local entry = redis.call('HGET', K.leased, id)
  redis.call('ZREM', K.leases, id)
  redis.call('HDEL', K.leased, id)
  if entry then
    local host, score, member = string.match(entry, '^([^\n]*)\n([^\n]*)\n(.*)$')
    -- back to its host queue, whatever its limits: it was there, and comes first
    enqueue(host, score, member, true)
    requeued = requeued + 1
  end
end
local due = redis.call('ZRANGEBYSCORE', K.delayed, '-inf', now_s, 'LIMIT', '0', requeue_limit)
for _, entry in ipairs(due) do
  redis.call('ZREM', K.delayed, entry)
  local host, score, member = string.match(entry, '^([^\n]*)\n([^\n]*)\n(.*)$')
  enqueue(host, score, member)
end
local revisits = redis.call('ZRANGEBYSCORE', K.revisits, '-inf', now_s, 'LIMIT', '0', requeue_limit)
for _, key in ipairs(revisits) do
  local entry = redis.call('HGET', K.revisit_requests, key)
  -- (its own call number, place 00000 of it; taken before the revisit leaves the
  -- schedule: a shard out of numbers keeps it there)
  local number = entry and redis.call('INCR', K.seq)
  if number and number >= 1e15 then
    finish()
    return redis.error_reply('the shard has used every call number (members.py)')
  end
  redis.call('ZREM', K.revisits, key)
  redis.call('HDEL', K.revisit_requests, key)
  if entry then
    local host, prio, data = string.match(entry, '^([^\n]*)\n([^\n]*)\n(.*)$')
    local member = string.format('%015d00000|', number) .. data
    enqueue(host, int(-tonumber(prio)), member)
    revisited = revisited + 1
  end
end

-- 5. pop up to want_pop requests, each from the host whose turn it is (a
-- host handed out is not ready again before its delay, so with a delay one
-- call never hands out one host twice): the ready hosts in rounds, each round's
-- turns, delays, new turns and leases read and written together
finish()
local out = {added, requeued, revisited, false, false, false, over_budget}
local tries, taken = 0, 0
local leases, leased = {}, {}  -- (ZADD's and HSET's arguments)
while taken < want_pop and tries < 10 + 2 * want_pop do
  local limit = math.min(want_pop - taken, 10 + 2 * want_pop - tries, 500)
  local hosts = redis.call('ZRANGEBYSCORE', K.ready, '-inf', now_s, 'LIMIT', '0', int(limit))
  if #hosts == 0 then break end
  tries = tries + #hosts
  local sent = redis.call('HMGET', K.next, unpack(hosts))
  local delays = redis.call('HMGET', K.delay, unpack(hosts))
  local turns, done = {}, {}
  for j, host in ipairs(hosts) do
    local item = redis.call('ZPOPMIN', K.hq .. host)
    if #item == 0 then
      -- its requests left are in the cold tier: it is ready again when they move up
      done[#done + 1] = host
    else
      taken = taken + 1
      -- the host's turn is claimed until now + delay (or its next send, if later)
      local delay = tonumber(delays[j] or default_delay)
      if delay > 0 then delay = delay + slack else delay = 0 end
      local nxt = math.max(now + delay, tonumber(sent[j] or '0'))
      if redis.call('EXISTS', K.hq .. host) == 1 then
        turns[#turns + 1] = nxt == now and now_s or string.format('%.17g', nxt)
        turns[#turns + 1] = host
      else
        done[#done + 1] = host
      end
      local id = new_id()
      leases[#leases + 1] = lease_until()
      leases[#leases + 1] = id
      leased[#leased + 1] = id
      leased[#leased + 1] = host .. '\n' .. item[2] .. '\n' .. item[1]
      out[#out + 1] = item[1]
      out[#out + 1] = id
    end
    want_refill(host, hot_per_host, now)
  end
  in_parts('ZADD', K.ready, turns, 1, #turns)
  in_parts('ZREM', K.ready, done, 1, #done)
end
in_parts('ZADD', K.leases, leases, 1, #leases)
in_parts('HSET', K.leased, leased, 1, #leased)
if taken > 0 then add_count(K.queued, -taken) end  -- (before the budget is read)
out[5] = grant_refills()
out[6] = {}
if hot_per_host > 0 then out[6] = claim_spills() end
finish()  -- (nothing is left: for a later change's sake)
out[4] = shard_next_work()
return out
