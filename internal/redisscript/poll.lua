-- The fair queue's poll for all the waiters of one process on one name
-- (WithFair, queue.lua), one atomic step: renew each waiter's place for the
-- patience (taking back at the tail one that lost it), then grant a free
-- lock to the first live waiter, ours or not. A process polls once per
-- name for all its waiters, so that the round trips of waiting do not grow
-- with the number of waiters.
-- KEYS: as queue.lua. ARGV[1]: patience in ms; ARGV[2]: "1" to draw fences;
-- ARGV[3]: the name's channel; ARGV[4]: the fence counter's grace in ms;
-- then a token and its TTL in ms for each waiter.
-- Returns {i, fence, ttl left in ms} when the waiter of the i-th token (from
-- 1) holds the lock (granted by a release since the last poll, or now),
-- {0, 0, 0} when none of them does.
local patience, fenced = tonumber(ARGV[1]), ARGV[2] == "1"
local grace = tonumber(ARGV[4])
local holder = redis.call("GET", KEYS[1])
local now = now_ms()
for i = 5, #ARGV - 1, 2 do
  if ARGV[i] ~= holder then
    renew(ARGV[i], tonumber(ARGV[i + 1]), patience, fenced, now)
  end
end
if not holder then
  holder = grant(now, ARGV[3], grace)
end
outlive(patience)
for i = 5, #ARGV - 1, 2 do
  if ARGV[i] == holder then
    local r = holding(holder, fenced, grace)
    r[1] = (i - 3) / 2
    return r
  end
end
return {0, 0, 0}
