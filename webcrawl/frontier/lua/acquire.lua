--! keys: next delay ready
--! uses: clock
-- Take a host's turn ('take': only if it is due) or record a send ('mark'): its next
-- turn is no sooner than now + its delay (+ slack).
-- ARGV: 1 host, 2 now, 3 default delay, 4 slack, 5 'take' or 'mark'.
-- Returns the seconds to wait before the turn is the caller's ('0': it is), a string.
local host, now, default_delay, slack = ARGV[1], clock(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local nxt = tonumber(redis.call('HGET', K.next, host) or '0')
if ARGV[5] == 'take' and now < nxt then return tostring(nxt - now) end
local delay = tonumber(redis.call('HGET', K.delay, host) or default_delay)
if delay > 0 then delay = delay + slack end
if now + delay <= nxt then return '0' end
nxt = now + delay
redis.call('HSET', K.next, host, string.format('%.17g', nxt))
local score = redis.call('ZSCORE', K.ready, host)
if score and tonumber(score) < nxt then
  redis.call('ZADD', K.ready, 'XX', string.format('%.17g', nxt), host)
end
return '0'
