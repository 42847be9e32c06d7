"""``PaceStore.take_pace_slot`` on SQLite: a log of slots in ``pace_slots`` (schema v6), some of
them reserved ahead for a holder; where a slot goes is ``store.pace_slots``'s.

Kept beside ``queries`` rather than in it: one step, run inside the store's ``BEGIN IMMEDIATE``
transaction, so the reading and the writing are one atomic step for every process using the file.
"""

from __future__ import annotations

import sqlite3

from sentinel_hooks.store.pace_slots import earliest, new_slot


def take_pace_slot(
    c: sqlite3.Connection, key: str, holder: str, limit: int, window_ms: int, at_ms: int
) -> int | None:
    """See ``Store.take_pace_slot``: None when ``holder`` may send at ``at_ms``, else the epoch ms of
    the slot reserved for it (``pace_slots``: no window ever holds more than ``limit`` slots)."""
    c.execute("DELETE FROM pace_slots WHERE key = ? AND at_ms <= ?", (key, at_ms - window_ms))
    rows = c.execute("SELECT id, at_ms, holder FROM pace_slots WHERE key = ?", (key,)).fetchall()
    held = next((row for row in rows if row[2] == holder), None)
    if held is not None:
        slot_id, slot_ms, _ = held
        if int(slot_ms) > at_ms:
            return int(slot_ms)
        others = [int(row[1]) for row in rows if row is not held]
        slot_ms = earliest(others, at_ms, limit, window_ms)
        c.execute(
            "UPDATE pace_slots SET at_ms = ?, holder = ? WHERE id = ?",
            (slot_ms, holder if slot_ms > at_ms else None, slot_id),
        )
        return slot_ms if slot_ms > at_ms else None
    slot_ms = new_slot([int(row[1]) for row in rows], at_ms, limit, window_ms)
    reserved = slot_ms > at_ms
    c.execute(
        "INSERT INTO pace_slots (key, at_ms, holder) VALUES (?, ?, ?)",
        (key, slot_ms, holder if reserved else None),
    )
    return slot_ms if reserved else None
