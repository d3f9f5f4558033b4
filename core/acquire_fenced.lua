-- Set-if-absent with a TTL and a fencing token (WithFencing): when the key is
-- ours, increment the name's fence counter in the same atomic step.
-- KEYS[1]: the lock key; KEYS[2]: the fence counter (same hash tag, same slot);
-- ARGV[1]: the new lease's token; ARGV[2]: TTL in ms.
-- Returns the lease's fencing token (1 or more) when the key is ours, 0 when
-- another holder has it.
--
-- A retried attempt (the client re-sent it after losing the reply of one that
-- did set the key) finds its own token and returns the counter as it stands:
-- only holders increment it, so its last increment was ours.
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return redis.call("INCR", KEYS[2])
end
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  local fence = redis.call("GET", KEYS[2])
  if not fence then
    return redis.call("INCR", KEYS[2])
  end
  return tonumber(fence)
end
return 0
