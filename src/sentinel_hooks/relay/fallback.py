"""The concise fallback text (SPEC.md §6.1): what people get when the agent stays silent. Pure."""

from __future__ import annotations

from typing import Any

from sentinel_hooks.canonical import canonical_json

PAYLOAD_LINE_CHARS = 200


def format_timeout(timeout_ms: int) -> str:
    """``30s``, ``1.5s``, ``0.25s``."""
    return f"{timeout_ms / 1000:g}s"


def payload_line(payload: Any) -> str:
    """The observed payload as compact JSON on one line, cut at 200 characters."""
    text = canonical_json(payload).replace("\n", " ")
    return text if len(text) <= PAYLOAD_LINE_CHARS else text[: PAYLOAD_LINE_CHARS - 1] + "…"


def fallback_text(
    *,
    event_name: str,
    watcher_id: str,
    priority: str,
    timeout_ms: int,
    payload: Any,
    escalation: tuple[str, str] | None = None,
) -> str:
    """The fallback message; ``escalation`` is ``(severity, reason)`` when the session escalated."""
    lines = [
        f"Sentinel: {event_name} fired on {watcher_id} ({priority}) — no response from the agent "
        f"within {format_timeout(timeout_ms)}.",
        payload_line(payload),
    ]
    if escalation is not None:
        severity, reason = escalation
        lines.append(f"Escalated ({severity}): {reason}")
    return "\n".join(lines)


def fanout_text(*, event_name: str, watcher_id: str, rendered: str | None) -> str:
    """The fan-out line: the rendered messageTemplate, else ``{eventName} fired on {watcherId}``."""
    return rendered if rendered else f"{event_name} fired on {watcher_id}"
