"""Which status changes an inbox item allows (SPEC.md §8), as a pure table.

Escalations and delivery failures are worked by people: ``open → acked → resolved`` (or
``open → resolved`` directly). Approvals are decided once: ``open → approved | denied``, or
``open → expired`` when nobody decided in time. Every other move is refused, and the refusal
names the item, its current state and what is allowed instead.

This module only answers questions about values; ``inbox.items.Inbox`` applies the moves
through the store's compare-and-set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sentinel_hooks.store.records import InboxKind, InboxStatus

Action = Literal["ack", "resolve", "approve", "deny", "expire"]

INBOX_KINDS: tuple[InboxKind, ...] = ("escalation", "approval", "delivery_failure")
INBOX_STATUSES: tuple[InboxStatus, ...] = ("open", "acked", "resolved", "approved", "denied", "expired")
MAX_NOTE_CHARS = 2000
"""The longest note an operator may attach to a status change."""

_WORKED: frozenset[InboxKind] = frozenset({"escalation", "delivery_failure"})
_DECIDED: frozenset[InboxKind] = frozenset({"approval"})


@dataclass(frozen=True)
class Rule:
    """One action: the kinds it applies to, the statuses it accepts and the status it sets."""

    kinds: frozenset[InboxKind]
    from_statuses: frozenset[InboxStatus]
    to_status: InboxStatus


RULES: dict[Action, Rule] = {
    "ack": Rule(_WORKED, frozenset({"open"}), "acked"),
    "resolve": Rule(_WORKED, frozenset({"open", "acked"}), "resolved"),
    "approve": Rule(_DECIDED, frozenset({"open"}), "approved"),
    "deny": Rule(_DECIDED, frozenset({"open"}), "denied"),
    "expire": Rule(_DECIDED, frozenset({"open"}), "expired"),
}

DECISIONS: frozenset[Action] = frozenset({"approve", "deny", "expire"})
"""The actions that settle an approval (a paused session waits for one of them)."""


def initial_status(kind: InboxKind) -> InboxStatus:
    """The status a new item of ``kind`` starts in: every kind starts ``open``."""
    del kind
    return "open"


def _article(kind: str) -> str:
    words = kind.replace("_", " ")
    return ("an " if words[0] in "aeiou" else "a ") + words


def kind_refusal(item_id: str, kind: InboxKind, action: Action) -> str | None:
    """Why ``action`` never applies to an item of ``kind``, or None when it can."""
    rule = RULES[action]
    if kind in rule.kinds:
        return None
    if kind in _DECIDED:
        return (
            f"item {item_id} is an approval; approvals are approved or denied, not "
            f"{rule.to_status} (use `sentinel approvals approve|deny {item_id}`)"
        )
    return (
        f"item {item_id} is {_article(kind)}, not an approval; only approvals can be {rule.to_status} "
        f"(ack or resolve it instead)"
    )


def status_refusal(item_id: str, status: InboxStatus, action: Action) -> str | None:
    """Why ``action`` cannot move an item that is in ``status``, or None when it can."""
    rule = RULES[action]
    if status in rule.from_statuses:
        return None
    accepted = " or ".join(s for s in INBOX_STATUSES if s in rule.from_statuses)
    noun = "approvals" if rule.kinds == _DECIDED else "items"
    return f"item {item_id} is {status}; only {accepted} {noun} can be {rule.to_status}"


def refusal(item_id: str, kind: InboxKind, status: InboxStatus, action: Action) -> str | None:
    """Why ``action`` is refused for this item (kind first, then status), or None when allowed."""
    return kind_refusal(item_id, kind, action) or status_refusal(item_id, status, action)
