-- Redlock with fencing, second phase: raise a node's fence counter to the
-- token the lease drew (the highest of its quorum), if the node still holds
-- the lock for the lease. Any later holder's quorum shares a node with this
-- one's, whose counter is then above this token before that holder
-- increments it: tokens stay strictly increasing across holders.
-- KEYS[1]: the lock key; KEYS[2]: the fence counter; ARGV[1]: the token;
-- ARGV[2]: the fencing token.
-- Returns 1 when the node holds the lock for the token, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  local fence = tonumber(redis.call("GET", KEYS[2]) or "0")
  if fence < tonumber(ARGV[2]) then
    redis.call("SET", KEYS[2], ARGV[2])
  end
  return 1
end
return 0
