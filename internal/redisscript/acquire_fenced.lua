-- Set-if-absent with a TTL and a fencing token (WithFencing): when the key is
-- ours, draw the name's next fence in the same atomic step.
-- KEYS[1]: the lock key; KEYS[2]: the fence counter (same hash tag, same slot);
-- ARGV[1]: the new lease's token; ARGV[2]: TTL in ms; ARGV[3]: the counter's
-- TTL in ms (the lock's TTL and a grace of a few seconds).
-- Returns the lease's fencing token (1 or more) when the key is ours, 0 when
-- another holder has it.
--
-- The fence is the larger of the counter + 1 and the server's clock in
-- microseconds (TIME), and is written back to the counter, which expires a
-- few seconds after the lock: fences stay strictly increasing while the
-- counter lives, and across its loss (FLUSHALL, a restart without
-- persistence, its expiry when the name is idle) as long as the server's
-- clock does not go back. Calling TIME before writing needs Redis 5.0 or
-- later (scripts replicated by their effects).
--
-- A retried attempt (the client re-sent it after losing the reply of one that
-- did set the key) finds its own token and returns the counter as it stands:
-- only holders draw fences, so its last draw was ours.
local function draw()
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

if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return draw()
end
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  local fence = redis.call("GET", KEYS[2])
  if not fence then
    return draw()
  end
  redis.call("PEXPIRE", KEYS[2], ARGV[3])
  return tonumber(fence)
end
return 0
