-- Compare-and-extend that also draws a new fencing token (draw, fence.lua),
-- for a lock handed over to the next holder (a local hand-over with
-- WithFencing).
-- KEYS[1]: the lock key; KEYS[2]: the fence counter; ARGV[1]: the token;
-- ARGV[2]: the new TTL in ms; ARGV[3]: the counter's TTL in ms (the lock's
-- TTL and a grace of a few seconds).
-- Returns the new fencing token when the key was ours, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return draw(ARGV[3])
end
return 0
