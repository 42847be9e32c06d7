"""The SQLite store's schema and connection settings, versioned with ``PRAGMA user_version``.

Kept apart from ``sqlite.py`` so the tables can be read in one place. Records are JSON text in
``doc`` columns (the API shape); the columns beside them exist only to index and filter. Every
``*_ms`` column is whole milliseconds since the epoch. ``due_ms`` is set only while a contract
or delivery is pending: its deadline / next attempt, or the end of the claim holding it.

To change the schema, append a migration to ``MIGRATIONS``; never edit a released one.
"""

from __future__ import annotations

import sqlite3

from sentinel_hooks.errors import StoreUnavailable

_V1 = (
    """CREATE TABLE watcher_states (
        watcher_id TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE observations (
        id INTEGER PRIMARY KEY AUTOINCREMENT, watcher_id TEXT NOT NULL,
        at_ms INTEGER NOT NULL, doc TEXT NOT NULL)""",
    "CREATE INDEX observations_by_watcher ON observations (watcher_id, id)",
    """CREATE TABLE contracts (
        callback_id TEXT PRIMARY KEY, watcher_id TEXT NOT NULL, state TEXT NOT NULL,
        created_ms INTEGER NOT NULL, due_ms INTEGER, doc TEXT NOT NULL, envelope TEXT NOT NULL)""",
    "CREATE INDEX contracts_due ON contracts (due_ms, callback_id) WHERE due_ms IS NOT NULL",
    "CREATE INDEX contracts_newest ON contracts (created_ms, callback_id)",
    "CREATE INDEX contracts_by_watcher ON contracts (watcher_id, created_ms, callback_id)",
    "CREATE INDEX contracts_by_state ON contracts (state, created_ms, callback_id)",
    """CREATE TABLE dedupe (
        key TEXT PRIMARY KEY, expires_ms INTEGER NOT NULL) WITHOUT ROWID""",
    "CREATE INDEX dedupe_expiry ON dedupe (expires_ms)",
    """CREATE TABLE transcripts (
        session_key TEXT NOT NULL, seq INTEGER NOT NULL, doc TEXT NOT NULL,
        PRIMARY KEY (session_key, seq)) WITHOUT ROWID""",
    """CREATE TABLE checkpoints (
        session_key TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE inbox_items (
        id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL,
        created_ms INTEGER NOT NULL, doc TEXT NOT NULL)""",
    "CREATE INDEX inbox_newest ON inbox_items (created_ms, id)",
    "CREATE INDEX inbox_by_status ON inbox_items (status, created_ms, id)",
    "CREATE INDEX inbox_by_kind ON inbox_items (kind, created_ms, id)",
    """CREATE TABLE inbox_history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        item_id TEXT NOT NULL REFERENCES inbox_items (id) ON DELETE CASCADE,
        doc TEXT NOT NULL)""",
    "CREATE INDEX inbox_history_by_item ON inbox_history (item_id, id)",
    """CREATE TABLE deliveries (
        key TEXT PRIMARY KEY, callback_id TEXT NOT NULL, state TEXT NOT NULL,
        created_ms INTEGER NOT NULL, due_ms INTEGER, doc TEXT NOT NULL)""",
    "CREATE INDEX deliveries_due ON deliveries (due_ms, key) WHERE due_ms IS NOT NULL",
    "CREATE INDEX deliveries_by_callback ON deliveries (callback_id, created_ms, key)",
)

_V2 = (
    # ``ping`` writes here: a store that still reads but can no longer write is not ready.
    """CREATE TABLE health (
        id INTEGER PRIMARY KEY CHECK (id = 1), writes INTEGER NOT NULL)""",
    # One row per session: its last seq (appends continue after it when pruning has emptied the
    # transcript's head) and the instant of its last append (idle sessions are pruned).
    """CREATE TABLE sessions (
        session_key TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, last_ms INTEGER NOT NULL) WITHOUT ROWID""",
    "CREATE INDEX sessions_idle ON sessions (last_ms)",
    """INSERT INTO sessions (session_key, last_seq, last_ms)
        SELECT session_key, MAX(seq), COALESCE(MAX(CAST(ROUND(
            (julianday(json_extract(doc, '$.at')) - 2440587.5) * 86400000) AS INTEGER)), 0)
        FROM transcripts GROUP BY session_key""",
)

_V3 = (
    # Silences (SPEC §14): their state is derived from the instants, which are columns so that a
    # listing by state and the pruning of long-ended silences read an index.
    """CREATE TABLE silences (
        id TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, starts_ms INTEGER NOT NULL,
        ends_ms INTEGER NOT NULL, doc TEXT NOT NULL)""",
    "CREATE INDEX silences_newest ON silences (created_ms, id)",
    "CREATE INDEX silences_by_end ON silences (ends_ms)",
)

_V4 = (
    # Model usage counters (SPEC §20), by key; a row not added to before ``expires_ms`` is deleted
    # by a later ``add_usage`` (a bounded number at a time).
    """CREATE TABLE usage (
        key TEXT PRIMARY KEY, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
        cost_usd REAL NOT NULL, expires_ms INTEGER NOT NULL) WITHOUT ROWID""",
    "CREATE INDEX usage_expiry ON usage (expires_ms)",
)

_V5 = (
    # People's feedback on fires (SPEC §22): the latest per person and callback.
    """CREATE TABLE feedback (
        callback_id TEXT NOT NULL, person TEXT NOT NULL, at_ms INTEGER NOT NULL, doc TEXT NOT NULL,
        PRIMARY KEY (callback_id, person)) WITHOUT ROWID""",
)

_V6_PACE = (
    # Pacing windows (SPEC §16: PagerDuty's 120 events per 60 s per routing key): one row per slot,
    # by a key derived from the routing key; ``at_ms`` may lie ahead (a slot reserved for
    # ``holder``, NULL once used or when taken at once). Rows older than the window are deleted by
    # the next ``take_pace_slot`` of their key.
    """CREATE TABLE pace_slots (
        id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, at_ms INTEGER NOT NULL, holder TEXT)""",
    "CREATE INDEX pace_slots_by_key ON pace_slots (key, at_ms)",
    "CREATE UNIQUE INDEX pace_slots_by_holder ON pace_slots (key, holder) WHERE holder IS NOT NULL",
)


_V7 = (
    # The audit trail (SPEC §21): every change, newest first by (at, id), filtered by actor.
    """CREATE TABLE audit (
        at_ms INTEGER NOT NULL, id TEXT NOT NULL, actor TEXT NOT NULL, doc TEXT NOT NULL,
        PRIMARY KEY (at_ms, id)) WITHOUT ROWID""",
    "CREATE INDEX audit_by_actor ON audit (actor, at_ms, id)",
)

_V8_GROUPS = (
    # Groups (SPEC §19), by their contract's callback id: the open one of a key takes its fires
    # (``store/sqlite/groups.py``); a closed one stays (its members' resolutions still count) until
    # retention prunes its contract.
    """CREATE TABLE groups (
        group_id TEXT PRIMARY KEY, key TEXT NOT NULL, opened_ms INTEGER NOT NULL,
        last_ms INTEGER NOT NULL, sent_ms INTEGER NOT NULL, fires INTEGER NOT NULL,
        max_fires INTEGER NOT NULL, interval_ms INTEGER NOT NULL, closed INTEGER NOT NULL,
        followups INTEGER NOT NULL, unreported TEXT NOT NULL, due_ms INTEGER,
        resolved TEXT NOT NULL DEFAULT '[]')""",
    "CREATE UNIQUE INDEX groups_open ON groups (key) WHERE closed = 0",
    "CREATE INDEX groups_due ON groups (due_ms, group_id) WHERE due_ms IS NOT NULL",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6_PACE, _V7, _V8_GROUPS)
"""``MIGRATIONS[n]`` takes a database from version n to n + 1."""

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNew(StoreUnavailable):
    """The file was written by a newer Sentinel (its schema version is above ours)."""


def configure(conn: sqlite3.Connection, *, busy_timeout_ms: int) -> None:
    """Per-connection settings: WAL (readers never block the writer), NORMAL sync (no loss on a
    process crash), a busy timeout for other processes' locks, enforced foreign keys."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys = ON")


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to ``SCHEMA_VERSION`` in one transaction; returns the version found."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"schema version {found} is newer than this Sentinel's {SCHEMA_VERSION}; "
                "upgrade Sentinel or point `store` at another file"
            )
        for statements in MIGRATIONS[found:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found
