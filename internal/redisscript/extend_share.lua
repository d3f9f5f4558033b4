-- Extend a share of the lock (lockstore.Sharer.ExtendShare, share.lua):
-- reset the token's share to expire TTL from now if it is live, make the
-- marker expire with the latest share, and with fencing draw a new fence
-- for it (draw, fence.lua).
-- KEYS: as share.lua. ARGV[1]: the token; ARGV[2]: the new TTL in ms;
-- ARGV[3]: "1" to draw a fence; ARGV[4]: the fence counter's grace in ms.
-- Returns the new fence (fencing) or 1 when the token held a live share,
-- 0 otherwise.
local token, ttl = ARGV[1], tonumber(ARGV[2])
local n = mode_of(redis.call("GET", KEYS[1]))
if not n then
  return 0
end
local now = now_ms()
if prune(now) == 0 then
  return 0
end
local slot = share(token)
if not slot then
  return 0
end
redis.call("ZADD", KEYS[3], now + ttl, token)
local last = settle(n)
if ARGV[3] ~= "1" then
  return 1
end
local fence = draw(last - now + tonumber(ARGV[4]))
record(token, slot, fence)
return fence
