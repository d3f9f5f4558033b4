-- Compare-and-extend that also draws a new fencing token, for a lock handed
-- over to the next holder (a local hand-over with WithFencing).
-- KEYS[1]: the lock key; KEYS[2]: the fence counter; ARGV[1]: the token;
-- ARGV[2]: the new TTL in ms; ARGV[3]: the counter's TTL in ms (the lock's
-- TTL and a grace of a few seconds).
-- Returns the new fencing token when the key was ours, 0 otherwise.
--
-- The fence is drawn as in acquire_fenced.lua: the larger of the counter + 1
-- and the server's clock in microseconds, written back to the counter.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  local t = redis.call("TIME")
  local now = t[1] .. string.format("%06d", tonumber(t[2]))
  local last = redis.call("GET", KEYS[2])
  if last and tonumber(last) >= tonumber(now) then
    local fence = redis.call("INCR", KEYS[2])
    redis.call("PEXPIRE", KEYS[2], ARGV[3])
    return fence
  end
  redis.call("SET", KEYS[2], now, "PX", ARGV[3])
  return tonumber(now)
end
return 0
