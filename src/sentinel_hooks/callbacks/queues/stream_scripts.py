"""The Lua scripts behind the Redis session queue (``stream.py``), one per atomic step.

Keys (under the store's prefix; listed in ``store/redis/keys.py``):

* ``session-queue:<sessionKey>`` — list of callback ids waiting for that session, oldest first;
  the head stays in the list while its session runs and is popped only at a final status;
* ``session-work`` — stream of "this session key has work" entries, read by the consumer group
  ``sessions`` (one consumer per replica id);
* ``session-lock:<sessionKey>`` — ``"<replicaId> <entryId> <nonce>"`` with PX: who drains the
  key now, and the stream entry whose pending state protects that work if the holder dies.

Invariants:

* while a replica holds a key's lock, the entry named in the lock is pending in that replica's
  consumer (never acknowledged, its idle time reset at every renewal). So a holder that dies
  leaves a pending entry that another replica reclaims (XAUTOCLAIM) once the lock has expired;
  every other entry of a locked key can be acknowledged at once, since the holder drains the list;
* a key whose list is not empty has a holder draining it or an entry in the stream (unread, or
  pending in a consumer): ``ENQUEUE`` adds an entry when the list goes from empty to one
  callback, ``RELEASE`` when a key is handed back with work left, and the holder frees the lock
  only once the list is empty, in the same script (``POP`` of the last callback, or ``RELEASE``).
  So a callback queued behind others adds no entry of its own (no read and no lock attempt per
  callback while its key is busy): whoever drains the key reaches it.
"""

from __future__ import annotations

ENQUEUE = """
-- KEYS: queue, stream | ARGV: callback id, session key, '1' = only when not queued already
-- An entry announces the key only when its list was empty: otherwise one is there already.
if ARGV[3] == '1' and redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
if redis.call('RPUSH', KEYS[1], ARGV[1]) == 1 then
  redis.call('XADD', KEYS[2], '*', 'key', ARGV[2])
end
return 1
"""

TAKE = """
-- KEYS: lock, stream, queue | ARGV: lock value, ttl ms, group, entry id
-- {1, the list's head or nil}: this replica now drains the key, starting there. {0}: another
-- holds it; the entry was acknowledged (the holder drains the list), or given back to the
-- holder when it is the holder's own entry.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('LINDEX', KEYS[3], 0)}
end
local holder = redis.call('GET', KEYS[1])
local consumer, entry = string.match(holder, '^(%S+) (%S+) ')
if entry == ARGV[4] then
  redis.call('XCLAIM', KEYS[2], ARGV[3], consumer, 0, ARGV[4], 'JUSTID')
  return {0}
end
redis.call('XACK', KEYS[2], ARGV[3], ARGV[4])
redis.call('XDEL', KEYS[2], ARGV[4])
return {0}
"""

RENEW = """
-- KEYS: lock, stream | ARGV: lock value, ttl ms, group, consumer, entry id
-- extends the lock and resets the entry's idle time (so it is not reclaimed); 0 = lock lost
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('XCLAIM', KEYS[2], ARGV[3], ARGV[4], 0, ARGV[5], 'JUSTID')
return 1
"""

POP = """
-- KEYS: lock, queue, stream | ARGV: lock value, callback id, group, entry id
-- {1, the next head}: popped, and what the holder runs next (no second round trip).
-- {1}: popped, and the list is empty: the lock is freed and the entry acknowledged in the same
--      step (what RELEASE does then), so a callback queued after it announces the key afresh.
-- {0}: lock lost (nothing popped)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
if redis.call('LINDEX', KEYS[2], 0) == ARGV[2] then redis.call('LPOP', KEYS[2]) end
local head = redis.call('LINDEX', KEYS[2], 0)
if head then return {1, head} end
redis.call('DEL', KEYS[1])
redis.call('XACK', KEYS[3], ARGV[3], ARGV[4])
redis.call('XDEL', KEYS[3], ARGV[4])
return {1}
"""

RELEASE = """
-- KEYS: lock, queue, stream | ARGV: lock value, group, entry id, session key, '1' = hand back
-- 0: the lock is held and the list is not empty, keep draining (unless handing back).
-- 1: done; the lock is free (if it was ours) and the entry acknowledged; work left in the list
--    gets a fresh entry, so some replica drains it.
local mine = redis.call('GET', KEYS[1]) == ARGV[1]
local left = redis.call('LLEN', KEYS[2])
if mine and left > 0 and ARGV[5] ~= '1' then return 0 end
if mine then redis.call('DEL', KEYS[1]) end
if left > 0 then redis.call('XADD', KEYS[3], '*', 'key', ARGV[4]) end
redis.call('XACK', KEYS[3], ARGV[2], ARGV[3])
redis.call('XDEL', KEYS[3], ARGV[3])
return 1
"""

SOURCES = {"enqueue": ENQUEUE, "take": TAKE, "renew": RENEW, "pop": POP, "release": RELEASE}
