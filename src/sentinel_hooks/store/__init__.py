"""Durable state: the ``Store`` contract, its records, and ``open_store``.

``open_store`` turns the ``store:`` setting of sentinel.yaml into a Store (not yet opened:
``await store.open()`` before use, ``await store.close()`` at shutdown). The backends live in
their own packages, ``store.sqlite`` and ``store.redis``, imported only when a URL names them
(``store.backends``).
"""

from __future__ import annotations

from sentinel_hooks.store.backends import open_store
from sentinel_hooks.store.base import InvalidCursor, SharedState, Store
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
    "Observation",
    "Page",
    "SettledState",
    "Settlement",
    "SharedState",
    "Store",
    "TranscriptEntry",
    "Trigger",
    "delivery_key",
    "open_store",
]
