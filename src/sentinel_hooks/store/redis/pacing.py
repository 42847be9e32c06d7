"""``PaceStore.take_pace_slot`` on Redis: a log of slots in one sorted set per key (``pace:{key}``,
members scored by their slot's epoch ms, some reserved ahead: the member is then the holder), in
one Lua script so that every replica's reading and writing is atomic."""

from __future__ import annotations

TAKE_PACE_SLOT = """
-- KEYS[1] pace:{key}; ARGV: at_ms, window_ms, limit, holder, a fresh member id
local at, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local holder, fresh = 'h:' .. ARGV[4], 'u:' .. ARGV[5]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at - window)
local held = redis.call('ZSCORE', KEYS[1], holder)
if held then
  held = tonumber(held)
  if held > at then return held end
  -- the send happens now, perhaps well after its slot: it is counted where it happens
  redis.call('ZREM', KEYS[1], holder)
  redis.call('ZADD', KEYS[1], at, fresh)
  local last = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[1], tonumber(last[2]) - at + window)
  return false
end
local nth = redis.call('ZREVRANGE', KEYS[1], limit - 1, limit - 1, 'WITHSCORES')
local slot = at
if nth[2] then slot = math.max(at, tonumber(nth[2]) + window) end
if slot > at then
  redis.call('ZADD', KEYS[1], slot, holder)
else
  redis.call('ZADD', KEYS[1], slot, fresh)
end
redis.call('PEXPIRE', KEYS[1], slot - at + window)
if slot > at then return slot end
return false
"""
"""Returns nil when the holder may send now, else the epoch ms of the slot reserved for it."""
