"""The variables a template may use (SPEC.md §4), and their values for one fire.

Apart from the template engine, so that what builds a fire's variables (the envelope builder)
need not load Jinja2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal

from sentinel_hooks.clock import iso

__all__ = ["TEMPLATE_ROOTS", "Leaf", "Roots", "template_variables"]

Leaf = Literal["text", "texts"]
"""What a known variable holds: a string (or null), or an array of strings."""
Roots = Mapping[str, Mapping[str, Leaf] | Leaf | None]
"""Allowed variables: root name → its keys and what each holds, or what the root itself holds
(a ``Leaf``), or ``None``: any path below (observed JSON, whose shape is known only at fire time)."""

TEMPLATE_ROOTS: Final[Roots] = MappingProxyType(
    {
        "payload": None,
        "previous": None,
        "watcher": {"id": "text", "skillId": "text", "tags": "texts", "eventName": "text"},
        "event": {"name": "text"},
        "trigger": {"kind": "text", "priority": "text"},
        "timestamp": "text",
    }
)
"""The variables templates may use (SPEC.md §4): root → its keys and what each holds (``None``:
any path below). A string has no keys (``watcher.id.length`` is a load error: the filter is
``watcher.id | length``); ``watcher.tags`` takes item indices; ``timestamp`` is an ISO 8601 UTC
string; ``previous`` is the previous observation of the watcher, or null."""


def template_variables(
    *,
    payload: Any,
    previous: Any,
    watcher_id: str,
    skill_id: str | None,
    tags: Sequence[str],
    event_name: str,
    trigger_kind: str,
    priority: str,
    timestamp: datetime | str,
) -> dict[str, Any]:
    """The render context for one fire, shaped as :data:`TEMPLATE_ROOTS` describes."""
    if isinstance(timestamp, datetime):
        if timestamp.tzinfo is None:
            raise ValueError("timestamp must be timezone-aware")
        timestamp = iso(timestamp)
    return {
        "payload": payload,
        "previous": previous,
        "watcher": {
            "id": watcher_id,
            "skillId": skill_id,
            "tags": list(tags),
            "eventName": event_name,
        },
        "event": {"name": event_name},
        "trigger": {"kind": trigger_kind, "priority": priority},
        "timestamp": timestamp,
    }
