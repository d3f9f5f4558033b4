-- Set-if-absent with a TTL (the Redis documentation's single-instance lock),
-- as one atomic step, for
-- servers before Redis 7.0, which reject SET ... NX GET (see redis.go).
-- KEYS[1]: the lock key; ARGV[1]: the new lease's token; ARGV[2]: TTL in ms.
-- Returns 1 when the key is ours, 0 when another holder has it.
--
-- The second branch makes a retried attempt safe: if the client re-sends the
-- command after losing the reply of one that did set the key, the retry finds
-- its own token and succeeds instead of waiting for itself until the TTL ends.
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return 1
end
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1
end
return 0
