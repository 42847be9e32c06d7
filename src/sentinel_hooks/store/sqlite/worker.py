"""The one thread that owns the SQLite connection, so the event loop never waits on disk.

``sqlite3`` calls block; running them on a single dedicated thread keeps the loop free and
serialises every statement of this process on one connection (no locking dance inside the
process; ``busy_timeout`` covers other processes such as a CLI reading the same file).
This is also where ``sqlite3.Error`` and ``OSError`` become ``StoreError`` /
``StoreUnavailable`` with a message naming the file.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from sentinel_hooks.errors import StoreError, StoreUnavailable
from sentinel_hooks.store.sqlite.schema import SchemaTooNew, configure, migrate

T = TypeVar("T")

_UNAVAILABLE_HINTS = ("unable to open", "disk i/o", "locked", "readonly", "not a database", "is full")

IN_MEMORY = Path(":memory:")
"""The path of a database in memory (SQLite's own name for it): nothing on disk, gone at close."""


class SqliteWorker:
    """A connection to ``path`` and the single thread allowed to use it."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None

    async def start(self) -> None:
        """Create the parent directory, connect on the worker thread, bring the schema up."""
        if self._executor is not None:
            return
        try:
            if self.path != IN_MEMORY:
                self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"sqlite store {self.path}: cannot create directory {self.path.parent} "
                f"({exc.strerror or exc}); fix the `store` path or its permissions"
            ) from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sentinel-sqlite")
        try:
            await self._submit(self._connect)
        except BaseException:
            self._executor.shutdown(wait=True)
            self._executor = None
            raise

    def _connect(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)
            configure(conn, busy_timeout_ms=self._busy_timeout_ms)
            migrate(conn)
        except SchemaTooNew as exc:
            if conn is not None:
                conn.close()
            raise StoreUnavailable(f"sqlite store {self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise StoreUnavailable(
                f"sqlite store {self.path}: cannot open ({exc}); "
                "check that the path is a writable file in a writable directory"
            ) from exc
        self._conn = conn

    async def stop(self) -> None:
        """Close the connection and end the thread; idempotent."""
        executor = self._executor
        if executor is None:
            return
        try:
            await self._submit(self._disconnect)
        finally:
            self._executor = None
            executor.shutdown(wait=True)

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def _submit(self, fn: Callable[[], T]) -> T:
        if self._executor is None:
            raise StoreUnavailable(f"sqlite store {self.path} is not open; call `await store.open()` first")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def read(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on the worker thread (for single-statement reads)."""
        return await self._submit(lambda: self._guarded(what, fn))

    async def write(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` inside ``BEGIN IMMEDIATE`` … ``COMMIT``; any error rolls it all back."""
        return await self._submit(lambda: self._guarded(what, lambda conn: _transaction(conn, fn)))

    def _guarded(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise StoreUnavailable(f"sqlite store {self.path} is closed")
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            message = f"sqlite store {self.path}: {what} failed: {exc}"
            if any(hint in str(exc).lower() for hint in _UNAVAILABLE_HINTS):
                raise StoreUnavailable(message) from exc
            raise StoreError(message) from exc


def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
