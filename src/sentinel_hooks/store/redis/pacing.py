"""``PaceStore.take_pace_slot`` on Redis: a log of slots in one sorted set per key (``pace:{key}``,
members scored by their slot's epoch ms, some reserved ahead: the member is then the holder), in
one Lua script so that every replica's reading and writing is atomic. Where a slot goes is
``store.pace_slots``'s rule, spelled here in Lua (``fits``, ``earliest``)."""

from __future__ import annotations

TAKE_PACE_SLOT = """
-- KEYS[1] pace:{key}; ARGV: at_ms, window_ms, limit, holder, a fresh member id
local at, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local holder, fresh = 'h:' .. ARGV[4], 'u:' .. ARGV[5]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at - window)

-- one more slot at t leaves every span of the window holding t at limit or fewer slots
local function fits(slots, t)
  local starts = {t - window + 1}
  for _, s in ipairs(slots) do
    if s >= t and s < t + window then starts[#starts + 1] = s - window + 1 end
  end
  for _, a in ipairs(starts) do
    local n = 0
    for _, s in ipairs(slots) do
      if s >= a and s < a + window then n = n + 1 end
    end
    if n >= limit then return false end
  end
  return true
end

-- the earliest instant from `from` on where one more slot fits
local function earliest(slots, from)
  if fits(slots, from) then return from end
  local candidates = {}
  for _, s in ipairs(slots) do
    if s + window > from then candidates[#candidates + 1] = s + window end
  end
  table.sort(candidates)
  for _, t in ipairs(candidates) do
    if fits(slots, t) then return t end
  end
end

local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local others, held, latest = {}, nil, at
for i = 1, #all, 2 do
  local s = tonumber(all[i + 1])
  if all[i] == holder then held = s else others[#others + 1] = s end
  if s > latest then latest = s end
end
local slot
if held then
  if held > at then return held end
  -- its slot has come: now if that fits among the others, else the earliest that does
  slot = earliest(others, at)
  redis.call('ZREM', KEYS[1], holder)
else
  slot = earliest(others, latest)  -- a first ask goes after every slot handed out
end
if slot > at then
  redis.call('ZADD', KEYS[1], slot, holder)
else
  redis.call('ZADD', KEYS[1], slot, fresh)
end
local last = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], tonumber(last[2]) - at + window)
if slot > at then return slot end
return false
"""
"""Returns nil when the holder may send now, else the epoch ms of the slot reserved for it."""
