-- Compare-and-delete: delete the lock key only if it still holds our token,
-- then, with WithNotify, tell the waiters on the name's channel.
-- KEYS[1]: the lock key; ARGV[1]: the lease's token; ARGV[2] (optional): the
-- channel to publish on.
-- Returns 1 when the key was ours and is deleted, 0 when it was not ours
-- (expired, or taken by another holder, whose key is left untouched).
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("DEL", KEYS[1])
  if ARGV[2] then
    redis.call("PUBLISH", ARGV[2], "")
  end
  return 1
end
return 0
