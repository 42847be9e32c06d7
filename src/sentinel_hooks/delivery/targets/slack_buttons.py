"""Block Kit buttons on Slack pages and approval requests, and the clicks Slack posts back (SPEC.md §21).

Pure: the action ids here are the vocabulary the interaction route parses back, so both sides
share one table. A page's buttons all carry its callback id (Ack, Resolve and Silence 1h act on
the fire's inbox item, 👍/👎 on the callback); an approval's carry the approval id. The actions
block's id names the target that posted the message (``sentinel.page:{target}``), so a click is
answered with that target's bot token.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal
from urllib.parse import parse_qs

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
PAGE_BLOCK = "sentinel.page"
APPROVAL_BLOCK = "sentinel.approval"
STATUS_BLOCK = "sentinel.status"  # the context lines saying who did what (kept when buttons go)
STATUS_LINES = 10  # a context block holds at most 10 elements

Action = Literal["ack", "resolve", "silence_1h", "feedback_up", "feedback_down", "approve", "deny"]


def _button(action_id: str, label: str, value: str) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "value": value,
    }
    if action_id == "sentinel.approve":
        button["style"] = "primary"
    elif action_id == "sentinel.deny":
        button["style"] = "danger"
    return button


def page_buttons(target: str, callback_id: str) -> list[dict[str, Any]]:
    """The actions block of a page: Ack, Resolve, Silence 1h, 👍 and 👎, each on its callback."""
    elements = [_button(a, label, callback_id) for a, label in PAGE_ACTIONS + FEEDBACK_ACTIONS]
    return [{"type": "actions", "block_id": f"{PAGE_BLOCK}:{target}", "elements": elements}]


def approval_buttons(target: str, approval_id: str) -> list[dict[str, Any]]:
    """The actions block of an approval request: Approve and Deny."""
    elements = [_button(a, label, approval_id) for a, label in APPROVAL_ACTIONS]
    return [{"type": "actions", "block_id": f"{APPROVAL_BLOCK}:{target}", "elements": elements}]


def _ours(block: dict[str, Any], prefix: str) -> bool:
    return str(block.get("block_id", "")).startswith(prefix)


def without_buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``blocks`` with Sentinel's action blocks removed (a closed page keeps no buttons)."""
    return [b for b in blocks if not (b.get("type") == "actions" and _ours(b, "sentinel."))]


def action_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sentinel's action blocks among ``blocks``."""
    return [b for b in blocks if b.get("type") == "actions" and _ours(b, "sentinel.")]


def done_line(done: str, actor: str, at: datetime) -> str:
    """``✔ acked by alice at 10:32 UTC``: what a click did, shown on the message."""
    return f"{done} by {actor} at {at:%H:%M} UTC"


def with_status(blocks: list[dict[str, Any]], line: str, *, closed: bool) -> list[dict[str, Any]]:
    """``blocks`` with ``line`` added to the status context (the latest ``STATUS_LINES``), and
    without buttons when ``closed``. The status goes before the buttons, so they stay last."""
    kept = without_buttons(blocks) if closed else blocks
    lines: list[dict[str, Any]] = []
    for block in kept:
        if block.get("type") == "context" and _ours(block, STATUS_BLOCK):
            lines = list(block.get("elements") or [])
    lines = [*lines, {"type": "mrkdwn", "text": line}][-STATUS_LINES:]
    status = {"type": "context", "block_id": STATUS_BLOCK, "elements": lines}
    rest = [b for b in kept if not (b.get("type") == "context" and _ours(b, STATUS_BLOCK))]
    buttons = action_blocks(rest)
    return [*without_buttons(rest), status, *buttons]


@dataclass(frozen=True)
class Click:
    """One button click Slack posted: who (a Slack user id), which action on which id, the
    target whose message it was, and where that message is (to update it in place)."""

    user: str
    action: Action
    value: str
    target: str
    channel: str | None
    ts: str | None
    blocks: list[dict[str, Any]]
    text: str


class NotAClick(ValueError):
    """The body is not a ``block_actions`` payload with one of Sentinel's buttons."""


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NotAClick(f"{what} is not an object")
    return value


def _maybe(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def payload_json(body: bytes) -> str:
    """The ``payload`` field of a form-encoded body (``NotAClick`` without exactly one)."""
    try:
        form = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotAClick(f"the body is not a form (application/x-www-form-urlencoded): {exc}") from exc
    values = form.get("payload", [])
    if len(values) != 1:
        raise NotAClick("the form has no payload field (or more than one)")
    return values[0]


def parse_click(payload: Any) -> Click:
    """The click in a Slack ``block_actions`` payload (already parsed from JSON)."""
    data = _object(payload, "payload")
    if data.get("type") != "block_actions":
        raise NotAClick(f"payload type {data.get('type')!r} is not block_actions")
    user = _object(data.get("user"), "payload.user").get("id")
    actions = data.get("actions")
    if not isinstance(user, str) or not user:
        raise NotAClick("payload.user.id is missing")
    if not isinstance(actions, list) or len(actions) != 1:
        raise NotAClick("payload.actions does not hold exactly one action")
    action = _object(actions[0], "payload.actions[0]")
    action_id, value, block_id = action.get("action_id"), action.get("value"), action.get("block_id")
    if action_id not in ACTION_IDS or not isinstance(value, str) or not value:
        raise NotAClick(f"action {action_id!r} is not one of Sentinel's buttons")
    prefix, _, target = str(block_id or "").partition(":")
    expected = APPROVAL_BLOCK if action_id in ("sentinel.approve", "sentinel.deny") else PAGE_BLOCK
    if prefix != expected or not target:
        raise NotAClick(f"block {block_id!r} is not one of Sentinel's action blocks")
    container, message, posted_in = (_maybe(data, key) for key in ("container", "message", "channel"))
    channel = container.get("channel_id") or posted_in.get("id")
    ts = container.get("message_ts") or message.get("ts")
    blocks = message.get("blocks")
    return Click(
        user=user,
        action=str(action_id).removeprefix("sentinel."),  # type: ignore[arg-type]
        value=value,
        target=target,
        channel=channel if isinstance(channel, str) else None,
        ts=ts if isinstance(ts, str) else None,
        blocks=[b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else [],
        text=str(message.get("text") or ""),
    )
