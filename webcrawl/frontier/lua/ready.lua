-- A host's place in ready (its next turn), with the keys of the script that uses it:
-- schedule reads next and writes ready; defer writes ready.
-- schedule(host, now): hand host out at its next turn, no sooner than now, unless it is
-- handed out already.
local function schedule(host, now)
  local nxt = tonumber(redis.call('HGET', K.next, host) or '0')
  redis.call('ZADD', K.ready, 'NX', string.format('%.17g', math.max(now, nxt)), host)
end

-- defer(host, nxt): a host handed out before nxt is handed out at nxt instead.
local function defer(host, nxt)
  local score = redis.call('ZSCORE', K.ready, host)
  if score and tonumber(score) < nxt then
    redis.call('ZADD', K.ready, 'XX', string.format('%.17g', nxt), host)
  end
end
