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
  return holding(token, fenced, grace)
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
renew(token, ttl, patience, fenced, now)
outlive(patience)
return {0, 0, 0}
