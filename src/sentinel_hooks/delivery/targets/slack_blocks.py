"""What a Slack message looks like (SPEC.md §6.2, §16): Block Kit with a plain ``text`` fallback.
Pure: values in, JSON-ready values out.

A message is a section with its text and a context line naming its priority, event, watcher,
callback and kind. A thread's root (``slack_threads``) is drawn the same way, under a first
section that shows how the fire ended (``✅ handled by the agent · ✔ resolved``). Observed text
is escaped, so it cannot form links or mentions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sentinel_hooks.delivery.targets.base import Message

SECTION_CHARS = 3000  # Slack's limit for a section block's text
CONTEXT_CHARS = 200


def escape_mrkdwn(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped, so observed data cannot make links or mentions."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def message_blocks(message: Message) -> list[dict[str, Any]]:
    """Block Kit for ``message``: a section with the text, a context line with what it is about."""
    facts = [
        ("Priority", message.priority),
        ("Event", message.event_name),
        ("Watcher", message.watcher_id),
        ("Callback", message.callback_id),
        ("Kind", message.kind),
    ]
    return [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _cut(escape_mrkdwn(message.text), SECTION_CHARS) or " "},
        },
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": f"*{label}:* {_cut(escape_mrkdwn(value), CONTEXT_CHARS)}"}
                for label, value in facts
            ],
        },
    ]


def fallback_text(message: Message) -> str:
    """The plain ``text`` Slack shows in notifications: the message text, escaped like the blocks."""
    return escape_mrkdwn(message.text)


def status_line(outcomes: Sequence[str]) -> str:
    """How the fire ended, as the root shows it: ``✅ handled by the agent · ✔ resolved``."""
    return " · ".join(outcomes)


def root_rendering(
    root: Message, outcomes: Sequence[str], actions: Sequence[dict[str, Any]] = ()
) -> tuple[list[dict[str, Any]], str]:
    """The blocks and text of a thread's root: ``root`` under its outcomes (none: as it was),
    its buttons (``actions``, SPEC §21) last."""
    blocks, text = [*message_blocks(root), *actions], fallback_text(root)
    if not outcomes:
        return blocks, text
    status = status_line(outcomes)
    header = {"type": "section", "text": {"type": "mrkdwn", "text": f"*{status}*"}}
    return [header, *blocks], f"{status} — {text}"
