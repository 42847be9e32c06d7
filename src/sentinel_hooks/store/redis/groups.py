"""The Redis store's follow-up steps for groups (SPEC §19): claiming the groups whose joins are due
for a follow-up, and recording that follow-up with its deliveries in one script. Fires open and
join groups inside ACCEPT_CONTRACT (``scripts._GROUP_FNS``, which names the keys).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sentinel_hooks.store.records import Delivery, JoinBatch
from sentinel_hooks.store.redis.keys import RedisKeys
from sentinel_hooks.store.redis.scripts import _ENQUEUE_FN, Call, delivery_rows

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
