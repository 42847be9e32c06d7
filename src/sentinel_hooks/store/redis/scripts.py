"""Lua scripts that make the Redis store's multi-key steps atomic (Redis runs a script whole),
each with the function that builds its KEYS and ARGV, so their positional contract is in one file.

Documents are JSON text built in Python; scripts only compare plain fields (``state``,
``status``, ``version``) and move members between indexes, never decode JSON. Indexes:

* due sets (``contract-due``, ``delivery-due``): sorted sets scored by the epoch ms at which a
  member is due (its deadline / next attempt, or the end of the claim holding it);
* listing indexes: sorted sets with score 0 whose members are ``{created_ms:015d}:{id}``,
  so lexical order is ``(created_at, id)`` order and cursors are range bounds.

``CLAIM`` and ``RANGE`` read documents by ids found in an index, building those keys from a
prefix argument, and the batch scripts (``SETTLE_CONTRACTS``, ``UPDATE_DELIVERIES``) take the
keys of their records inside one JSON argument: fine on a single Redis server (what Sentinel
supports), not on Redis Cluster.

It is one module past 500 lines for the reason in its first paragraph: a script's KEYS and ARGV
positions and the function that builds them change together, and the scripts share Lua
fragments (``_CONTRACT_FNS``, ``_DEDUPE_FN``) spliced into several of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sentinel_hooks.clock import iso
from sentinel_hooks.store import codec
from sentinel_hooks.store.paging import sort_member
from sentinel_hooks.store.records import (
    Contract,
    Delivery,
    DeliveryOutcome,
    GroupRequest,
    InboxHistoryEntry,
    InboxItem,
    SettledState,
    as_deduped,
    as_member,
    first_history_entry,
    to_epoch_ms,
    utc_ms,
)
from sentinel_hooks.store.redis.keys import RedisKeys

_ENQUEUE_FN = """
local function enqueue(dkey, idxkey, duekey, key, doc, state, due, member)
  if redis.call('EXISTS', dkey) == 1 then return 0 end
  redis.call('HSET', dkey, 'doc', doc, 'state', state)
  if due ~= '' then redis.call('ZADD', duekey, due, key) end
  redis.call('ZADD', idxkey, 0, member)
  return 1
end
"""

_CONTRACT_FNS = """
-- The contract state machine of ``contract_states`` (SPEC 6.1), for the scripts that move a
-- contract. A record is read with cjson only for its watcher, creation time and deadline (the
-- index member and due score); its text is changed in place like SETTLE_CONTRACTS does.
local function replaced(text, old, new)
  local at = string.find(text, old, 1, true)
  if not at then return nil end
  return string.sub(text, 1, at - 1) .. new .. string.sub(text, at + #old)
end
local function iso_ms(s)  -- 'YYYY-MM-DDTHH:MM:SS.mmmZ' to epoch ms (days from the civil date)
  local y, mo, d, h, mi, se, ms = string.match(s, '^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.(%d+)Z$')
  y, mo = tonumber(y), tonumber(mo)
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + tonumber(d) - 1
  local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
  return ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60000 + tonumber(se) * 1000 + tonumber(ms)
end
local function member_of(created_ms, id)
  local digits = string.format('%.0f', created_ms)
  return string.rep('0', 15 - #digits) .. digits .. ':' .. id
end
local function is_notify(key)
  local kind = string.match(key, ':([^:]*)$') or ''
  return kind == 'notify' or string.sub(kind, 1, 7) == 'notify.'
end
local function notifies_pending(prefix, cid)
  for _, m in ipairs(redis.call('ZRANGE', prefix .. 'delivery-index:callback:' .. cid, 0, -1)) do
    local key = string.sub(m, 17)
    if is_notify(key) and redis.call('HGET', prefix .. 'delivery:' .. key, 'state') == 'pending' then
      return true
    end
  end
  return false
end
-- Move contract ``cid`` from state ``from`` to ``to``: settled at ``settled_at`` when fulfilled or resolved,
-- with a new ``deadline`` (ISO) when given; a pending contract is due at its deadline.
local function move(prefix, cid, from, to, settled_at, deadline)
  local ckey = prefix .. 'contract:' .. cid
  local doc = redis.call('HGET', ckey, 'doc')
  local record = cjson.decode(doc)
  local new = replaced(doc, '"state":"' .. from .. '"', '"state":"' .. to .. '"')
  if new and (to == 'fulfilled' or to == 'resolved') then
    new = replaced(new, '"settledAt":null', '"settledAt":"' .. settled_at .. '"')
  end
  if new and deadline ~= '' then
    new = replaced(new, '"deadline":"' .. record.deadline .. '"', '"deadline":"' .. deadline .. '"')
  else
    deadline = record.deadline
  end
  if not new then return redis.error_reply('contract ' .. cid .. ' has a record Sentinel did not write') end
  local member = member_of(iso_ms(record.createdAt), cid)
  local idx = prefix .. 'contract-index:'
  redis.call('HSET', ckey, 'doc', new, 'state', to)
  redis.call('ZREM', idx .. 'state:' .. from, member)
  redis.call('ZADD', idx .. 'state:' .. to, 0, member)
  redis.call('ZREM', idx .. 'state-watcher:' .. from .. ':' .. record.watcherId, member)
  redis.call('ZADD', idx .. 'state-watcher:' .. to .. ':' .. record.watcherId, 0, member)
  if to == 'pending' then
    redis.call('ZADD', prefix .. 'contract-due', iso_ms(deadline), cid)
  else
    redis.call('ZREM', prefix .. 'contract-due', cid)
  end
  return true
end
local OPEN = {pending = true, notifying = true, awaiting_approval = true}
-- A notify delivery of ``cid`` ended (delivered or failed for good) at ``at``: its contract moves.
local function notify_ended(prefix, cid, delivered, at)
  local state = redis.call('HGET', prefix .. 'contract:' .. cid, 'state')
  if not state then return nil end
  local after = nil
  if delivered then
    if OPEN[state] then after = 'fulfilled' end
  elseif state == 'notifying' and not notifies_pending(prefix, cid) then
    after = 'pending'
  end
  if after then move(prefix, cid, state, after, at, '') end
  return after
end
"""

ENQUEUE_DELIVERY = (
    _ENQUEUE_FN
    + """
-- KEYS: delivery hash, callback index, delivery-due | ARGV: key, doc, state, due_ms|'', member
return enqueue(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
"""
)

SETTLE_CONTRACTS = (
    _ENQUEUE_FN
    + """
-- KEYS: contract-due, delivery-due
-- ARGV[1]: a JSON array, per contract: [callback id, new state, new doc or '', index member,
--   its hash, by state pending, by new state, by state+watcher pending, by new state+watcher,
--   deliveries, settled-at instant], each delivery [its hash, its callback index, key, doc,
--   state, due_ms|'', index member]
-- (one argument instead of ~20 per contract: redis-py packs every argument in Python).
-- With no new doc, the stored one is changed in place: '"state":"pending"' and '"settledAt":null'
-- each occur once in a pending contract's record (a quote inside a JSON string is escaped, and
-- the record has no other such keys); a record without them is left alone and reported.
-- Each contract is its own compare-and-set. Returns {ids that were still pending and are now
-- settled, ids left alone because their record did not have that shape}.
local function replaced(text, old, new)
  local at = string.find(text, old, 1, true)
  if not at then return nil end
  return string.sub(text, 1, at - 1) .. new .. string.sub(text, at + #old)
end
local won, odd = {}, {}
for _, c in ipairs(cjson.decode(ARGV[1])) do
  local found = redis.call('HMGET', c[5], 'state', 'doc')
  if found[1] == 'pending' then
    local doc = c[3]
    if doc == '' then
      doc = replaced(found[2], '"state":"pending"', '"state":"' .. c[2] .. '"')
      doc = doc and replaced(doc, '"settledAt":null', '"settledAt":"' .. c[11] .. '"')
    end
    if doc then
      local member = c[4]
      redis.call('HSET', c[5], 'state', c[2], 'doc', doc)
      redis.call('ZREM', KEYS[1], c[1])
      redis.call('ZREM', c[6], member)
      redis.call('ZADD', c[7], 0, member)
      redis.call('ZREM', c[8], member)
      redis.call('ZADD', c[9], 0, member)
      for _, d in ipairs(c[10]) do
        enqueue(d[1], d[2], KEYS[2], d[3], d[4], d[5], d[6], d[7])
      end
      won[#won + 1] = c[1]
    else
      odd[#odd + 1] = c[1]
    end
  end
end
return {won, odd}
"""
)

CLAIM = """
-- KEYS: due set | ARGV: now_ms, limit, lease end ms, document key prefix, then the hash fields
-- to return per claimed record (at least 'doc'). Returns those fields, record after record.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
local out = {}
for _, id in ipairs(ids) do
  local found = redis.call('HMGET', ARGV[4] .. id, unpack(fields))
  if found[1] then
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    for _, value in ipairs(found) do out[#out + 1] = value end
  else
    redis.call('ZREM', KEYS[1], id)  -- an index entry without its record: drop it
  end
end
return out
"""

RANGE = """
-- KEYS: listing index | ARGV: 'desc'|'asc', exclusive bound or '', count (-1: all),
--                            document key prefix
-- Returns the documents in index order (desc: newest first), read in one atomic step.
local members
if ARGV[1] == 'desc' then
  local top = ARGV[2] ~= '' and ('(' .. ARGV[2]) or '+'
  members = redis.call('ZREVRANGEBYLEX', KEYS[1], top, '-', 'LIMIT', 0, ARGV[3])
else
  local bottom = ARGV[2] ~= '' and ('(' .. ARGV[2]) or '-'
  members = redis.call('ZRANGEBYLEX', KEYS[1], bottom, '+', 'LIMIT', 0, ARGV[3])
end
local out = {}
for _, m in ipairs(members) do
  local id = string.sub(m, string.find(m, ':', 1, true) + 1)
  local doc = redis.call('HGET', ARGV[4] .. id, 'doc')
  if doc then
    out[#out + 1] = m
    out[#out + 1] = doc
  end
end
return out
"""

_DEDUPE_FN = """
-- The stored value is the expiry in the caller's clock (injected time decides); PX lets
-- Redis drop the key on its own once the window has passed.
local function add_dedupe(key, now_ms, expires_ms, ttl_ms)
  local expires = redis.call('GET', key)
  if expires and tonumber(expires) > tonumber(now_ms) then return 0 end
  redis.call('SET', key, expires_ms, 'PX', ttl_ms)
  return 1
end
"""

_GROUP_FNS = """
-- Groups (SPEC 19): hash {prefix}group:{id} (its contract's callback id; kept after it closes
-- until retention prunes the contract) with key (its group-open key), last and sent (ms), fires,
-- max, interval, closed, n (follow-ups sent); the set {prefix}group-resolved:{id} of members the
-- source reported over; the list {prefix}group-joins:{id}
-- of members that joined after the page and reached nobody yet; the string {prefix}group-open:{key}
-- naming the key's open group; the sorted set group-due of groups whose joins' follow-up is due.
local function close_group(prefix, gid, openkey)
  redis.call('HSET', prefix .. 'group:' .. gid, 'closed', '1')
  if redis.call('GET', openkey) == gid then redis.call('DEL', openkey) end
end
-- The key's group that takes a fire at now_ms (closing one gone quiet, full or pruned), or nil.
local function open_group(prefix, openkey, now_ms)
  local gid = redis.call('GET', openkey)
  if not gid then return nil end
  local f = redis.call('HMGET', prefix .. 'group:' .. gid, 'last', 'interval', 'fires', 'max')
  if f[1] and tonumber(now_ms) - tonumber(f[1]) < tonumber(f[2]) and tonumber(f[3]) < tonumber(f[4])
      and redis.call('EXISTS', prefix .. 'contract:' .. gid) == 1 then
    return gid
  end
  close_group(prefix, gid, openkey)
  return nil
end
-- The group's contract text in its three parts (before ,"fires":N; N; the members' text), or nil
-- when Sentinel did not write it. Found with plain finds: a pattern such as '^(.*),"fires":'
-- backtracks through the whole text, 0.45 ms per join at 1,000 members (a storm's every alert).
local function group_text(prefix, gid)
  local doc = redis.call('HGET', prefix .. 'contract:' .. gid, 'doc')
  if not doc or string.sub(doc, -3) ~= ']}}' then return nil end
  local at, found = 1, nil
  while true do  -- the last ,"members":[ is the group's (a member id holds no quote)
    local i = string.find(doc, ',"members":[', at, true)
    if not i then break end
    found, at = i, i + 1
  end
  if not found then return nil end
  local n = string.match(string.sub(doc, math.max(1, found - 32), found - 1), ',"fires":(%d+)$')
  if not n then return nil end
  return {string.sub(doc, 1, found - 1 - #(',"fires":' .. n)), n, string.sub(doc, found + 12, #doc - 3)}
end
-- Members cids (joined from first_ms to last_ms) join group gid: the group's record counts and
-- lists them, its text written once (edited in place: fires and members are its last keys); after
-- the page they wait for a follow-up; full closes the group.
local function join_group(prefix, gid, cids, first_ms, last_ms, openkey, duekey, text)
  local g, ckey = prefix .. 'group:' .. gid, prefix .. 'contract:' .. gid
  local head, n, members = text[1], text[2], text[3]
  local sep = members == '' and '' or ','
  redis.call('HSET', ckey, 'doc', head .. ',"fires":' .. (tonumber(n) + #cids) .. ',"members":[' ..
    members .. sep .. '"' .. table.concat(cids, '","') .. '"]}}')
  local fires = redis.call('HINCRBY', g, 'fires', #cids)
  redis.call('HSET', g, 'last', last_ms)
  local state = redis.call('HGET', ckey, 'state')
  if state ~= 'pending' and state ~= 'awaiting_approval' then
    for i = 1, #cids, 1000 do
      redis.call('RPUSH', prefix .. 'group-joins:' .. gid, unpack(cids, i, math.min(i + 999, #cids)))
    end
    if not redis.call('ZSCORE', duekey, gid) then
      local f = redis.call('HMGET', g, 'sent', 'interval')
      redis.call('ZADD', duekey, math.max(tonumber(first_ms), tonumber(f[1]) + tonumber(f[2])), gid)
    end
  end
  if fires >= tonumber(redis.call('HGET', g, 'max')) then close_group(prefix, gid, openkey) end
  return true
end
"""

ACCEPT_CONTRACT = (
    _DEDUPE_FN
    + _ENQUEUE_FN
    + _GROUP_FNS
    + """
-- KEYS: contract hash, contract-due, index all, by watcher, by state (the contract's),
--       by state+watcher (the contract's), by state deduped, by state+watcher deduped, dedupe key,
--       delivery-due, the group key's open group, group-due, by state grouped, by state+watcher
--       grouped, then one per checkpoint
-- ARGV: callback id, doc, deduped doc ('' without a dedupe check), envelope, index member, due_ms,
--       '1' to check the dedupe key (else '0'), now_ms, expires_ms, ttl_ms,
--       the contract's state ('pending', or 'silenced': final, never due), deliveries as one JSON
--       array (each [its hash, its callback index, key, doc, state, due_ms|'', index member]),
--       '1' to group the fire ('2': join an open group only, else refused; '0': no group),
--       a member's doc (its groupId ""), the group's interval_ms and max_fires, the key prefix,
--       then one value per checkpoint
-- Returns '' when the callback id exists (nothing written), {'refused', ''} for a join-only
-- fire that no group takes (nothing written), else {the state stored, the group a grouped fire
-- joined or ''}.
if redis.call('EXISTS', KEYS[1]) == 1 then return '' end
local prefix, gid, group_text_of = ARGV[17], nil, nil
if ARGV[13] == '2' then  -- join only: refused before any write when no group takes the fire
  gid = open_group(prefix, KEYS[11], ARGV[8])
  group_text_of = gid and group_text(prefix, gid)
  if not group_text_of then return {'refused', ''} end
end
local fresh = ARGV[7] ~= '1' or add_dedupe(KEYS[9], ARGV[8], ARGV[9], ARGV[10]) == 1
local state, doc, by_state, by_both = ARGV[11], ARGV[2], KEYS[5], KEYS[6]
if not fresh then state, doc, by_state, by_both = 'deduped', ARGV[3], KEYS[7], KEYS[8] end
if not fresh then gid = nil end
if fresh and ARGV[13] ~= '0' then
  gid = gid or open_group(prefix, KEYS[11], ARGV[8])
  if gid then
    group_text_of = group_text_of or group_text(prefix, gid)
    if not group_text_of then  -- checked before any write: the fire stands alone, never lost
      redis.log(redis.LOG_WARNING,
        'sentinel: contract ' .. gid .. ' has a record Sentinel did not write; a fire opens a new group')
      gid = nil
    end
  end
  if gid then
    state, by_state, by_both = 'grouped', KEYS[13], KEYS[14]
    doc = string.gsub(ARGV[14], '"groupId":""', '"groupId":"' .. gid .. '"', 1)
  end
end
redis.call('HSET', KEYS[1], 'doc', doc, 'envelope', ARGV[4], 'state', state)
for _, index in ipairs({KEYS[3], KEYS[4], by_state, by_both}) do
  redis.call('ZADD', index, 0, ARGV[5])
end
if gid then
  join_group(prefix, gid, {ARGV[1]}, ARGV[8], ARGV[8], KEYS[11], KEYS[12], group_text_of)
  return {state, gid}
end
if ARGV[13] == '1' and fresh then
  redis.call('HSET', prefix .. 'group:' .. ARGV[1], 'key', KEYS[11], 'last', ARGV[8], 'sent', ARGV[8],
    'fires', 1, 'max', ARGV[16], 'interval', ARGV[15], 'closed', '0', 'n', 0)
  redis.call('SET', KEYS[11], ARGV[1])
  if tonumber(ARGV[16]) <= 1 then close_group(prefix, ARGV[1], KEYS[11]) end
end
if state == 'pending' then
  redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
  for i = 15, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 3]) end
  for _, d in ipairs(cjson.decode(ARGV[12])) do
    enqueue(d[1], d[2], KEYS[10], d[3], d[4], d[5], d[6], d[7])
  end
end
return {state, ''}
"""
)

CREATE_INBOX_ITEM = (
    _ENQUEUE_FN
    + """
-- KEYS: item hash, history list, index all, by status, by kind, by status+kind, delivery-due
-- ARGV: doc, status, kind, index member, first history entry, deliveries as one JSON array, each
--   [its hash, its callback index, key, doc, state, due_ms|'', index member]
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'status', ARGV[2], 'kind', ARGV[3], 'version', 1)
redis.call('RPUSH', KEYS[2], ARGV[5])
for i = 3, 6 do redis.call('ZADD', KEYS[i], 0, ARGV[4]) end
for _, d in ipairs(cjson.decode(ARGV[6])) do
  enqueue(d[1], d[2], KEYS[7], d[3], d[4], d[5], d[6], d[7])
end
return 1
"""
)

TRANSITION_INBOX_ITEM = """
-- KEYS: item hash, history list, by old status, by new status,
--       by old status+kind, by new status+kind
-- ARGV: expected version, new doc, new status, history entry, index member
-- Optimistic: the caller built the new doc from the version it read; 0 means "read again".
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'status', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('RPUSH', KEYS[2], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[4], 0, ARGV[5])
redis.call('ZREM', KEYS[5], ARGV[5])
redis.call('ZADD', KEYS[6], 0, ARGV[5])
return 1
"""

UPDATE_DELIVERIES = (
    _CONTRACT_FNS
    + """
-- KEYS: delivery-due | ARGV[1]: a JSON array, per delivery: [its hash, key, doc, state, due_ms|'',
--   callback id, outcome instant]; ARGV[2]: the key prefix.
-- Returns {keys that exist (and were updated), {callback id, state} of contracts moved}: a notify
-- delivery that ends here moves its contract (``notify_ended``).
local done, ended, moved = {}, {}, {}
for _, d in ipairs(cjson.decode(ARGV[1])) do
  if redis.call('EXISTS', d[1]) == 1 then
    if d[4] ~= 'pending' and is_notify(d[2]) and redis.call('HGET', d[1], 'state') == 'pending' then
      ended[#ended + 1] = {d[6], d[4] == 'delivered', d[7]}
    end
    redis.call('HSET', d[1], 'doc', d[3], 'state', d[4])
    if d[5] ~= '' then
      redis.call('ZADD', KEYS[1], d[5], d[2])
    else
      redis.call('ZREM', KEYS[1], d[2])
    end
    done[#done + 1] = d[2]
  end
end
for _, e in ipairs(ended) do
  local after = notify_ended(ARGV[2], e[1], e[2], e[3])
  if after then moved[#moved + 1] = e[1]; moved[#moved + 1] = after end
end
return {done, moved}
"""
)

RECORD_OUTCOMES = (
    _CONTRACT_FNS
    + """
-- KEYS: delivery-due | ARGV[1]: a JSON array, per outcome: [its hash, key, state, due_ms|'', tail,
--   callback id, outcome instant]; ARGV[2]: the key prefix
-- ``tail`` is the record's new JSON from its "state" field to the end; the stored record keeps
-- what comes before (key, callbackId, target, kind, message: what an attempt never changes).
-- Every field after ``message`` is a plain value, so the last ',"state":"' in the text is that
-- field's (a quote inside a JSON string is escaped). Returns {keys updated, keys left alone
-- because their record did not have that shape, {callback id, state} of contracts moved}; unknown
-- keys are in neither. A notify delivery that ends here moves its contract (``notify_ended``).
local done, odd, ended, moved = {}, {}, {}, {}
for _, d in ipairs(cjson.decode(ARGV[1])) do
  local found = redis.call('HMGET', d[1], 'doc', 'state')
  local doc = found[1]
  if doc then
    local cut, from = nil, 1
    while true do
      local at = string.find(doc, ',"state":"', from, true)
      if not at then break end
      cut, from = at, at + 1
    end
    if cut then
      if d[3] ~= 'pending' and found[2] == 'pending' and is_notify(d[2]) then
        ended[#ended + 1] = {d[6], d[3] == 'delivered', d[7]}
      end
      redis.call('HSET', d[1], 'doc', string.sub(doc, 1, cut) .. d[5], 'state', d[3])
      if d[4] ~= '' then
        redis.call('ZADD', KEYS[1], d[4], d[2])
      else
        redis.call('ZREM', KEYS[1], d[2])
      end
      done[#done + 1] = d[2]
    else
      odd[#odd + 1] = d[2]
    end
  end
end
for _, e in ipairs(ended) do
  local after = notify_ended(ARGV[2], e[1], e[2], e[3])
  if after then moved[#moved + 1] = e[1]; moved[#moved + 1] = after end
end
return {done, odd, moved}
"""
)


WRITE_WATCHER_BATCH = """
-- KEYS[1]: watcher-states hash, KEYS[2..]: the history list of each observation, in order
-- ARGV[1]: keep | ARGV[2]: number of states n | then n triples (watcher id, 'put'|'del', JSON)
--   | then one JSON document per observation (the newest is pushed last)
-- One command for a batch of polls: MULTI with an LPUSH and an LTRIM per observation cost the
-- service a packed command and a parsed reply each. Returns the number of observations.
local keep = tonumber(ARGV[1])
local at = 3
for _ = 1, tonumber(ARGV[2]) do
  if ARGV[at + 1] == 'del' then
    redis.call('HDEL', KEYS[1], ARGV[at])
  else
    redis.call('HSET', KEYS[1], ARGV[at], ARGV[at + 2])
  end
  at = at + 3
end
for k = 2, #KEYS do
  redis.call('LPUSH', KEYS[k], ARGV[at])
  at = at + 1
end
local trimmed = {}
for k = 2, #KEYS do
  if not trimmed[KEYS[k]] then
    redis.call('LTRIM', KEYS[k], 0, keep - 1)
    trimmed[KEYS[k]] = true
  end
end
return #KEYS - 1
"""

TRIGGER_PRIORITIES = """
-- KEYS: contract hashes | Returns the distinct trigger priorities of the records found, then
-- the 1-based index of each record cjson could not read as an object (the client reads those
-- itself), after a 0: {p1, p2, ..., 0, i, j, ...}. A group's session reads its members' on
-- every notify: a pipelined HGET per member, each record parsed by the service, took 60 ms of
-- its event loop for a thousand members; decoded here they cost Redis a few ms and no reply.
local found, seen, unread = {}, {}, {}
for i, key in ipairs(KEYS) do
  local doc = redis.call('HGET', key, 'doc')
  if doc then
    local ok, record = pcall(cjson.decode, doc)
    if ok and type(record) == 'table' then
      local trigger = record['trigger']
      local priority = type(trigger) == 'table' and trigger['priority'] or nil
      if type(priority) == 'string' and not seen[priority] then
        seen[priority] = true
        found[#found + 1] = priority
      end
    else
      unread[#unread + 1] = i
    end
  end
end
found[#found + 1] = 0
for _, i in ipairs(unread) do found[#found + 1] = i end
return found
"""

# -- KEYS / ARGV builders: the positional contract of each script, next to the script ---------

Call = tuple[list[str], list[Any]]


def delivery_args(d: Delivery) -> list[Any]:
    """``key, doc, state, due_ms|'', index member`` of a delivery (ENQUEUE / UPDATE / SETTLE)."""
    due = to_epoch_ms(d.next_attempt_at) if d.state == "pending" else ""
    member = sort_member(to_epoch_ms(d.created_at), d.key)
    return [d.key, codec.dump_record(d), d.state, due, member]


def enqueue_delivery_call(k: RedisKeys, d: Delivery) -> Call:
    """ENQUEUE_DELIVERY for ``d``."""
    return [k.delivery(d.key), k.delivery_index(d.callback_id), k.delivery_due], delivery_args(d)


def _json_arg(rows: list[list[Any]]) -> str:
    """Rows of strings as the one JSON argument of a batch script (decoded by ``cjson`` there)."""
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


def update_deliveries_call(k: RedisKeys, updated: Sequence[Delivery]) -> Call:
    """UPDATE_DELIVERIES writing each of ``updated``."""
    rows = []
    for d in updated:
        key, doc, state, due, _ = delivery_args(d)
        rows.append([k.delivery(key), key, doc, state, str(due), d.callback_id, iso(d.updated_at)])
    return [k.delivery_due], [_json_arg(rows), k.prefix]


def outcome_tail(claimed: Delivery, outcome: DeliveryOutcome) -> str:
    """The JSON of ``claimed`` after ``outcome`` from its ``"state"`` field to the end: exactly
    the fields an attempt changes, plus ``createdAt`` that sits among them (RECORD_OUTCOMES)."""
    fields = {
        "state": outcome.state,
        "attempts": outcome.attempts,
        "nextAttemptAt": iso(utc_ms(outcome.next_attempt_at)),
        "createdAt": iso(claimed.created_at),
        "updatedAt": iso(utc_ms(outcome.at)),
        "lastError": outcome.last_error,
    }
    return codec.dumps(fields, what=f"outcome of delivery {outcome.key!r}")[1:]


def record_outcomes_call(k: RedisKeys, claimed: Sequence[tuple[Delivery, DeliveryOutcome]]) -> Call:
    """RECORD_OUTCOMES for outcomes whose claimed delivery is at hand."""
    rows = []
    for delivery, o in claimed:
        due = str(to_epoch_ms(o.next_attempt_at)) if o.state == "pending" else ""
        tail = outcome_tail(delivery, o)
        rows.append([k.delivery(o.key), o.key, o.state, due, tail, delivery.callback_id, iso(utc_ms(o.at))])
    return [k.delivery_due], [_json_arg(rows), k.prefix]


def settle_contracts_call(
    k: RedisKeys,
    settlements: Sequence[tuple[Contract, SettledState, Sequence[Delivery]]],
    at: datetime,
    *,
    docs: Mapping[str, str] | None = None,
) -> Call:
    """SETTLE_CONTRACTS moving each pending contract to its state, settled at ``at``, and
    enqueueing its deliveries; the records are changed in place unless ``docs`` (by callback
    id) gives the new ones."""
    rows: list[list[Any]] = []
    settled_at = iso(utc_ms(at))
    for pending, state, deliveries in settlements:
        cid, wid = pending.callback_id, pending.watcher_id
        outbox = delivery_rows(k, deliveries)
        rows.append(
            [
                cid,
                state,
                "" if docs is None else docs[cid],
                sort_member(to_epoch_ms(pending.created_at), cid),
                k.contract(cid),
                k.contract_index(None, "pending"),
                k.contract_index(None, state),
                k.contract_index(wid, "pending"),
                k.contract_index(wid, state),
                outbox,
                settled_at,
            ]
        )
    return [k.contract_due, k.delivery_due], [_json_arg(rows)]


def create_inbox_item_call(k: RedisKeys, item: InboxItem, deliveries: Sequence[Delivery] = ()) -> Call:
    """CREATE_INBOX_ITEM for ``item``, its first history entry and its deliveries."""
    keys = [
        k.inbox_item(item.id),
        k.inbox_history(item.id),
        k.inbox_index(None, None),
        k.inbox_index(item.status, None),
        k.inbox_index(None, item.kind),
        k.inbox_index(item.status, item.kind),
        k.delivery_due,
    ]
    args = [
        codec.dump_record(item),
        item.status,
        item.kind,
        sort_member(to_epoch_ms(item.created_at), item.id),
        codec.dump_record(first_history_entry(item)),
        _json_arg(delivery_rows(k, deliveries)),
    ]
    return keys, args


def transition_inbox_item_call(
    k: RedisKeys, item: InboxItem, version: str, moved: InboxItem, entry: InboxHistoryEntry
) -> Call:
    """TRANSITION_INBOX_ITEM from ``item`` (read at ``version``) to ``moved``."""
    old, new, kind = item.status, moved.status, item.kind
    keys = [
        k.inbox_item(item.id),
        k.inbox_history(item.id),
        k.inbox_index(old, None),
        k.inbox_index(new, None),
        k.inbox_index(old, kind),
        k.inbox_index(new, kind),
    ]
    member = sort_member(to_epoch_ms(item.created_at), item.id)
    return keys, [version, codec.dump_record(moved), new, codec.dump_record(entry), member]


def deduped_doc(pending_doc: str, pending: Contract) -> str:
    """The record of ``as_deduped(pending)`` made from ``pending``'s dumped record by swapping two
    values in the text (each of these keys occurs once in a contract's JSON, and a quote inside
    a JSON string is escaped), instead of a copy and a second dump on every accepted callback."""
    tokens = ('"state":"pending"', '"settledAt":null')
    if all(pending_doc.count(token) == 1 for token in tokens):
        settled = f'"settledAt":"{iso(pending.created_at)}"'
        return pending_doc.replace(tokens[0], '"state":"deduped"').replace(tokens[1], settled)
    return codec.dump_record(as_deduped(pending))  # pragma: no cover  (every dump has both tokens)


def accept_contract_call(
    k: RedisKeys,
    pending: Contract,
    envelope_text: str,
    dedupe: tuple[str, int] | None,
    checkpoints: Sequence[tuple[str, str]],
    deliveries: Sequence[Delivery] = (),
    group: GroupRequest | None = None,
) -> Call:
    """ACCEPT_CONTRACT for ``pending`` (or its deduped record, or its record as a member of the
    group it joins; or a silenced contract, stored as it is) and the deliveries it brings;
    ``dedupe`` is ``(key, ttl_ms)``."""
    cid, wid = pending.callback_id, pending.watcher_id
    keys = [
        k.contract(cid),
        k.contract_due,
        k.contract_index(None, None),
        k.contract_index(wid, None),
        k.contract_index(None, pending.state),
        k.contract_index(wid, pending.state),
        k.contract_index(None, "deduped"),
        k.contract_index(wid, "deduped"),
        k.dedupe(dedupe[0] if dedupe else ""),
        k.delivery_due,
        k.group_open(group.key if group else ""),
        k.group_due,
        k.contract_index(None, "grouped"),
        k.contract_index(wid, "grouped"),
    ]
    now_ms = to_epoch_ms(pending.created_at)
    ttl_ms = dedupe[1] if dedupe else 0
    pending_doc = codec.dump_record(pending)
    args: list[Any] = [
        cid,
        pending_doc,
        deduped_doc(pending_doc, pending) if dedupe else "",
        envelope_text,
        sort_member(now_ms, cid),
        to_epoch_ms(pending.deadline),
        "1" if dedupe else "0",
        now_ms,
        now_ms + ttl_ms,
        ttl_ms,
        pending.state,
        _json_arg(delivery_rows(k, deliveries)),
        ("2" if group.join_only else "1") if group else "0",
        codec.dump_record(as_member(pending, "")) if group else "",
        group.interval_ms if group else 0,
        group.max_fires if group else 0,
        k.prefix,
    ]
    for key, text in checkpoints:
        keys.append(k.checkpoint(key))
        args.append(text)
    return keys, args


BEGIN_NOTIFY = (
    _ENQUEUE_FN
    + _CONTRACT_FNS
    + """
-- KEYS: delivery-due | ARGV: key prefix, callback id, deliveries as one JSON array, each
--   [its hash, its callback index, key, doc, state, due_ms|'', index member], '1' for a follow-up
-- A contract that takes a notify (``contract_states.after_notify``) gets its deliveries and
-- ``pending`` becomes ``notifying``. The page is decided here: a page candidate is taken only
-- while none is in flight (pending; awaiting_approval with no notify pending), a follow-up by a
-- contract with one in flight or settled (notifying, fulfilled, fallback_sent, expired;
-- awaiting_approval with a notify pending).
-- Returns {} for an unknown id, else {state before, state after, '1' taken | '0' refused, keys
-- enqueued...} (nothing enqueued when it refused: after == before).
local before = redis.call('HGET', ARGV[1] .. 'contract:' .. ARGV[2], 'state')
if not before then return {} end
local takes = {pending = 'notifying'}
if ARGV[4] == '1' then
  takes = {notifying = 'notifying', fulfilled = 'fulfilled', fallback_sent = 'fallback_sent',
           expired = 'expired'}
end
if before == 'awaiting_approval' and (ARGV[4] == '1') == notifies_pending(ARGV[1], ARGV[2]) then
  takes = {awaiting_approval = 'awaiting_approval'}
end
local after = takes[before]
if not after then return {before, before, '0'} end
local out = {before, after, '1'}
for _, d in ipairs(cjson.decode(ARGV[3])) do
  if enqueue(d[1], d[2], KEYS[1], d[3], d[4], d[5], d[6], d[7]) == 1 then out[#out + 1] = d[3] end
end
if after ~= before then move(ARGV[1], ARGV[2], before, after, '', '') end
return out
"""
)

RESOLVE_CONTRACT = (
    _ENQUEUE_FN
    + _CONTRACT_FNS
    + """
-- KEYS: delivery-due | ARGV: key prefix, callback id, settled-at instant (ISO), deliveries as one
--   JSON array (rows as in BEGIN_NOTIFY)
-- ``contract_states.after_resolved``: pending -> resolved (settled, out of contract-due)
-- with its deliveries enqueued; any other state is left alone. Returns {} for an unknown id, else
-- {state before, state after}.
local before = redis.call('HGET', ARGV[1] .. 'contract:' .. ARGV[2], 'state')
if not before then return {} end
if before ~= 'pending' then return {before, before} end
move(ARGV[1], ARGV[2], before, 'resolved', ARGV[3], '')
for _, d in ipairs(cjson.decode(ARGV[4])) do
  enqueue(d[1], d[2], KEYS[1], d[3], d[4], d[5], d[6], d[7])
end
return {before, 'resolved'}
"""
)

CONTRACT_STEP = (
    _CONTRACT_FNS
    + """
-- ARGV: key prefix, callback id, 'pause' | 'resume', the new deadline (ISO, resume only)
-- pause: pending/notifying -> awaiting_approval; resume: awaiting_approval -> pending with the
-- new deadline (notifying while a notify delivery is pending). Returns {} for an unknown id,
-- else {state before, state after}.
local prefix, cid = ARGV[1], ARGV[2]
local before = redis.call('HGET', prefix .. 'contract:' .. cid, 'state')
if not before then return {} end
local after = nil
if ARGV[3] == 'pause' then
  if before == 'pending' or before == 'notifying' then after = 'awaiting_approval' end
elseif before == 'awaiting_approval' then
  after = notifies_pending(prefix, cid) and 'notifying' or 'pending'
end
if after then move(prefix, cid, before, after, '', ARGV[4] or '') end
return {before, after or before}
"""
)


def delivery_rows(k: RedisKeys, deliveries: Sequence[Delivery]) -> list[list[Any]]:
    """Deliveries as rows for the ``enqueue`` function: [hash, callback index, key, doc, state,
    due_ms|'', index member]."""
    rows = []
    for d in deliveries:
        key, doc, state, due, member = delivery_args(d)
        rows.append([k.delivery(key), k.delivery_index(d.callback_id), key, doc, state, str(due), member])
    return rows


def begin_notify_call(
    k: RedisKeys, callback_id: str, deliveries: Sequence[Delivery], *, follow_up: bool = False
) -> Call:
    """BEGIN_NOTIFY for ``callback_id`` and its deliveries (a page candidate or a follow-up)."""
    rows = _json_arg(delivery_rows(k, deliveries))
    return [k.delivery_due], [k.prefix, callback_id, rows, "1" if follow_up else "0"]


def resolve_contract_call(
    k: RedisKeys, callback_id: str, deliveries: Sequence[Delivery], at: datetime
) -> Call:
    """RESOLVE_CONTRACT for ``callback_id``, settled at ``at``, and its deliveries."""
    return [k.delivery_due], [k.prefix, callback_id, iso(utc_ms(at)), _json_arg(delivery_rows(k, deliveries))]


def write_watcher_batch_call(
    k: RedisKeys, observations: Sequence[tuple[str, str]], states: Sequence[tuple[str, str | None]], keep: int
) -> Call:
    """WRITE_WATCHER_BATCH for ``(watcher id, observation JSON)`` in order and ``(watcher id,
    state JSON | None to delete)``."""
    args: list[Any] = [keep, len(states)]
    for watcher_id, text in states:
        args += (watcher_id, "del", "") if text is None else (watcher_id, "put", text)
    args += [doc for _, doc in observations]
    return [k.watcher_states, *(k.observations(wid) for wid, _ in observations)], args
