-- A host's place in ready (its next turn), with the keys of the script that uses it:
-- schedule reads next and writes ready; defer writes ready.
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

-- defer(host, nxt): a host handed out before nxt is handed out at nxt instead.
local function defer(host, nxt)
  local score = redis.call('ZSCORE', K.ready, host)
  if score and tonumber(score) < nxt then
    redis.call('ZADD', K.ready, 'XX', string.format('%.17g', nxt), host)
  end
end
