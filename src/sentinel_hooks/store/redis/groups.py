"""The Redis store's follow-up steps for groups (SPEC §19): claiming the groups whose joins are due
for a follow-up, and recording that follow-up with its deliveries in one script. Fires open and
join groups inside ACCEPT_CONTRACT (``scripts._GROUP_FNS``, which names the keys), and a storm's
fires written out beforehand join in JOIN_MEMBERS.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sentinel_hooks.store.paging import sort_member
from sentinel_hooks.store.records import Delivery, GroupRequest, JoinBatch, MemberJoin
from sentinel_hooks.store.redis.keys import RedisKeys
from sentinel_hooks.store.redis.scripts import _ENQUEUE_FN, _GROUP_FNS, Call, delivery_rows

CLAIM_JOINS = """
-- KEYS: group-due | ARGV: now_ms, limit, lease_ms, key prefix
-- Returns {{group id, follow-ups sent, member...}...}, each now leased until now + lease.
local out = {}
for _, gid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])) do
  redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[3]), gid)
  local row = {gid, redis.call('HGET', ARGV[4] .. 'group:' .. gid, 'n') or '0'}
  for _, m in ipairs(redis.call('LRANGE', ARGV[4] .. 'group-joins:' .. gid, 0, -1)) do row[#row + 1] = m end
  out[#out + 1] = row
end
return out
"""

JOINS_REPORTED = (
    _ENQUEUE_FN
    + """
-- KEYS: group-due, delivery-due | ARGV: key prefix, group id, ordinal, now_ms, members as one JSON
--   array, deliveries as one JSON array (each [its hash, its callback index, key, doc, state,
--   due_ms|'', index member])
-- Returns 1, or 0 (nothing written) when the batch is not the group's next follow-up any more.
local g, joins = ARGV[1] .. 'group:' .. ARGV[2], ARGV[1] .. 'group-joins:' .. ARGV[2]
if redis.call('HGET', g, 'n') ~= tostring(tonumber(ARGV[3]) - 1) then return 0 end
local members = cjson.decode(ARGV[5])
local head = redis.call('LRANGE', joins, 0, #members - 1)
if #head ~= #members then return 0 end
for i, m in ipairs(members) do if head[i] ~= m then return 0 end end
redis.call('LTRIM', joins, #members, -1)
redis.call('HSET', g, 'n', ARGV[3], 'sent', ARGV[4])
if redis.call('LLEN', joins) > 0 then
  redis.call('ZADD', KEYS[1], tonumber(ARGV[4]) + tonumber(redis.call('HGET', g, 'interval')), ARGV[2])
else
  redis.call('ZREM', KEYS[1], ARGV[2])
end
for _, d in ipairs(cjson.decode(ARGV[6])) do
  enqueue(d[1], d[2], KEYS[2], d[3], d[4], d[5], d[6], d[7])
end
return 1
"""
)


JOIN_MEMBERS = (
    _GROUP_FNS
    + """
-- KEYS: the key's open group, group-due, index all, by watcher, by state grouped, by state+watcher
--       grouped
-- ARGV: key prefix, then five per member: callback id, doc (its groupId ""), envelope, index
--       member, created_ms
-- Returns, in order, the group each member joined or '' when its callback id exists; it stops at
-- the first member no group takes (none open, or it filled: closed then), nothing written for it
-- or any after it. The group counts and lists the members once, after them (join_group).
local prefix, out, joined = ARGV[1], {}, {}
local gid = open_group(prefix, KEYS[1], ARGV[6])
local text = gid and group_text(prefix, gid)
if not text then return out end
local f = redis.call('HMGET', prefix .. 'group:' .. gid, 'fires', 'max')
local fires, most, first_ms, last_ms = tonumber(f[1]), tonumber(f[2]), nil, nil
for i = 2, #ARGV, 5 do
  if fires >= most then break end
  local cid, at = ARGV[i], ARGV[i + 4]
  local key = prefix .. 'contract:' .. cid
  if redis.call('EXISTS', key) == 1 then
    out[#out + 1] = ''
  else
    local doc = string.gsub(ARGV[i + 1], '"groupId":""', '"groupId":"' .. gid .. '"', 1)
    redis.call('HSET', key, 'doc', doc, 'envelope', ARGV[i + 2], 'state', 'grouped')
    for k = 3, 6 do redis.call('ZADD', KEYS[k], 0, ARGV[i + 3]) end
    fires = fires + 1
    joined[#joined + 1] = cid
    first_ms = first_ms or at
    last_ms = at
    out[#out + 1] = gid
  end
end
if #joined > 0 then join_group(prefix, gid, joined, first_ms, last_ms, KEYS[1], KEYS[2], text) end
return out
"""
)


MEMBER_RESOLVED = """
-- ARGV: key prefix, group id, member id
-- Returns 1 once every member of the group was reported over (the group closes then), or for a
-- group the store does not know; else 0.
local g = ARGV[1] .. 'group:' .. ARGV[2]
local fires = redis.call('HGET', g, 'fires')
if not fires then return 1 end
local resolved = ARGV[1] .. 'group-resolved:' .. ARGV[2]
redis.call('SADD', resolved, ARGV[3])
if redis.call('SCARD', resolved) < tonumber(fires) then return 0 end
redis.call('HSET', g, 'closed', '1')
local openkey = redis.call('HGET', g, 'key')
if openkey and redis.call('GET', openkey) == ARGV[2] then redis.call('DEL', openkey) end
return 1
"""


def claim_joins_call(k: RedisKeys, now_ms: int, limit: int, lease_ms: int) -> Call:
    return [k.group_due], [now_ms, limit, lease_ms, k.prefix]


def batches(rows: Sequence[Sequence[Any]]) -> list[JoinBatch]:
    """CLAIM_JOINS' answer as batches."""
    return [JoinBatch(str(row[0]), tuple(str(m) for m in row[2:]), int(row[1]) + 1) for row in rows]


def joins_reported_call(k: RedisKeys, batch: JoinBatch, deliveries: Sequence[Delivery], now_ms: int) -> Call:
    members = json.dumps(list(batch.members))
    rows = json.dumps(delivery_rows(k, deliveries), ensure_ascii=False, separators=(",", ":"))
    return [k.group_due, k.delivery_due], [k.prefix, batch.group_id, batch.ordinal, now_ms, members, rows]


def join_members_call(k: RedisKeys, request: GroupRequest, members: Sequence[MemberJoin]) -> Call:
    watcher_id = members[0].watcher_id
    keys = [
        k.group_open(request.key),
        k.group_due,
        k.contract_index(None, None),
        k.contract_index(watcher_id, None),
        k.contract_index(None, "grouped"),
        k.contract_index(watcher_id, "grouped"),
    ]
    args: list[Any] = [k.prefix]
    for m in members:
        args += [m.callback_id, m.doc, m.envelope, sort_member(m.created_ms, m.callback_id), m.created_ms]
    return keys, args
