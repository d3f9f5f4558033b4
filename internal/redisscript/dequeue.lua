-- A waiter gives up (WithFair, queue.lua): drop its entry; if a release
-- granted it the lock meanwhile, release it and grant it on, so that a
-- grant is never lost with a waiter that left.
-- KEYS: as queue.lua. ARGV[1]: the waiter's token; ARGV[2]: the name's
-- channel; ARGV[3]: the fence counter's grace in ms.
-- Returns 1 when the waiter held the lock (released now), 0 otherwise.
drop(ARGV[1])
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  grant(now_ms(), ARGV[2], tonumber(ARGV[3]))
  return 1
end
tidy()
return 0
