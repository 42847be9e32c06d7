"""The SQLite store's prune steps (``Store.prune``; the rules: ``store.pruning``), as plain
functions of a connection, each run in one ``BEGIN IMMEDIATE`` transaction by ``SqliteStore``.

Candidates are read through the indexes the listings already use (state or status, then
creation time), oldest first and at most ``limit`` of them, so a step costs about the same
however much the file holds. Instants in records are ISO text of one fixed width: text order is
time order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from sentinel_hooks.store.pruning import (
    CLOSED_INBOX_STATUSES,
    OPEN_CONTRACT_STATES,
    PRUNED_CONTRACT_STATES,
    TRIM_PER_CONTRACT,
    Pruned,
    older,
)
from sentinel_hooks.store.sqlite.queries import IN_CHUNK

Conn = sqlite3.Connection
_CHECKPOINTS = "DELETE FROM checkpoints WHERE session_key IN"

_OLD_CONTRACTS = """SELECT callback_id, json_extract(doc, '$.sessionKey') FROM contracts AS c
    WHERE state = ? AND created_ms < ? AND COALESCE(json_extract(doc, '$.settledAt'), '') < ?
        AND NOT EXISTS (SELECT 1 FROM deliveries AS d
            WHERE d.callback_id = c.callback_id AND d.state = 'pending')
    ORDER BY created_ms LIMIT ?"""


def prune_contracts(c: Conn, cutoff_ms: int, cutoff: str, limit: int, checkpoints: Sequence[str]) -> Pruned:
    """Delete up to ``limit`` old settled contracts, oldest first (in each state), with their
    deliveries, ``checkpoints`` (prefixes + callback id) and leading transcript entries."""
    chosen: list[tuple[str, str | None]] = []
    for state in PRUNED_CONTRACT_STATES:
        if len(chosen) < limit:
            chosen += c.execute(_OLD_CONTRACTS, (state, cutoff_ms, cutoff, limit - len(chosen))).fetchall()
    ids = [cid for cid, _ in chosen]
    deliveries = _delete_in(c, "DELETE FROM deliveries WHERE callback_id IN", ids)
    _delete_in(c, "DELETE FROM contracts WHERE callback_id IN", ids)
    _delete_in(c, "DELETE FROM feedback WHERE callback_id IN", ids)
    _delete_in(c, "DELETE FROM groups WHERE group_id IN", ids)  # a pruned group's (SPEC §19)
    _delete_in(c, _CHECKPOINTS, [p + cid for cid in ids for p in checkpoints])
    cap = TRIM_PER_CONTRACT * len(ids)
    trimmed = 0
    for session in dict.fromkeys(session for _, session in chosen if session is not None):
        trimmed += _trim_head(c, session, cutoff, cap - trimmed)
    return Pruned(
        contracts=len(ids),
        deliveries=deliveries,
        transcript_entries=trimmed,
        more=len(ids) == limit or trimmed == cap > 0,
    )


def _trim_head(c: Conn, session: str, cutoff: str, cap: int) -> int:
    """Delete the session's leading entries older than ``cutoff`` whose callback no longer exists
    (at most ``cap``); the sessions row keeps the last seq, so numbering goes on after them."""
    rows = c.execute(
        """SELECT seq, json_extract(doc, '$.at'), json_extract(doc, '$.entry.callbackId')
            FROM transcripts WHERE session_key = ? ORDER BY seq LIMIT ?""",
        (session, cap),
    ).fetchall()
    last: int | None = None
    known: dict[str, bool] = {}
    for seq, at, callback_id in rows:
        if not isinstance(at, str) or not older(at, cutoff):
            break
        if isinstance(callback_id, str):
            if callback_id not in known:
                found = c.execute("SELECT 1 FROM contracts WHERE callback_id = ?", (callback_id,)).fetchone()
                known[callback_id] = found is not None
            if known[callback_id]:
                break
        last = seq
    if last is None:
        return 0
    return c.execute("DELETE FROM transcripts WHERE session_key = ? AND seq <= ?", (session, last)).rowcount


_OLD_ITEMS = """SELECT id FROM inbox_items AS i WHERE status = ? AND created_ms < ?
    AND json_extract(doc, '$.updatedAt') < ?
    AND NOT EXISTS (SELECT 1 FROM deliveries AS d WHERE d.callback_id = i.id AND d.state = 'pending')
    ORDER BY created_ms LIMIT ?"""


def prune_inbox(c: Conn, cutoff_ms: int, cutoff: str, limit: int) -> Pruned:
    """Delete up to ``limit`` old closed inbox items with their history and the deliveries of
    their escalation chain (keyed by the item's id); an item with a step still pending stays."""
    ids: list[str] = []
    for status in CLOSED_INBOX_STATUSES:
        if len(ids) < limit:
            ids += [row[0] for row in c.execute(_OLD_ITEMS, (status, cutoff_ms, cutoff, limit - len(ids)))]
    deliveries = _delete_in(c, "DELETE FROM deliveries WHERE callback_id IN", ids)
    _delete_in(c, "DELETE FROM inbox_history WHERE item_id IN", ids)
    _delete_in(c, "DELETE FROM inbox_items WHERE id IN", ids)
    return Pruned(inbox_items=len(ids), deliveries=deliveries, more=len(ids) == limit)


_IDLE_SESSIONS = f"""SELECT session_key FROM sessions WHERE last_ms < ? AND session_key NOT IN (
        SELECT json_extract(doc, '$.sessionKey') FROM contracts
        WHERE state IN ({", ".join(f"'{s}'" for s in OPEN_CONTRACT_STATES)})
            AND json_extract(doc, '$.sessionKey') IS NOT NULL)
    ORDER BY last_ms LIMIT ?"""


def prune_sessions(c: Conn, cutoff_ms: int, limit: int, checkpoints: Sequence[str]) -> Pruned:
    """Delete up to ``limit`` sessions idle since before ``cutoff_ms`` that no open contract
    belongs to: transcript, sessions row (the next append is seq 1) and ``checkpoints``."""
    keys = [row[0] for row in c.execute(_IDLE_SESSIONS, (cutoff_ms, limit))]
    entries = _delete_in(c, "DELETE FROM transcripts WHERE session_key IN", keys)
    _delete_in(c, "DELETE FROM sessions WHERE session_key IN", keys)
    _delete_in(c, _CHECKPOINTS, [p + key for key in keys for p in checkpoints])
    return Pruned(sessions=len(keys), transcript_entries=entries, more=len(keys) == limit)


def _delete_in(c: Conn, sql: str, ids: Sequence[str]) -> int:
    """Run ``{sql} (?, …)`` over ``ids`` in chunks; the rows deleted."""
    deleted = 0
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        deleted += c.execute(f"{sql} ({','.join('?' * len(chunk))})", chunk).rowcount
    return deleted


def prune_silences(c: Conn, ended_ms: int, limit: int) -> Pruned:
    """Delete up to ``limit`` silences that ended before ``ended_ms``, the longest ended first."""
    cur = c.execute(
        """DELETE FROM silences WHERE id IN
            (SELECT id FROM silences WHERE ends_ms < ? ORDER BY ends_ms LIMIT ?)""",
        (ended_ms, limit),
    )
    return Pruned(silences=cur.rowcount, more=cur.rowcount == limit)
