-- Library, put after fence.lua before the scripts of the fair queue
-- (WithFair): the waiters of a lock in arrival order, and the grant of a
-- free lock to the first live one.
--
-- KEYS[1]: the lock key; KEYS[2]: its fence counter; KEYS[3]: the queue, a
-- sorted set of waiters' tokens scored by arrival; KEYS[4]: the waiters'
-- entries, a hash from token to "deadline ttl fenced patience" (deadline: the
-- server's clock in ms past which the entry is dead; ttl and patience in
-- ms; fenced 1 or 0). All four share the lock's hash tag, hence its slot.
--
-- A waiter renews its entry each time it polls (enqueue.lua, or poll.lua for
-- all the waiters of a process at once): an entry whose
-- waiter stopped polling for its patience is dead, and is dropped when it
-- reaches the head. A lock granted to a waiter is set for the smaller of its
-- TTL and its patience, so that a lock granted to a waiter that died is
-- free again after its patience, not after its TTL; the new holder extends
-- it when it holds it longer. Times are the server's clock (TIME), never a
-- client's.

local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- entry returns the entry of token, or nil.
local function entry(token)
  local v = redis.call("HGET", KEYS[4], token)
  if not v then
    return nil
  end
  local deadline, ttl, fenced, patience = string.match(v, "^(%d+) (%d+) (%d) (%d+)$")
  if not deadline then
    return nil
  end
  return {deadline = tonumber(deadline), ttl = tonumber(ttl), fenced = fenced == "1", patience = tonumber(patience)}
end

local function drop(token)
  redis.call("ZREM", KEYS[3], token)
  redis.call("HDEL", KEYS[4], token)
end

-- tidy deletes the queue's keys once nobody waits.
local function tidy()
  if redis.call("ZCARD", KEYS[3]) == 0 then
    redis.call("DEL", KEYS[3], KEYS[4])
  end
end

-- head returns the first live waiter and its entry, dropping the dead ones
-- before it; nil when nobody lives in the queue.
local function head(now)
  while true do
    local first = redis.call("ZRANGE", KEYS[3], 0, 0)[1]
    if not first then
      return nil
    end
    local e = entry(first)
    if e and e.deadline > now then
      return first, e
    end
    drop(first)
  end
end

-- grant gives the free lock to the first live waiter, tells it on channel
-- ("token fence ttl") and returns its token; nil when nobody lives in the
-- queue. grace: how long the fence counter outlives the lock, in ms.
local function grant(now, channel, grace)
  local token, e = head(now)
  if not token then
    tidy()
    return nil
  end
  local ttl = math.min(e.ttl, e.patience)
  redis.call("SET", KEYS[1], token, "PX", ttl)
  local fence = 0
  if e.fenced then
    fence = draw(ttl + grace)
  end
  drop(token)
  tidy()
  redis.call("PUBLISH", channel, string.format("%s %d %d", token, fence, ttl))
  return token
end


-- holding answers a waiter that holds the lock (taken, or granted by a
-- release): its entry goes, and it gets {1, fence, ttl left in ms}; its
-- fence is the counter's, drawn now if the counter was lost.
local function holding(token, fenced, grace)
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

-- renew keeps token's place for patience ms past now. Our place is our
-- member of the queue, not our entry: a queue that lost us while our entry
-- stayed (the two keys expired a moment apart, an eviction) takes us back
-- at the tail, instead of never granting us; so does one that dropped us as
-- dead (we stalled past our patience).
local function renew(token, ttl, patience, fenced, now)
  redis.call("HSET", KEYS[4], token, (now + patience) .. " " .. ttl .. " " .. (fenced and "1" or "0") .. " " .. patience)
  if not redis.call("ZSCORE", KEYS[3], token) then
    local last = redis.call("ZRANGE", KEYS[3], -1, -1, "WITHSCORES")[2]
    redis.call("ZADD", KEYS[3], (tonumber(last) or 0) + 1, token)
  end
end

-- outlive makes the queue's keys outlive the last live entry, so that
-- nobody's poll finds them gone, and vanish by themselves when every waiter
-- is gone: both at the same instant (PEXPIRE would read the clock once per
-- key, and the two could expire a millisecond apart). The instant is read
-- after PTTL, so that a script that the server's scheduling slowed down
-- never shortens them.
local function outlive(patience)
  local keep = 2 * patience
  if redis.call("PTTL", KEYS[3]) < keep then
    local at = now_ms() + keep
    redis.call("PEXPIREAT", KEYS[3], at)
    redis.call("PEXPIREAT", KEYS[4], at)
  end
end
