-- turn_at(host): when a request to host may leave next: its next turn, or later while
-- a request to it is in flight (a turn hold, '<deadline> <holder>': see acquire.lua).
-- hold_of(host): that hold's deadline (0: none) and holder.
local function hold_of(host)
  local value = redis.call('HGET', K.turn_holds, host)
  if not value then return 0, nil end
  local deadline, holder = string.match(value, '^(%S+) (.*)$')
  return tonumber(deadline), holder
end

local function turn_at(host)
  local nxt = tonumber(redis.call('HGET', K.next, host) or '0')
  return math.max(nxt, (hold_of(host)))
end
