-- Take a share of the lock (lockstore.Sharer.TryAcquireShare, share.lua):
-- a shared hold (N = 0) or one of N permits, in the lowest free slot,
-- unless the lock is held exclusively, an exclusive waiter is recorded,
-- or (permits) N shares are live. A token that holds a share already (a
-- re-sent attempt) keeps its slot and fence, its TTL reset.
-- KEYS: as share.lua. ARGV[1]: the token; ARGV[2]: TTL in ms; ARGV[3]: N;
-- ARGV[4]: "1" to draw a fence; ARGV[5]: the fence counter's grace in ms.
-- Returns {1, slot, fence} when the token holds a share (fence 0 when not
-- asked for), {0, 0, 0} when it does not, {-1, M, 0} when live shares are
-- held with M permits, not N (0: shared holds): a mode mismatch.
local token, ttl, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local fenced, grace = ARGV[4] == "1", tonumber(ARGV[5])
local v = redis.call("GET", KEYS[1])
local held = mode_of(v)
if v and not held then
  return {0, 0, 0} -- held exclusively
end
local now = now_ms()
if not held then
  redis.call("DEL", KEYS[3], KEYS[4]) -- left over by an eviction, if anything
elseif prune(now) == 0 then
  held = nil
end
if held and held ~= n then
  return {-1, held, 0}
end
local slot, fence = share(token)
if slot then
  -- re-sent: the share is ours already
  redis.call("ZADD", KEYS[3], now + ttl, token)
  local last = settle(n)
  if not fenced then
    return {1, slot, 0}
  end
  if fence == 0 then
    fence = draw(last - now + grace)
    record(token, slot, fence)
  end
  return {1, slot, fence}
end
if redis.call("EXISTS", KEYS[5]) == 1 then
  return {0, 0, 0} -- an exclusive holder waits: no new share
end
slot = 0
if n > 0 then
  if held and redis.call("ZCARD", KEYS[3]) >= n then
    return {0, 0, 0}
  end
  local used = {}
  local all = redis.call("HVALS", KEYS[4])
  for i = 1, #all do
    local s = string.match(all[i], "^(%d+) ")
    if s then
      used[tonumber(s)] = true
    end
  end
  while used[slot] do
    slot = slot + 1
  end
end
redis.call("ZADD", KEYS[3], now + ttl, token)
record(token, slot, 0) -- before settle, which sets the hash's expiry
local last = settle(n)
fence = 0
if fenced then
  fence = draw(last - now + grace)
  record(token, slot, fence)
end
return {1, slot, fence}
