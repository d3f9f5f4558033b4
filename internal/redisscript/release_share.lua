-- Release a share of the lock (lockstore.Sharer.ReleaseShare, share.lua):
-- remove the token's share, if it is live, and make the marker expire with
-- the latest share left, or free the lock when none is left (then, with
-- WithNotify, tell the waiters on the name's channel). Never touches
-- another token's share, nor a lock held exclusively.
-- KEYS: as share.lua. ARGV[1]: the token; ARGV[2]: the name's channel;
-- ARGV[3]: "1" to publish a release notice when the lock is freed.
-- Returns 1 when the token held a live share (removed now), 0 otherwise.
local n = mode_of(redis.call("GET", KEYS[1]))
if not n then
  return 0
end
if prune(now_ms()) == 0 then
  return 0
end
local had = redis.call("ZREM", KEYS[3], ARGV[1])
if had == 0 then
  return 0
end
redis.call("HDEL", KEYS[4], ARGV[1])
if not settle(n) and ARGV[3] == "1" then
  redis.call("PUBLISH", ARGV[2], "")
end
return 1
