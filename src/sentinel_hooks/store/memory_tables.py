"""An in-memory table with the three access paths the Store needs: by id, newest-first
listing with cursors, and claiming due rows. ``MemoryStore`` keeps contracts, inbox items and
deliveries in these, mirroring the indexed SQLite tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sentinel_hooks.store.paging import check_positive, decode_cursor


@dataclass
class Row:
    """One record: its JSON ``doc``, listing key, schedule and filterable fields."""

    doc: str
    created_ms: int
    due_ms: int | None = None  # when pending: due time or end of the claim; None otherwise
    tags: dict[str, str] = field(default_factory=dict)


class MemoryTable:
    """Rows by id (not thread-safe; every method completes without yielding)."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}

    def insert(self, row_id: str, row: Row) -> bool:
        """Add ``row`` unless ``row_id`` exists; True when added."""
        if row_id in self.rows:
            return False
        self.rows[row_id] = row
        return True

    def get(self, row_id: str) -> Row | None:
        """The row, or None."""
        return self.rows.get(row_id)

    def _matching(self, filters: Mapping[str, str | None]) -> list[tuple[int, str, str]]:
        wanted = {k: v for k, v in filters.items() if v is not None}
        return [
            (row.created_ms, row_id, row.doc)
            for row_id, row in self.rows.items()
            if all(row.tags.get(k) == v for k, v in wanted.items())
        ]

    def page(
        self, filters: Mapping[str, str | None], limit: int, cursor: str | None
    ) -> list[tuple[int, str, str]]:
        """Up to ``limit + 1`` matching ``(created_ms, id, doc)`` rows, newest first, after
        ``cursor`` (so the caller can tell whether another page exists)."""
        check_positive(limit)
        rows = sorted(self._matching(filters), reverse=True)
        if cursor is not None:
            after = decode_cursor(cursor)
            rows = [r for r in rows if (r[0], r[1]) < after]
        return rows[: limit + 1]

    def oldest_first(self, filters: Mapping[str, str | None]) -> list[str]:
        """Docs of every matching row, oldest first (``created_ms``, then id)."""
        return [doc for _, _, doc in sorted(self._matching(filters))]

    def claim(self, now_ms: int, limit: int, lease_ms: int) -> list[str]:
        """Docs of up to ``limit`` rows due at ``now_ms`` (earliest due first), each now hidden
        from other claims until ``now_ms + lease_ms``."""
        check_positive(lease_ms, "lease_ms")
        due = sorted(
            (row.due_ms, row_id)
            for row_id, row in self.rows.items()
            if row.due_ms is not None and row.due_ms <= now_ms
        )[: check_positive(limit)]
        docs = []
        for _, row_id in due:
            row = self.rows[row_id]
            row.due_ms = now_ms + lease_ms
            docs.append(row.doc)
        return docs
