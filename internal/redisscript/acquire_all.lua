-- Set several keys at once, all or none (lockstore.MultiAcquirer,
-- core.Locker.AcquireAll; the multi-lock of Redisson's RedissonMultiLock,
-- in one atomic step instead of one lock after another): if every key is
-- free (or holds our token: a re-sent attempt), set each to the token for
-- the TTL, and with fencing draw each key's next fence (draw_at,
-- fence.lua); else change nothing.
-- KEYS: each lock key followed by its fence counter (2 keys a lock; on a
-- Cluster, all of one slot). ARGV[1]: the token; ARGV[2]: TTL in ms;
-- ARGV[3]: "1" to draw fences; ARGV[4]: the fence counters' grace in ms.
-- Returns {1, fence of the 1st key, fence of the 2nd, ...} (fences 0
-- without fencing) when the keys are ours, {0} when one of them is held.
local token, ttl = ARGV[1], ARGV[2]
local fenced, keep = ARGV[3] == "1", tonumber(ARGV[2]) + tonumber(ARGV[4])
local m = #KEYS / 2
local mine = {}
for i = 1, m do
  local v = redis.call("GET", KEYS[2 * i - 1])
  if v and v ~= token then
    return {0}
  end
  mine[i] = v == token
end
local r = {1}
for i = 1, m do
  local counter = KEYS[2 * i]
  redis.call("SET", KEYS[2 * i - 1], token, "PX", ttl)
  local fence = 0
  if fenced then
    local c = mine[i] and redis.call("GET", counter)
    if c then
      -- re-sent: the fence drawn then is the counter's
      redis.call("PEXPIRE", counter, keep)
      fence = tonumber(c)
    else
      fence = draw_at(counter, keep)
    end
  end
  r[i + 1] = fence
end
return r
