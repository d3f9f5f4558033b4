-- Compare-and-delete: delete the lock key only if it still holds our token.
-- Then, if waiters queue for it (WithFair, queue.lua), grant it to the first
-- live one; else, with WithNotify, tell the waiters on the name's channel.
-- A token that does not hold the key loses its place in the key's queue, if
-- it has one: the undo of a waiter that has gone (core.Undoer), whose
-- enqueue or poll, sent into a stalled store, may have queued it again
-- after it gave up.
-- KEYS: the lock key, its fence counter, queue and entries (queue.lua);
-- ARGV[1]: the lease's token; ARGV[2]: the name's channel; ARGV[3]: "1" to
-- publish a release notice (WithNotify), "0" not to; ARGV[4]: the fence
-- counter's grace in ms.
-- Returns 1 when the key was ours and is deleted (or granted on), 0 when it
-- was not ours (expired, or taken by another holder, whose key is left
-- untouched).
-- release_unqueued.lua runs first and answers alone while the name has no
-- queue; this part runs for a name that has one.
if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  if redis.call("EXISTS", KEYS[3]) == 1 then
    drop(ARGV[1])
    tidy()
  end
  return 0
end
redis.call("DEL", KEYS[1])
if redis.call("EXISTS", KEYS[3]) == 1 and grant(now_ms(), ARGV[2], tonumber(ARGV[4])) then
  return 1
end
if ARGV[3] == "1" then
  redis.call("PUBLISH", ARGV[2], "")
end
return 1
