--! keys: busy start
-- The crawl-wide half of an idle check (keys of CrawlKeys): this worker is idle now; how
-- many other workers are busy and alive, and how many seeds wait?  The heartbeats
-- (ARGV[2] .. id) share the crawl-wide hash tag.
-- ARGV: 1 worker id, 2 heartbeat key prefix.  Returns {seeds waiting, busy workers}.
redis.call('HDEL', K.busy, ARGV[1])
local busy = 0
for _, wid in ipairs(redis.call('HKEYS', K.busy)) do
  if redis.call('EXISTS', ARGV[2] .. wid) == 1 then
    busy = busy + 1
  else
    redis.call('HDEL', K.busy, wid)
  end
end
return {redis.call('LLEN', K.start), busy}
