"""``PaceStore.take_pace_slot`` on SQLite: a sliding-window log in ``pace_slots`` (schema v6).

Kept beside ``queries`` rather than in it: one step, run inside the store's ``BEGIN IMMEDIATE``
transaction, so the delete, the count and the insert are one atomic step for every process
using the file.
"""

from __future__ import annotations

import sqlite3


def take_pace_slot(c: sqlite3.Connection, key: str, limit: int, window_ms: int, at_ms: int) -> int | None:
    """Forget ``key``'s slots that left the window ending at ``at_ms``; take one if fewer than
    ``limit`` remain (None), else return the epoch ms at which the oldest one leaves it."""
    c.execute("DELETE FROM pace_slots WHERE key = ? AND at_ms <= ?", (key, at_ms - window_ms))
    count, oldest = c.execute("SELECT COUNT(*), MIN(at_ms) FROM pace_slots WHERE key = ?", (key,)).fetchone()
    if int(count) < limit:
        c.execute("INSERT INTO pace_slots (key, at_ms) VALUES (?, ?)", (key, at_ms))
        return None
    return int(oldest) + window_ms
