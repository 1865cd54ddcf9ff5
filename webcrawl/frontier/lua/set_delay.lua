--! keys: delay next ready delay_hold
--! uses: clock ready
-- A host's delay, written by any worker.  A back-off (hold > 0 seconds) holds: until it
-- expires, no worker's write lowers the delay below it (each worker adapts from what it
-- alone saw; the last writer must not undo another's 503).  not_before > 0: the host's
-- next turn is no sooner than now + not_before (a Retry-After window), whoever pops next.
-- ARGV: 1 host, 2 delay, 3 hold, 4 not_before, 5 now.  Returns the delay now in force.
local host, delay, hold, not_before = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local now = clock(ARGV[5])
local held_until = tonumber(redis.call('HGET', K.delay_hold, host) or '0')
local stored = tonumber(redis.call('HGET', K.delay, host) or '-1')
if held_until > now and stored > delay then delay = stored end
redis.call('HSET', K.delay, host, string.format('%.17g', delay))
if hold > 0 and now + hold > held_until then
  redis.call('HSET', K.delay_hold, host, string.format('%.17g', now + hold))
elseif held_until > 0 and held_until <= now then
  redis.call('HDEL', K.delay_hold, host)
end
if not_before > 0 then
  local nxt = now + not_before
  if nxt > tonumber(redis.call('HGET', K.next, host) or '0') then
    redis.call('HSET', K.next, host, string.format('%.17g', nxt))
    defer(host, nxt)
  end
end
return string.format('%.17g', delay)
