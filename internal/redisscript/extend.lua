-- Compare-and-extend: reset the lock key's TTL only if it still holds our token.
-- KEYS[1]: the lock key; ARGV[1]: the lease's token; ARGV[2]: the new TTL in ms.
-- Returns 1 when the key was ours and now lives ARGV[2] ms, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
