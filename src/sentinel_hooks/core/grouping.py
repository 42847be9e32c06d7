"""Grouping (SPEC.md §19): a storm of fires is one page per group. Pure.

A watcher with ``by`` set (its ``fire.group``, else sentinel.yaml's ``grouping``) puts each fire
in a group named by its **group key**: the group's name (``fire.group.name``, default the watcher
id) and the values of the ``by`` paths read from the fire's envelope (a missing path is null), as
canonical JSON, so the same values always make the same key. The first fire of a key opens the
group (its contract is the group's); later ones join it while it is open. Here: the key, the
group's session key, the group fallback's text, the follow-up that gathers joins after the page,
and the bound on how many members a session is shown.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from sentinel_hooks.canonical import canonical_json
from sentinel_hooks.core.paths import MISSING, parse_path, resolve

ROOTS: Final = ("watcher.id", "watcher.tags", "trigger.priority", "payload.<path>", "context.<path>")
"""The envelope paths ``by`` may name (SPEC §19)."""
_EXACT: Final = {
    "watcher.id": ("watcher", "id"),
    "watcher.tags": ("watcher", "tags"),
    "trigger.priority": ("trigger", "priority"),
}
_OPEN_ROOTS: Final = ("payload", "context")

MEMBER_LINES: Final = 5
"""Lines of members a group fallback or follow-up shows before ``… and K more``."""
SESSION_HEAD: Final = 10
SESSION_TAIL: Final = 10
"""A session sees every member up to ``SESSION_HEAD + SESSION_TAIL``; beyond, the first and last
ones and a count (SPEC §19)."""

PRIORITY_ORDER: Final = ("low", "normal", "high", "critical")


def check_by_path(text: str) -> tuple[str, ...]:
    """The segments of a ``by`` path, or ``ValueError`` naming the paths it may be."""
    if text in _EXACT:
        return _EXACT[text]
    root = text.partition(".")[0].partition("[")[0]
    if root in _OPEN_ROOTS:
        segments = parse_path(text)
        if len(segments) > 1:
            return segments
    raise ValueError(f"{text!r} is not an envelope path grouping can read; use one of {', '.join(ROOTS)}")


@dataclass(frozen=True)
class GroupRule:
    """How one watcher's fires are grouped: the group's ``name``, the ``by`` paths (each as
    written and as segments), how long the group gathers before its session (``wait_ms``), the
    quiet time that closes it and paces its follow-ups (``interval_ms``), and ``max_fires``."""

    name: str
    by: tuple[str, ...]
    wait_ms: int
    interval_ms: int
    max_fires: int
    segments: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.by:
            raise ValueError("a group rule needs at least one `by` path")
        # parsed once here: ``by_values`` runs for every fire
        object.__setattr__(self, "segments", tuple(check_by_path(path) for path in self.by))


def by_values(rule: GroupRule, envelope: Any) -> list[Any]:
    """The values of ``rule.by`` read from ``envelope`` (an ``Envelope``), a missing one None."""
    parts = {
        "watcher": {"id": envelope.watcher.id, "tags": list(envelope.watcher.tags)},
        "trigger": {"priority": envelope.trigger.priority},
        "payload": envelope.payload,
        "context": envelope.context,
    }
    values = []
    for segments in rule.segments:
        found = resolve(parts[segments[0]], segments[1:])
        values.append(None if found is MISSING else found)
    return values


def group_key(name: str, values: Sequence[Any]) -> str:
    """The group key: ``[name, [values…]]`` as canonical JSON, kept for the last 1,024 names and
    values made only of text, integers and null (a storm's alerts share a few; not booleans or
    floats, which a cache would take for the equal 1 and 1.0)."""
    if all(value is None or type(value) in (str, int) for value in values):
        return _plain_key(name, tuple(values))
    return canonical_json([name, list(values)])


@functools.lru_cache(maxsize=1024)
def _plain_key(name: str, values: tuple[Any, ...]) -> str:
    return canonical_json([name, list(values)])


def group_session_key(prefix: str, key: str) -> str:
    """The group's hook session: ``{hookSessionPrefix}:group:{key}``."""
    return f"{prefix}:group:{key}"


def highest_priority(priorities: Sequence[str]) -> str:
    """The most urgent of ``priorities`` (``normal`` for none)."""
    known = [PRIORITY_ORDER.index(p) for p in priorities if p in PRIORITY_ORDER]
    return PRIORITY_ORDER[max(known)] if known else "normal"


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def by_text(by: Sequence[str], values: Sequence[Any]) -> str:
    """``path=value, …`` (a text value as it is, others as compact JSON)."""
    return ", ".join(f"{path}={_value_text(value)}" for path, value in zip(by, values, strict=True))


def member_lines(lines: Sequence[str], total: int | None = None) -> list[str]:
    """At most ``MEMBER_LINES`` of ``lines``, then ``… and K more`` for the rest of ``total``."""
    total = len(lines) if total is None else total
    shown = list(lines[:MEMBER_LINES])
    if total > len(shown):
        shown.append(f"… and {total - len(shown)} more")
    return shown


def group_fallback_text(
    *,
    fires: int,
    event_name: str,
    watcher_id: str,
    by: Sequence[str],
    values: Sequence[Any],
    priority: str,
    timeout_ms: int,
    lines: Sequence[str],
) -> str:
    """The group's fallback (SPEC §19): ``Sentinel: {N} fires of {eventName} on {watcherId}
    grouped by {k=v, …} ({priority}) — no response from the agent within {timeout}.`` then one
    line per member (``lines``, the first ones), at most five, then ``… and K more``."""
    first = (
        f"Sentinel: {fires} fires of {event_name} on {watcher_id} grouped by {by_text(by, values)} "
        f"({priority}) — no response from the agent within {timeout_ms / 1000:g}s."
    )
    return "\n".join([first, *member_lines(lines, fires)])


def joined_text(count: int, lines: Sequence[str]) -> str:
    """The follow-up gathering joins after the page: ``{K} more fires:`` and their lines."""
    noun = "fire" if count == 1 else "fires"
    return "\n".join([f"{count} more {noun}:", *member_lines(lines, count)])


T = TypeVar("T")


def bounded_members(members: Sequence[T]) -> tuple[list[T], int, list[T]]:
    """What a group's session is shown of its members: all of them (``(members, 0, [])``) up to
    ``SESSION_HEAD + SESSION_TAIL``; beyond, the first and the last ones and how many are left out."""
    if len(members) <= SESSION_HEAD + SESSION_TAIL:
        return list(members), 0, []
    left_out = len(members) - SESSION_HEAD - SESSION_TAIL
    return list(members[:SESSION_HEAD]), left_out, list(members[-SESSION_TAIL:])
