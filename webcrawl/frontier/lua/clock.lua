-- clock(given): Redis's clock, or the caller's "now" in tests that simulate time.
-- Every time shared between workers (lease deadlines, host turns, back-offs, due
-- revisits) is Redis's own: a worker whose clock is a minute ahead must not requeue
-- every live lease nor hand a host out early.  Callers pass durations; ARGV "now" is ''
-- except in tests.
local function clock(given)
  if given ~= nil and given ~= '' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
