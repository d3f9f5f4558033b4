-- Set-if-absent for an exclusive waiter that shares must let in
-- (lockstore.Sharer.TryAcquireWaiting, share.lua): as acquire.lua, or
-- acquire_fenced.lua with fencing; when it fails because shares hold the
-- lock, it records the waiter (KEYS[5], its token) for its patience, so
-- that no new share is taken meanwhile (acquire_share.lua); when it
-- succeeds it clears the record. Writers do not starve: once the live
-- shares end, the name stays free for the waiter until it takes it or
-- its record expires.
-- KEYS: as share.lua. ARGV[1]: the token; ARGV[2]: TTL in ms; ARGV[3]:
-- patience in ms; ARGV[4]: "1" to draw a fence; ARGV[5]: the fence
-- counter's grace in ms.
-- Returns the fence (fencing) or 1 when the key is ours, 0 otherwise.
local token, ttl = ARGV[1], ARGV[2]
local fenced, keep = ARGV[4] == "1", tonumber(ARGV[2]) + tonumber(ARGV[5])
if redis.call("SET", KEYS[1], token, "NX", "PX", ttl) then
  redis.call("DEL", KEYS[5], KEYS[3], KEYS[4])
  if fenced then
    return draw(keep)
  end
  return 1
end
local v = redis.call("GET", KEYS[1])
if v == token then
  -- re-sent after a lost reply: ours already
  redis.call("PEXPIRE", KEYS[1], ttl)
  redis.call("DEL", KEYS[5])
  if not fenced then
    return 1
  end
  local fence = redis.call("GET", KEYS[2])
  if not fence then
    return draw(keep)
  end
  redis.call("PEXPIRE", KEYS[2], keep)
  return tonumber(fence)
end
if mode_of(v) then
  redis.call("SET", KEYS[5], token, "PX", ARGV[3])
end
return 0
