-- hold_of(host): the deadline (0: none) and holder of host's turn hold, '<deadline>
-- <holder>': a request to it is in flight (see acquire.lua).
local function hold_of(host)
  local value = redis.call('HGET', K.turn_holds, host)
  if not value then return 0, nil end
  local deadline, holder = string.match(value, '^(%S+) (.*)$')
  return tonumber(deadline), holder
end
