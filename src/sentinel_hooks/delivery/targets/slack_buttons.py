"""Block Kit buttons on Slack pages and approval requests (SPEC.md §21).

Pure builders: the action ids here are the vocabulary the interaction route parses back, so both
sides share one table. A button's value is the id it acts on (inbox item, callback or approval).
"""

from __future__ import annotations

from typing import Any, Final

PAGE_ACTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("sentinel.ack", "Ack"),
    ("sentinel.resolve", "Resolve"),
    ("sentinel.silence_1h", "Silence 1h"),
)
FEEDBACK_ACTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("sentinel.feedback_up", "👍"),
    ("sentinel.feedback_down", "👎"),
)
APPROVAL_ACTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("sentinel.approve", "Approve"),
    ("sentinel.deny", "Deny"),
)
ACTION_IDS: Final[frozenset[str]] = frozenset(
    action for action, _ in PAGE_ACTIONS + FEEDBACK_ACTIONS + APPROVAL_ACTIONS
)


def _button(action_id: str, label: str, value: str) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "value": value,
    }
    if action_id in ("sentinel.approve",):
        button["style"] = "primary"
    elif action_id in ("sentinel.deny",):
        button["style"] = "danger"
    return button


def page_buttons(inbox_id: str | None, callback_id: str | None) -> list[dict[str, Any]]:
    """The actions block for a page: Ack/Resolve/Silence on its inbox item, 👍/👎 on its callback."""
    elements = [_button(a, label, inbox_id) for a, label in PAGE_ACTIONS] if inbox_id else []
    if callback_id:
        elements += [_button(a, label, callback_id) for a, label in FEEDBACK_ACTIONS]
    return [{"type": "actions", "block_id": "sentinel.page", "elements": elements}] if elements else []


def approval_buttons(approval_id: str) -> list[dict[str, Any]]:
    """The actions block for an approval request: Approve and Deny."""
    elements = [_button(a, label, approval_id) for a, label in APPROVAL_ACTIONS]
    return [{"type": "actions", "block_id": "sentinel.approval", "elements": elements}]


def without_buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``blocks`` with Sentinel's action blocks removed (a closed page keeps no buttons)."""
    return [b for b in blocks if not str(b.get("block_id", "")).startswith("sentinel.")]
