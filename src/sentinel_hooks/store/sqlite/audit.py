"""The SQLite store's audit trail (``AuditStore``, SPEC.md §21): one table keyed by ``(at_ms, id)``,
an index by actor; mixed into ``SqliteStore``."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from functools import partial
from typing import Any

from sentinel_hooks.store import codec
from sentinel_hooks.store.audit import AuditEntry
from sentinel_hooks.store.paging import check_positive, decode_cursor, to_page
from sentinel_hooks.store.records import Page, to_epoch_ms
from sentinel_hooks.store.sqlite.worker import SqliteWorker


def _page(
    c: sqlite3.Connection, since_ms: int | None, actor: str | None, after: tuple[int, str] | None, fetch: int
) -> list[tuple[int, str, str]]:
    where, args = ["1"], {"fetch": fetch, "since": since_ms, "actor": actor, "ms": None, "id": None}
    if since_ms is not None:
        where.append("at_ms >= :since")
    if actor is not None:
        where.append("actor = :actor")
    if after is not None:
        where.append("(at_ms, id) < (:ms, :id)")
        args.update(ms=after[0], id=after[1])
    sql = f"""SELECT at_ms, id, doc FROM audit WHERE {" AND ".join(where)}
        ORDER BY at_ms DESC, id DESC LIMIT :fetch"""
    return [(int(ms), str(i), str(doc)) for ms, i, doc in c.execute(sql, args)]


def _prune(c: sqlite3.Connection, before_ms: int, limit: int) -> int:
    sql = """DELETE FROM audit WHERE (at_ms, id) IN
        (SELECT at_ms, id FROM audit WHERE at_ms < ? ORDER BY at_ms, id LIMIT ?)"""
    return c.execute(sql, (before_ms, limit)).rowcount


class SqliteAudit:
    """``AuditStore`` on the store's worker."""

    _db: SqliteWorker

    async def add_audit(self, entry: AuditEntry) -> None:
        """See ``AuditStore.add_audit``."""
        row: Any = (to_epoch_ms(entry.at), entry.id, entry.actor, codec.dump_record(entry))
        sql = "INSERT INTO audit (at_ms, id, actor, doc) VALUES (?, ?, ?, ?)"
        await self._db.write("add audit", lambda c: c.execute(sql, row).rowcount)

    async def list_audit(
        self,
        *,
        since: datetime | None = None,
        actor: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[AuditEntry]:
        """See ``AuditStore.list_audit``."""
        after = None if cursor is None else decode_cursor(cursor)
        since_ms = None if since is None else to_epoch_ms(since)
        read = partial(_page, since_ms=since_ms, actor=actor, after=after, fetch=check_positive(limit) + 1)
        rows = await self._db.read("list audit", read)
        return to_page(rows, limit, lambda doc: codec.load_record(AuditEntry, doc))

    async def prune_audit(self, before: datetime, *, limit: int = 500) -> int:
        """See ``AuditStore.prune_audit``."""
        return await self._db.write(
            "prune audit", partial(_prune, before_ms=to_epoch_ms(before), limit=check_positive(limit))
        )
