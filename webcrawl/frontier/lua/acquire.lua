--! keys: next delay ready turn_holds
--! uses: clock turn ready
-- Take a host's turn ('take': only if it is due) or give it back ('release': the
-- answer came in, or the request failed).
-- take, with hold > 0: the turn is the holder's until it releases it, or for hold
-- seconds (renew.lua pushes that back while the request is in flight): no other request
-- to the host leaves meanwhile, whichever worker's.  Its next turn is then no sooner
-- than now + its delay (+ slack), counted again from the release: between two requests
-- a host sees at least its delay, however slow the answer or late the send.
-- ARGV: 1 host, 2 now, 3 default delay, 4 slack, 5 'take' or 'release', 6 holder,
-- 7 hold (seconds; 0: none).
-- Returns the seconds to wait before asking again ('0': the turn is the caller's), a
-- string.
local host, now, default_delay, slack = ARGV[1], clock(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local holder, hold = ARGV[6], tonumber(ARGV[7])
local nxt = tonumber(redis.call('HGET', K.next, host) or '0')
local held, by = hold_of(host)
local delay = tonumber(redis.call('HGET', K.delay, host) or default_delay)
if delay > 0 then delay = delay + slack end
if ARGV[5] == 'take' then
  -- in flight: ask again after about a delay (the release counts the delay from then)
  if held > now then return tostring(math.min(held - now, math.max(nxt - now, delay, 0.05))) end
  if now < nxt then return tostring(nxt - now) end
  if hold > 0 then
    redis.call('HSET', K.turn_holds, host, string.format('%.17g', now + hold) .. ' ' .. holder)
  elseif by then
    redis.call('HDEL', K.turn_holds, host)  -- expired
  end
elseif by == holder then
  redis.call('HDEL', K.turn_holds, host)
end
if now + delay > nxt then
  nxt = now + delay
  redis.call('HSET', K.next, host, string.format('%.17g', nxt))
end
-- the frontier hands the host out again at its next turn (not at the hold's deadline:
-- every worker then wakes for it, and a request popped while the host is held waits for
-- its turn here)
defer(host, nxt)
return '0'
