-- Set-if-absent for a later exclusive attempt (lockstore.HeldAcquirer), for
-- the attempts that cannot be one native SET ... NX GET: fenced ones, which
-- draw the name's next fence in the same step (draw, fence.lua), and any on
-- servers before Redis 7.0. As acquire.lua and acquire_fenced.lua, with one
-- more answer: -1 when shares hold the lock (the key holds the marker
-- "reqlock:shares:N" of share.lua), having written nothing.
-- KEYS[1]: the lock key; KEYS[2]: the fence counter (same hash tag, same
-- slot); ARGV[1]: the token; ARGV[2]: TTL in ms; ARGV[3]: "1" to draw a
-- fence; ARGV[4]: the counter's TTL in ms (the lock's TTL and a grace).
-- Returns the fence (fenced) or 1 when the key is ours, -1 when shares
-- hold it, 0 when an exclusive holder has it.
local token, ttl, fenced = ARGV[1], ARGV[2], ARGV[3] == "1"
if redis.call("SET", KEYS[1], token, "NX", "PX", ttl) then
  if fenced then
    return draw(ARGV[4])
  end
  return 1
end
local v = redis.call("GET", KEYS[1])
if v == token then
  -- re-sent after a lost reply: ours already, with this attempt's TTL
  redis.call("PEXPIRE", KEYS[1], ttl)
  if not fenced then
    return 1
  end
  local fence = redis.call("GET", KEYS[2])
  if not fence then
    return draw(ARGV[4])
  end
  redis.call("PEXPIRE", KEYS[2], ARGV[4])
  return tonumber(fence)
end
if v and string.find(v, "^reqlock:shares:%d+$") then
  return -1
end
return 0
