"""``PaceStore.take_pace_slot`` on SQLite: a log of slots in ``pace_slots`` (schema v6), some of
them reserved ahead for a holder.

Kept beside ``queries`` rather than in it: one step, run inside the store's ``BEGIN IMMEDIATE``
transaction, so the reading and the writing are one atomic step for every process using the file.
"""

from __future__ import annotations

import sqlite3


def take_pace_slot(
    c: sqlite3.Connection, key: str, holder: str, limit: int, window_ms: int, at_ms: int
) -> int | None:
    """See ``Store.take_pace_slot``: None when ``holder`` may send at ``at_ms``, else the epoch ms of
    the slot reserved for it. A new slot goes ``window_ms`` after the ``limit``-th latest one (or
    at ``at_ms`` when that is later), so no window ever holds more than ``limit`` slots."""
    c.execute("DELETE FROM pace_slots WHERE key = ? AND at_ms <= ?", (key, at_ms - window_ms))
    held = c.execute(
        "SELECT id, at_ms FROM pace_slots WHERE key = ? AND holder = ?", (key, holder)
    ).fetchone()
    if held is not None:
        slot_id, slot_ms = held
        if int(slot_ms) > at_ms:
            return int(slot_ms)
        # The holder sends now, which may be well after its slot (a backlog): the window counts
        # the send where it happens, or a late send and the next ones could crowd one window.
        c.execute("UPDATE pace_slots SET holder = NULL, at_ms = ? WHERE id = ?", (at_ms, slot_id))
        return None
    nth = c.execute(
        "SELECT at_ms FROM pace_slots WHERE key = ? ORDER BY at_ms DESC, id DESC LIMIT 1 OFFSET ?",
        (key, limit - 1),
    ).fetchone()
    slot_ms = at_ms if nth is None else max(at_ms, int(nth[0]) + window_ms)
    reserved = slot_ms > at_ms
    c.execute(
        "INSERT INTO pace_slots (key, at_ms, holder) VALUES (?, ?, ?)",
        (key, slot_ms, holder if reserved else None),
    )
    return slot_ms if reserved else None
