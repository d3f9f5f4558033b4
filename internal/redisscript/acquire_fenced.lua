-- Set-if-absent with a TTL and a fencing token (WithFencing): when the key is
-- ours, draw the name's next fence (draw, fence.lua) in the same atomic step.
-- KEYS[1]: the lock key; KEYS[2]: the fence counter (same hash tag, same slot);
-- ARGV[1]: the new lease's token; ARGV[2]: TTL in ms; ARGV[3]: the counter's
-- TTL in ms (the lock's TTL and a grace of a few seconds).
-- Returns the lease's fencing token (1 or more) when the key is ours, 0 when
-- another holder has it.
--
-- A retried attempt (the client re-sent it after losing the reply of one that
-- did set the key) finds its own token and returns the counter as it stands:
-- only holders draw fences, so its last draw was ours.
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return draw(ARGV[3])
end
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  local fence = redis.call("GET", KEYS[2])
  if not fence then
    return draw(ARGV[3])
  end
  redis.call("PEXPIRE", KEYS[2], ARGV[3])
  return tonumber(fence)
end
return 0
