"""``PaceStore.take_pace_slot`` on Redis: a sliding-window log in one sorted set per key
(``pace:{key}``, members scored by the ms their slot was taken), in one Lua script so that
trimming, counting and adding are atomic for every replica."""

from __future__ import annotations

TAKE_PACE_SLOT = """
-- KEYS[1] pace:{key}; ARGV: at_ms, window_ms, limit, member (unique per call)
local at, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], at, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], window)
  return false
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return tonumber(oldest[2]) + window
"""
"""Returns nil when a slot was taken, else the epoch ms at which the oldest slot leaves the window."""
