-- A host's place in ready (its next turn), with the keys of the script that uses it:
-- schedule (and write_ready) reads next and writes ready; defer writes ready.
-- schedule(host, now, now_text): hand host out at its next turn, no sooner than now,
-- unless it is handed out already (now_text: now as '%.17g' prints it, if the caller
-- has it).  A host with requests queued is handed out already: most are, and a ZRANK
-- finds it for less than the ZADD NX that would leave it so (and than a ZSCORE, whose
-- reply prints the score: thousands of instructions in '%.17g').
local function schedule(host, now, now_text)
  if redis.call('ZRANK', K.ready, host) then return end
  local nxt = tonumber(redis.call('HGET', K.next, host) or '0')
  if nxt > now or not now_text then now_text = string.format('%.17g', math.max(now, nxt)) end
  redis.call('ZADD', K.ready, 'NX', now_text, host)
end

-- schedule_later(host): schedule, written by write_ready(now, now_text) for all the
-- hosts of a call together: one HMGET of their turns and one ZADD NX, not a ZRANK a
-- host.  A script that uses it calls write_ready before it reads ready or returns.
local to_schedule, scheduling = {}, {}
local function schedule_later(host)
  if not scheduling[host] then
    scheduling[host] = true
    to_schedule[#to_schedule + 1] = host
  end
end
local function write_ready(now, now_text)
  for s = 1, #to_schedule, 500 do  -- (in parts: unpack takes at most ~8 000 values)
    local upto = math.min(s + 499, #to_schedule)
    local turns = redis.call('HMGET', K.next, unpack(to_schedule, s, upto))
    local args = {}
    for j = s, upto do
      local nxt = tonumber(turns[j - s + 1] or '0')
      args[#args + 1] = nxt > now and string.format('%.17g', nxt) or now_text
      args[#args + 1] = to_schedule[j]
    end
    redis.call('ZADD', K.ready, 'NX', unpack(args))
  end
  to_schedule, scheduling = {}, {}
end

-- defer(host, nxt): a host handed out before nxt is handed out at nxt instead.
local function defer(host, nxt)
  local score = redis.call('ZSCORE', K.ready, host)
  if score and tonumber(score) < nxt then
    redis.call('ZADD', K.ready, 'XX', string.format('%.17g', nxt), host)
  end
end
