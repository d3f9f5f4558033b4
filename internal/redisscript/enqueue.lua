-- The fair queue's acquire and poll (WithFair, queue.lua), one atomic step:
-- take the lock when it is free and no live waiter is ahead of us; else
-- queue (at the tail on the first call, in our place on later ones) and
-- renew our entry for our patience. A free lock with a live waiter ahead of
-- us is granted to that waiter here, so that a lock freed by expiry does not
-- wait for its next waiter's poll.
-- KEYS: as queue.lua. ARGV[1]: our token; ARGV[2]: TTL in ms; ARGV[3]:
-- patience in ms; ARGV[4]: "1" to draw a fence; ARGV[5]: the name's channel;
-- ARGV[6]: the fence counter's grace in ms.
-- Returns {1, fence, ttl left in ms} when we hold the lock (taken now, or
-- granted by a release since our last call), {0, 0, 0} when we wait.
local token, ttl, patience = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local fenced, grace = ARGV[4] == "1", tonumber(ARGV[6])
local holder = redis.call("GET", KEYS[1])
if holder == token then
  -- granted to us by a release (whose message we may have missed), or a
  -- re-sent call that took it
  drop(token)
  tidy()
  local fence = 0
  if fenced then
    fence = tonumber(redis.call("GET", KEYS[2]) or "0")
    if fence == 0 then
      fence = draw(redis.call("PTTL", KEYS[1]) + grace)
    end
  end
  return {1, fence, redis.call("PTTL", KEYS[1])}
end
local now = now_ms()
if not holder then
  local first = head(now)
  if not first or first == token then
    redis.call("SET", KEYS[1], token, "PX", ttl)
    local fence = 0
    if fenced then
      fence = draw(ttl + grace)
    end
    drop(token)
    tidy()
    return {1, fence, ttl}
  end
  grant(now, ARGV[5], grace)
end
redis.call("HSET", KEYS[4], token, (now + patience) .. " " .. ttl .. " " .. (fenced and "1" or "0") .. " " .. patience)
-- Our place is our member of the queue, not our entry: a queue that lost us
-- while our entry stayed (the two keys expired a moment apart, an eviction)
-- takes us back at the tail, instead of never granting us.
if not redis.call("ZSCORE", KEYS[3], token) then
  local last = redis.call("ZRANGE", KEYS[3], -1, -1, "WITHSCORES")[2]
  redis.call("ZADD", KEYS[3], (tonumber(last) or 0) + 1, token)
end
-- The queue's keys outlive the last live entry, so that nobody's poll finds
-- them gone, and vanish by themselves when every waiter is gone: both at the
-- same instant (PEXPIRE would read the clock once per key, and the two could
-- expire a millisecond apart). The instant is read after PTTL, so that a
-- script that the server's scheduling slowed down never shortens them.
local keep = 2 * patience
if redis.call("PTTL", KEYS[3]) < keep then
  local at = now_ms() + keep
  redis.call("PEXPIREAT", KEYS[3], at)
  redis.call("PEXPIREAT", KEYS[4], at)
end
return {0, 0, 0}
