"""Durable state: the ``Store`` contract, its records, its three backends and ``open_store``.

``open_store`` turns the ``store:`` setting of sentinel.yaml into a Store (not yet opened:
``await store.open()`` before use, ``await store.close()`` at shutdown).
"""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store.base import InvalidCursor, Store
from sentinel_hooks.store.memory import MemoryStore
from sentinel_hooks.store.records import (
    Contract,
    ContractState,
    Delivery,
    DeliveryKind,
    DeliveryOutcome,
    DeliveryState,
    InboxHistoryEntry,
    InboxItem,
    InboxKind,
    InboxStatus,
    Observation,
    Page,
    SettledState,
    Settlement,
    TranscriptEntry,
    Trigger,
    delivery_key,
)
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.redis_connection import redacted_url
from sentinel_hooks.store.sqlite import SqliteStore

__all__ = [
    "Contract",
    "ContractState",
    "Delivery",
    "DeliveryKind",
    "DeliveryOutcome",
    "DeliveryState",
    "InboxHistoryEntry",
    "InboxItem",
    "InboxKind",
    "InboxStatus",
    "InvalidCursor",
    "MemoryStore",
    "Observation",
    "Page",
    "RedisStore",
    "SettledState",
    "Settlement",
    "SqliteStore",
    "Store",
    "TranscriptEntry",
    "Trigger",
    "delivery_key",
    "open_store",
]

ACCEPTED_FORMS = (
    "sqlite:///relative/path.db (relative to the config directory)",
    "sqlite:////absolute/path.db",
    "redis://host:6379/0 (rediss:// for TLS)",
    "memory:// (tests only: nothing survives a restart)",
)


def open_store(url: str, *, base_dir: Path, key_prefix: str = "sentinel:") -> Store:
    """The Store that ``url`` names (call ``await store.open()`` before using it).

    ``sqlite:///rel/path.db`` is relative to ``base_dir``, ``sqlite:////abs/path.db`` absolute;
    ``redis://`` / ``rediss://`` keys go under ``key_prefix``. Raises ``StoreUnavailable``,
    listing the accepted forms, for any other URL.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme in ("redis", "rediss"):
        return RedisStore(url, key_prefix=key_prefix)
    if sep and scheme == "memory" and rest == "":
        return MemoryStore()
    if sep and scheme == "sqlite" and rest.startswith("/") and rest.strip("/"):
        path = Path(rest[1:])
        return SqliteStore(path if path.is_absolute() else base_dir / path)
    hint = ""
    if sep and scheme == "sqlite":
        hint = " (a sqlite URL has three slashes before a relative path, four before an absolute)"
    raise StoreUnavailable(
        f"store URL {redacted_url(url)!r} is not supported{hint}; use one of: " + "; ".join(ACCEPTED_FORMS)
    )
