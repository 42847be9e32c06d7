"""Lua scripts of the Redis store's retention: transcripts whose head can be pruned, and the prune
steps (``Store.prune``; the rules: ``store.pruning``), each with its KEYS/ARGV contract.

A transcript is a list whose first element is entry ``head + 1``, ``head`` being what
``transcript-head:{session}`` holds (absent: 0): trimming the list's head adds to it, so the
seq of every entry left, and of later appends, stays what it was. ``sessions`` scores each
session by its last append (ms), for idle-session pruning.

Prune steps read candidates oldest first from the listing indexes (members
``{created_ms:015d}:{id}``: a lexical range up to the cutoff), so a step costs about the same
however much Redis holds; each re-checks every record inside the script, so two replicas
racing delete each record once. Records are decoded with ``cjson`` only for the fields that
name their other keys. Like ``scripts``, these build key names from a prefix argument
(a single server, not Redis Cluster).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sentinel_hooks.store.pruning import (
    CLOSED_INBOX_STATUSES,
    OPEN_CONTRACT_STATES,
    PRUNED_CONTRACT_STATES,
)


def _lua_list(names: Sequence[str]) -> str:
    return "{" + ", ".join(f"'{name}'" for name in names) + "}"


APPEND_TRANSCRIPT = """
-- KEYS: transcript list, its head, sessions, then checkpoint keys
-- ARGV: session key, at ms, number of entries, the entries, then one text per checkpoint key
-- Puts the checkpoints; returns the seq of the last entry appended (0 when none is).
for i = 4, #KEYS do
  redis.call('SET', KEYS[i], ARGV[3 + tonumber(ARGV[3]) + i - 3])
end
if tonumber(ARGV[3]) == 0 then return 0 end
local length = redis.call('RPUSH', KEYS[1], unpack(ARGV, 4, 3 + tonumber(ARGV[3])))
redis.call('ZADD', KEYS[3], 'GT', ARGV[2], ARGV[1])
return length + tonumber(redis.call('GET', KEYS[2]) or '0')
"""

READ_TRANSCRIPT = """
-- KEYS: transcript list, its head | ARGV: after seq, count (-1: all)
-- Returns {seq of the first entry returned, entries...}.
local head = tonumber(redis.call('GET', KEYS[2]) or '0')
local start = math.max(tonumber(ARGV[1]) - head, 0)
local stop = -1
if tonumber(ARGV[2]) >= 0 then stop = start + tonumber(ARGV[2]) - 1 end
local out = redis.call('LRANGE', KEYS[1], start, stop)
table.insert(out, 1, head + start + 1)
return out
"""

READ_CALLBACK = """
-- KEYS: contract hash, transcript list, its head, the checkpoint holding the place, then the
-- checkpoints to read | ARGV: the place's field in that checkpoint ('' to read no transcript),
-- 'envelope' (or '' to leave the envelope out: no hash has a field '')
-- Returns {{doc, envelope}, {checkpoint texts}, seq of the first entry, {entries}}; the entries
-- are those after the seq the checkpoint holds under the field (0 without an integer there).
local found = redis.call('HMGET', KEYS[1], 'doc', ARGV[2])
local saved = {}
if #KEYS > 4 then saved = redis.call('MGET', unpack(KEYS, 5)) end
if ARGV[1] == '' then return {found, saved, 0, {}} end
local after = 0
local text = redis.call('GET', KEYS[4])
if text then
  local ok, data = pcall(cjson.decode, text)
  if ok and type(data) == 'table' then
    local seq = data[ARGV[1]]
    if type(seq) == 'number' and seq == math.floor(seq) then after = seq end
  end
end
local head = tonumber(redis.call('GET', KEYS[3]) or '0')
local start = math.max(after - head, 0)
return {found, saved, head + start + 1, redis.call('LRANGE', KEYS[2], start, -1)}
"""

_SCAN_FN = """
-- Calls visit(member) for members of the lexical index ``key`` below ``bound`` (exclusive), oldest
-- first, ``limit`` at a time, until visit has deleted ``limit`` records in all or ``4 * limit``
-- members were looked at (records skipped on purpose are rare: a bounded look past them).
local function scan(key, bound, limit, done, visit)
  local lower, looked = '-', 0
  while done < limit and looked < 4 * limit do
    local members = redis.call('ZRANGEBYLEX', key, lower, '(' .. bound, 'LIMIT', 0, limit)
    if #members == 0 then break end
    for _, m in ipairs(members) do
      looked = looked + 1
      lower = '(' .. m
      if done < limit and visit(m) then done = done + 1 end
    end
  end
  return done
end
"""

PRUNE_CONTRACTS = (
    _SCAN_FN
    + f"""
-- ARGV: key prefix, cutoff ms as 15 digits, cutoff ISO, limit, checkpoint prefixes (JSON array),
--       transcript entries the step may trim
-- Returns {{contracts deleted, deliveries deleted, transcript entries trimmed}}.
local prefix, bound, cutoff, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local checkpoints, cap = cjson.decode(ARGV[5]), tonumber(ARGV[6])
local idx = prefix .. 'contract-index:'
local deliveries, sessions, order = 0, {{}}, {{}}

local function prune(state, m)
  local cid = string.sub(m, 17)
  local ckey = prefix .. 'contract:' .. cid
  local found = redis.call('HMGET', ckey, 'state', 'doc')
  if not found[1] then redis.call('ZREM', idx .. 'state:' .. state, m) return false end
  if found[1] ~= state then return false end
  local ok, record = pcall(cjson.decode, found[2])
  if not ok or type(record) ~= 'table' then return false end
  if type(record.settledAt) == 'string' and record.settledAt >= cutoff then return false end
  local dindex = prefix .. 'delivery-index:callback:' .. cid
  local dkeys = {{}}
  for _, dm in ipairs(redis.call('ZRANGE', dindex, 0, -1)) do
    local dkey = string.sub(dm, 17)
    if redis.call('HGET', prefix .. 'delivery:' .. dkey, 'state') == 'pending' then return false end
    dkeys[#dkeys + 1] = dkey
  end
  local w = record.watcherId
  redis.call('DEL', ckey, dindex)
  redis.call('ZREM', prefix .. 'contract-due', cid)
  local by_both = 'state-watcher:' .. state .. ':' .. w
  for _, index in ipairs({{'all', 'watcher:' .. w, 'state:' .. state, by_both}}) do
    redis.call('ZREM', idx .. index, m)
  end
  for _, dkey in ipairs(dkeys) do
    redis.call('DEL', prefix .. 'delivery:' .. dkey)
    redis.call('ZREM', prefix .. 'delivery-due', dkey)
  end
  for _, p in ipairs(checkpoints) do redis.call('DEL', prefix .. 'checkpoint:' .. p .. cid) end
  redis.call('DEL', prefix .. 'feedback:' .. cid)
  for _, k in ipairs({{'group:', 'group-joins:', 'group-resolved:'}}) do  -- a pruned group's (SPEC 19)
    redis.call('DEL', prefix .. k .. cid)
  end
  redis.call('ZREM', prefix .. 'group-due', cid)
  deliveries = deliveries + #dkeys
  local s = record.sessionKey
  if type(s) == 'string' and not sessions[s] then sessions[s] = true; order[#order + 1] = s end
  return true
end

local deleted = 0
for _, state in ipairs({_lua_list(PRUNED_CONTRACT_STATES)}) do
  deleted = scan(idx .. 'state:' .. state, bound, limit, deleted, function(m) return prune(state, m) end)
end

-- the head of each touched session: entries before the cutoff of callbacks that no longer exist
local trimmed = 0
for _, s in ipairs(order) do
  local tkey = prefix .. 'transcript:' .. s
  local n, stop = 0, false
  while not stop and trimmed + n < cap do
    local texts = redis.call('LRANGE', tkey, n, n + math.min(99, cap - trimmed - n - 1))
    if #texts == 0 then break end
    for _, text in ipairs(texts) do
      local ok, e = pcall(cjson.decode, text)
      if not ok or type(e) ~= 'table' or type(e.at) ~= 'string' or e.at >= cutoff then stop = true break end
      local cb = type(e.entry) == 'table' and e.entry.callbackId
      local live = type(cb) == 'string' and redis.call('EXISTS', prefix .. 'contract:' .. cb) == 1
      if live then stop = true break end
      n = n + 1
    end
  end
  if n > 0 then
    redis.call('LTRIM', tkey, n, -1)
    redis.call('INCRBY', prefix .. 'transcript-head:' .. s, n)
    trimmed = trimmed + n
  end
end
return {{deleted, deliveries, trimmed}}
"""
)

PRUNE_INBOX = (
    _SCAN_FN
    + f"""
-- ARGV: key prefix, cutoff ms as 15 digits, cutoff ISO, limit
-- Returns {{items deleted, deliveries deleted}}: an item goes with the deliveries of its escalation
-- chain (keyed by its id), and stays while one of them is pending.
local prefix, bound, cutoff, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local idx = prefix .. 'inbox-index:'
local deliveries = 0

local function prune(status, m)
  local id = string.sub(m, 17)
  local ikey = prefix .. 'inbox-item:' .. id
  local found = redis.call('HMGET', ikey, 'status', 'kind', 'doc')
  if not found[1] then redis.call('ZREM', idx .. 'status:' .. status, m) return false end
  if found[1] ~= status then return false end
  local ok, item = pcall(cjson.decode, found[3])
  if not ok or type(item) ~= 'table' or type(item.updatedAt) ~= 'string' then return false end
  if item.updatedAt >= cutoff then return false end
  local dindex = prefix .. 'delivery-index:callback:' .. id
  local dkeys = {{}}
  for _, dm in ipairs(redis.call('ZRANGE', dindex, 0, -1)) do
    local dkey = string.sub(dm, 17)
    if redis.call('HGET', prefix .. 'delivery:' .. dkey, 'state') == 'pending' then return false end
    dkeys[#dkeys + 1] = dkey
  end
  for _, dkey in ipairs(dkeys) do
    redis.call('DEL', prefix .. 'delivery:' .. dkey)
    redis.call('ZREM', prefix .. 'delivery-due', dkey)
  end
  redis.call('DEL', dindex)
  deliveries = deliveries + #dkeys
  local kind = found[2]
  redis.call('DEL', ikey, prefix .. 'inbox-history:' .. id)
  local by_both = 'status-kind:' .. status .. ':' .. kind
  for _, index in ipairs({{'all', 'status:' .. status, 'kind:' .. kind, by_both}}) do
    redis.call('ZREM', idx .. index, m)
  end
  return true
end

local deleted = 0
for _, status in ipairs({_lua_list(CLOSED_INBOX_STATUSES)}) do
  deleted = scan(idx .. 'status:' .. status, bound, limit, deleted, function(m) return prune(status, m) end)
end
return {{deleted, deliveries}}
"""
)

PRUNE_SESSIONS = f"""
-- KEYS: sessions | ARGV: key prefix, cutoff ms, limit, checkpoint prefixes (JSON array)
-- Returns {{sessions deleted, transcript entries deleted, idle sessions looked at}}. An idle session
-- an open contract belongs to is scored at the cutoff: looked at again once the cutoff has moved.
local prefix, cutoff = ARGV[1], ARGV[2]
local idle = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. cutoff, 'LIMIT', 0, ARGV[3])
if #idle == 0 then return {{0, 0, 0}} end
local open = {{}}
for _, state in ipairs({_lua_list(OPEN_CONTRACT_STATES)}) do
  for _, m in ipairs(redis.call('ZRANGE', prefix .. 'contract-index:state:' .. state, 0, -1)) do
    local doc = redis.call('HGET', prefix .. 'contract:' .. string.sub(m, 17), 'doc')
    local ok, record = pcall(cjson.decode, doc or '')
    if ok and type(record) == 'table' and type(record.sessionKey) == 'string' then
      open[record.sessionKey] = true
    end
  end
end
local checkpoints = cjson.decode(ARGV[4])
local deleted, entries = 0, 0
for _, s in ipairs(idle) do
  if open[s] then
    redis.call('ZADD', KEYS[1], cutoff, s)
  else
    local tkey = prefix .. 'transcript:' .. s
    entries = entries + redis.call('LLEN', tkey)
    redis.call('DEL', tkey, prefix .. 'transcript-head:' .. s)
    for _, p in ipairs(checkpoints) do redis.call('DEL', prefix .. 'checkpoint:' .. p .. s) end
    redis.call('ZREM', KEYS[1], s)
    deleted = deleted + 1
  end
end
return {{deleted, entries, #idle}}
"""


def json_list(values: Sequence[str]) -> str:
    """A list of strings as one script argument (decoded with ``cjson``)."""
    return json.dumps(list(values))
