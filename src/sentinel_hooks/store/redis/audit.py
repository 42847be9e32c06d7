"""The Redis store's audit trail (``AuditStore``, SPEC.md §21): a lex-ordered zset of
``{at_ms:015d}:{id}`` members for listing and pruning, a hash of the entries; mixed into
``RedisStore``. A listing filtered by actor reads the index in batches and keeps the actor's."""

from __future__ import annotations

from datetime import datetime

from sentinel_hooks.store import codec
from sentinel_hooks.store.audit import AuditEntry
from sentinel_hooks.store.paging import (
    check_positive,
    decode_cursor,
    encode_cursor,
    sort_member,
    split_member,
)
from sentinel_hooks.store.records import Page, to_epoch_ms
from sentinel_hooks.store.redis.connection import RedisConnection, as_text
from sentinel_hooks.store.redis.keys import RedisKeys

BATCH = 200  # index members read per round trip of a filtered listing


class RedisAudit:
    """``AuditStore`` on the store's connection."""

    _db: RedisConnection
    keys: RedisKeys

    async def add_audit(self, entry: AuditEntry) -> None:
        """See ``AuditStore.add_audit`` (the index member and the entry in one MULTI)."""
        member = sort_member(to_epoch_ms(entry.at), entry.id)
        async with self._db.translated("add audit"), self._db.client.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.audit_docs, entry.id, codec.dump_record(entry))
            pipe.zadd(self.keys.audit, {member: 0})
            await pipe.execute()

    async def list_audit(
        self,
        *,
        since: datetime | None = None,
        actor: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[AuditEntry]:
        """See ``AuditStore.list_audit``."""
        check_positive(limit)
        top = "+" if cursor is None else "(" + sort_member(*decode_cursor(cursor))
        bottom = "-" if since is None else "[" + sort_member(to_epoch_ms(since), "")
        found: list[tuple[str, AuditEntry]] = []
        client = self._db.client
        while len(found) <= limit:
            async with self._db.translated("list audit"):
                members = [
                    as_text(m) for m in await client.zrevrangebylex(self.keys.audit, top, bottom, 0, BATCH)
                ]
                docs = (
                    await client.hmget(self.keys.audit_docs, [split_member(m)[1] for m in members])
                    if members
                    else []
                )
            for member, doc in zip(members, docs, strict=True):
                if doc is None:
                    continue  # pruned between the two reads
                entry = codec.load_record(AuditEntry, as_text(doc))
                if actor is None or entry.actor == actor:
                    found.append((member, entry))
            if len(members) < BATCH:
                break
            top = "(" + members[-1]
        shown = found[:limit]
        next_cursor = encode_cursor(*split_member(shown[-1][0])) if len(found) > limit else None
        return Page(items=[e for _, e in shown], next_cursor=next_cursor)

    async def prune_audit(self, before: datetime, *, limit: int = 500) -> int:
        """See ``AuditStore.prune_audit`` (ZREM counts what this call removed, so racing replicas
        count each entry once)."""
        client = self._db.client
        top = "(" + sort_member(to_epoch_ms(before), "")
        async with self._db.translated("prune audit"):
            members = [
                as_text(m)
                for m in await client.zrangebylex(self.keys.audit, "-", top, 0, check_positive(limit))
            ]
            if not members:
                return 0
            async with client.pipeline(transaction=True) as pipe:
                pipe.zrem(self.keys.audit, *members)
                pipe.hdel(self.keys.audit_docs, *[split_member(m)[1] for m in members])
                removed, _ = await pipe.execute()
        return int(removed)
