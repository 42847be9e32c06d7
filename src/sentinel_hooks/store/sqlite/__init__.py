"""The SQLite backend: one file (or memory, for tests), one process. See ``store``."""

from __future__ import annotations

from sentinel_hooks.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
