-- Redlock with fencing, second phase: raise a node's fence counter to the
-- token the lease drew (the highest of its quorum), if the node still holds
-- the lock for the lease. Any later holder's quorum shares a node with this
-- one's, whose counter is then above this token before that holder draws
-- from it: tokens stay strictly increasing across holders. A raised counter
-- expires a grace after the lock, as acquire_fenced.lua's does; once it has,
-- the node draws from its clock (see acquire_fenced.lua).
-- KEYS[1]: the lock key; KEYS[2]: the fence counter; ARGV[1]: the token;
-- ARGV[2]: the fencing token; ARGV[3]: the grace in ms.
-- Returns 1 when the node holds the lock for the token, 0 otherwise.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  local fence = tonumber(redis.call("GET", KEYS[2]) or "0")
  if fence < tonumber(ARGV[2]) then
    local ttl = math.max(redis.call("PTTL", KEYS[1]), 0)
    redis.call("SET", KEYS[2], ARGV[2], "PX", ttl + tonumber(ARGV[3]))
  end
  return 1
end
return 0
