-- Compare-and-extend that also draws a new fencing token, for a lock handed
-- over to the next holder (Lease.Handoff with WithFencing).
-- KEYS[1]: the lock key; KEYS[2]: the fence counter; ARGV[1]: the token;
-- ARGV[2]: the new TTL in ms.
-- Returns the new fencing token when the key was ours, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return redis.call("INCR", KEYS[2])
end
return 0
