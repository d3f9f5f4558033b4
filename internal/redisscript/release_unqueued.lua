-- The common release, put before the libraries of release.lua: a name
-- without a fair queue (no WithFair waiter) is a compare-and-delete, and
-- the release notice of WithNotify. It returns before fence.lua and
-- queue.lua, whose local functions Lua would otherwise make anew (as
-- closures) on every call: about a quarter of the script's time on Redis
-- 7.0 for a release that needs none of them. A name with a queue goes on
-- to release.lua, which does the same and grants the name to its first
-- live waiter. KEYS and ARGV: release.lua's.
if redis.call("EXISTS", KEYS[3]) == 0 then
  if redis.call("GET", KEYS[1]) ~= ARGV[1] then
    return 0
  end
  redis.call("DEL", KEYS[1])
  if ARGV[3] == "1" then
    redis.call("PUBLISH", ARGV[2], "")
  end
  return 1
end
