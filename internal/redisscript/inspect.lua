-- Read the state of one lock, changing nothing (lockstore.Inspector.Inspect;
-- run by EVAL_RO where the server has it, Redis 7.0 and later): its
-- value and TTL, the live shares with their expiries, slots and fences
-- (share.lua), the exclusive waiter's record, the live entries of its fair
-- queue in order (queue.lua) and its fence counter (fence.lua), all at one
-- instant of the server's clock (TIME).
-- KEYS[1]: the lock key; KEYS[2]: its fence counter; KEYS[3]: its queue;
-- KEYS[4]: the queue's entries; KEYS[5]: its shares; KEYS[6]: their slots
-- and fences; KEYS[7]: the exclusive waiter's record. All share the lock's
-- hash tag, hence its slot. No ARGV.
-- Returns an array of strings: the server's clock in ms; the lock key's
-- value ("" when free); its PTTL in ms; the fence counter ("" when none);
-- the waiting writer's token ("" when none); the number S of live shares
-- (0 unless the value is a marker), then S times the token, its expiry in
-- ms and its "slot fence"; the number W of live waiters, then W times the
-- token and its entry ("deadline ttl fenced patience"), head first.
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowtext = t[1] .. string.format("%03d", math.floor(tonumber(t[2]) / 1000))

-- text returns the value of a string key, "" when it is none.
local function text(key)
  if redis.call("TYPE", key).ok ~= "string" then
    return ""
  end
  return redis.call("GET", key)
end

local value = text(KEYS[1])
local r = {nowtext, value,
  tostring(redis.call("PTTL", KEYS[1])), text(KEYS[2]), text(KEYS[7])}

local shares = {}
if string.match(value, "^reqlock:shares:%d+$") and redis.call("TYPE", KEYS[5]).ok == "zset" then
  local live = redis.call("ZRANGEBYSCORE", KEYS[5], "(" .. nowtext, "+inf", "WITHSCORES")
  local hash = redis.call("TYPE", KEYS[6]).ok == "hash"
  for i = 1, #live, 2 do
    local rec = hash and redis.call("HGET", KEYS[6], live[i]) or false
    shares[#shares + 1] = live[i]
    shares[#shares + 1] = live[i + 1]
    shares[#shares + 1] = rec or "0 0"
  end
end
r[#r + 1] = tostring(#shares / 3)
for i = 1, #shares do
  r[#r + 1] = shares[i]
end

local waiters = {}
if redis.call("TYPE", KEYS[3]).ok == "zset" and redis.call("TYPE", KEYS[4]).ok == "hash" then
  local queue = redis.call("ZRANGE", KEYS[3], 0, -1)
  for i = 1, #queue do
    local e = redis.call("HGET", KEYS[4], queue[i])
    local deadline = e and string.match(e, "^(%d+) %d+ %d %d+$")
    if deadline and tonumber(deadline) > now then
      waiters[#waiters + 1] = queue[i]
      waiters[#waiters + 1] = e
    end
  end
end
r[#r + 1] = tostring(#waiters / 2)
for i = 1, #waiters do
  r[#r + 1] = waiters[i]
end
return r
