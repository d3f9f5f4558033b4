-- Library, put before the scripts that draw fencing tokens (WithFencing).
-- draw returns the lock's next fence: the larger of the counter + 1 and the
-- server's clock in microseconds (TIME), written back to the counter
-- KEYS[2], which then expires keep ms later (the lock's TTL and a grace of a
-- few seconds). Fences stay strictly increasing while the counter lives,
-- and across its loss (FLUSHALL, a restart without persistence, its expiry
-- when the name is idle) as long as the server's clock does not go back.
-- Calling TIME before writing needs Redis 5.0 or later (scripts replicated
-- by their effects). draw_at does the same with the counter of its
-- argument (acquire_all.lua draws one fence per key).
local function draw_at(counter, keep)
  local t = redis.call("TIME")
  local now = t[1] .. string.format("%06d", tonumber(t[2]))
  local last = redis.call("GET", counter)
  if last and tonumber(last) >= tonumber(now) then
    local fence = redis.call("INCR", counter)
    redis.call("PEXPIRE", counter, keep)
    return fence
  end
  redis.call("SET", counter, now, "PX", keep)
  return tonumber(now)
end

local function draw(keep)
  return draw_at(KEYS[2], keep)
end

