-- Library, put after fence.lua before the scripts of shares (shared holds
-- and permits, lockstore.Sharer) and of the exclusive waiter that shares
-- must let in (acquire_waiting.lua).
--
-- KEYS[1]: the lock key; KEYS[2]: its fence counter; KEYS[3]: the shares,
-- a sorted set of their tokens scored by their expiry (the server's clock
-- in ms); KEYS[4]: the shares' slots and fences, a hash from token to
-- "slot fence" (both integers; slot 0 and fence 0 where unused); KEYS[5]:
-- the exclusive waiter's record, its token, expiring with its patience.
-- All five share the lock's hash tag, hence its slot.
--
-- While shares are live, the lock key holds the marker "reqlock:shares:N"
-- (N: the permits, 0 for shared holds), which is never a token (tokens are
-- base32 text, upper case), so that the exclusive scripts (SET NX, the
-- compare-and-delete and compare-and-extend, the fair queue) see a held
-- name and leave it alone. The marker, the shares and their hash expire at
-- one instant, the latest share's expiry (settle); each share expires on
-- its own, at its score, and is pruned by the next call that reads the
-- shares. A share is live while its expiry is past the clock, as the lock
-- key is while its PEXPIRETIME is. Times are the server's clock (TIME).

local marker = "reqlock:shares:"

local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- mode_of returns N of a marker v; nil for a token or no value.
local function mode_of(v)
  if not v then
    return nil
  end
  local n = string.match(v, "^reqlock:shares:(%d+)$")
  return n and tonumber(n)
end

-- forget removes tokens from the shares' hash, a few at a time (unpack
-- is bounded by Lua's stack).
local function forget(tokens)
  for i = 1, #tokens, 500 do
    redis.call("HDEL", KEYS[4], unpack(tokens, i, math.min(i + 499, #tokens)))
  end
end

-- prune drops the shares expired at now, and returns how many are live;
-- once none is, it deletes the marker and the shares' keys. Call it only
-- while the lock key holds the marker.
local function prune(now)
  local gone = redis.call("ZRANGEBYSCORE", KEYS[3], "-inf", now)
  if #gone > 0 then
    redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", now)
    forget(gone)
  end
  local live = redis.call("ZCARD", KEYS[3])
  if live == 0 then
    redis.call("DEL", KEYS[1], KEYS[3], KEYS[4])
  end
  return live
end

-- settle makes the marker (of n permits) and the shares' keys expire with
-- the latest share, and returns its expiry; with no share left it deletes
-- them and returns nil. Call it only while the lock key is free or holds
-- the marker.
local function settle(n)
  local last = redis.call("ZRANGE", KEYS[3], -1, -1, "WITHSCORES")[2]
  if not last then
    redis.call("DEL", KEYS[1], KEYS[3], KEYS[4])
    return nil
  end
  last = tonumber(last)
  redis.call("SET", KEYS[1], marker .. n)
  redis.call("PEXPIREAT", KEYS[1], last)
  redis.call("PEXPIREAT", KEYS[3], last)
  redis.call("PEXPIREAT", KEYS[4], last)
  return last
end

-- share returns the slot and fence of token's share, or nil.
local function share(token)
  local v = redis.call("HGET", KEYS[4], token)
  if not v then
    return nil
  end
  local slot, fence = string.match(v, "^(%d+) (%d+)$")
  return tonumber(slot), tonumber(fence)
end

local function record(token, slot, fence)
  redis.call("HSET", KEYS[4], token, string.format("%d %d", slot, fence))
end

