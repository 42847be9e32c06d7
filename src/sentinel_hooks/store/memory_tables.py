"""The memory store's tables. ``MemoryTable``: the three access paths the Store needs (by id,
newest-first listing with cursors, claiming due rows), holding contracts, inbox items and
deliveries like the indexed SQLite tables. ``MemoryTranscripts``: session transcripts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sentinel_hooks.store import codec
from sentinel_hooks.store.paging import check_positive, decode_cursor
from sentinel_hooks.store.records import TranscriptEntry, to_epoch_ms


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


class MemoryTranscripts:
    """Session transcripts: each session's entries after its pruned head, numbered on from it, and
    when each session was last appended to (what idle-session pruning reads)."""

    def __init__(self) -> None:
        self.entries: dict[str, list[str]] = {}
        self.head: dict[str, int] = {}  # seq of the last entry pruned from the head (0: none)
        self.last_ms: dict[str, int] = {}

    def append(self, key: str, entries: Sequence[dict[str, Any]], at: datetime) -> list[TranscriptEntry]:
        """Number ``entries`` after the session's last seq and keep them."""
        kept = self.entries.setdefault(key, [])
        stored = numbered(entries, start=self.head.get(key, 0) + len(kept) + 1, at=at)
        kept.extend(codec.dump_record(e) for e in stored)
        if stored:
            self.last_ms[key] = max(self.last_ms.get(key, 0), to_epoch_ms(at))
        return stored

    def read(self, key: str, after_seq: int, limit: int | None) -> list[TranscriptEntry]:
        """Entries with ``seq > after_seq``, at most ``limit``."""
        start = max(after_seq - self.head.get(key, 0), 0)
        end = None if limit is None else start + limit
        return [codec.load_record(TranscriptEntry, t) for t in self.entries.get(key, [])[start:end]]

    def replace(self, key: str, entries: Sequence[dict[str, Any]], at: datetime) -> list[TranscriptEntry]:
        """Every entry replaced, numbered from 1."""
        stored = numbered(entries, start=1, at=at)
        self.entries[key] = [codec.dump_record(e) for e in stored]
        self.head[key] = 0
        self.last_ms[key] = to_epoch_ms(at)
        return stored

    def trim_head(self, key: str, trimmable: Callable[[TranscriptEntry], bool], cap: int) -> int:
        """Drop leading entries while ``trimmable`` holds (at most ``cap``); how many went."""
        kept = self.entries.get(key, [])
        count = 0
        while count < min(cap, len(kept)) and trimmable(codec.load_record(TranscriptEntry, kept[count])):
            count += 1
        del kept[:count]
        self.head[key] = self.head.get(key, 0) + count
        return count

    def drop(self, key: str) -> int:
        """Forget the session (its next entry is seq 1 again); how many entries went."""
        self.head.pop(key, None)
        self.last_ms.pop(key, None)
        return len(self.entries.pop(key, []))


def numbered(entries: Sequence[dict[str, Any]], *, start: int, at: datetime) -> list[TranscriptEntry]:
    """``entries`` as stored transcript entries numbered from ``start``."""
    return [
        TranscriptEntry(seq=start + i, at=at, entry=codec.dict_arg(e, what="transcript entry"))
        for i, e in enumerate(entries)
    ]
