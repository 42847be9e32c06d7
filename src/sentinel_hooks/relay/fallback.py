"""The concise lines the service writes itself, and the fan-out a fire hands the relay. Pure.

The fallback (SPEC.md §6.1: what people get when the agent stays silent), the line of a fire
resolved before its page (§6.4), the fan-out line (§6.3) and the scripted backend's default
message (§5.2) share the ``{eventName} fired on {watcherId}`` phrase and the payload formatters
here, so all of them read alike. ``Fanout`` is what a fire hands the relay besides its envelope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sentinel_hooks.canonical import canonical_json

STILL_INVESTIGATING = "The agent is still investigating; its findings will follow in this thread."
PAYLOAD_LINE_CHARS = 200
SUMMARY_CHARS = 200  # the whole payload summary
SUMMARY_PART_CHARS = 48  # one ``key=value`` of it


@dataclass(frozen=True)
class Fanout:
    """The fan-out message of one fire (SPEC §6.3): mode none | concise | debug, and its line.

    ``rendered`` is the watcher's ``fire.messageTemplate`` rendered (None without one): kept
    for the session, whose scripted backend sends it, else its own default message (§5.2).
    """

    mode: str
    text: str
    error: str | None = None  # a messageTemplate that failed at fire time (the session then fails)
    rendered: str | None = None


def format_duration(seconds: float) -> str:
    """``45s``, ``4m 12s``, ``2h 5m`` (as in the resolved message)."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def resolved_before_page(event_name: str, watcher_id: str, matched_at: str, seconds: float) -> str:
    """The page of a fire its source reported over before the agent answered (SPEC §6.4)."""
    return (
        f"Sentinel: {event_name} on {watcher_id} fired at {matched_at} and resolved "
        f"{format_duration(seconds)} later, before the agent answered."
    )


def format_timeout(timeout_ms: int) -> str:
    """``30s``, ``1.5s``, ``0.25s``."""
    return f"{timeout_ms / 1000:g}s"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def payload_line(payload: Any) -> str:
    """The observed payload as compact JSON on one line, cut at 200 characters."""
    return _cut(canonical_json(payload).replace("\n", " "), PAYLOAD_LINE_CHARS)


def _more(count: int) -> str:
    return f", … (+{count} more)" if count else ""


def payload_summary(payload: Any) -> str:
    """A few top-level ``key=value`` pairs of an object payload, on one line, at most 200 characters.

    Keys in sorted order and values as compact canonical JSON, each pair cut at 48 characters,
    so the same payload always reads the same; the pairs that do not fit are counted
    (``… (+N more)``). Any other payload is its ``payload_line``. Secrets are redacted before
    this (the envelope's payload is), not by it.
    """
    if not isinstance(payload, dict) or not payload:
        return payload_line(payload)
    keys = sorted(payload, key=str)
    parts: list[str] = []
    for key in keys:
        name = key if isinstance(key, str) and key.isprintable() and key else canonical_json(key)
        part = _cut(f"{name}={canonical_json(payload[key])}", SUMMARY_PART_CHARS)
        room = SUMMARY_CHARS - len(_more(len(keys) - len(parts) - 1))
        if parts and len(", ".join([*parts, part])) > room:
            break
        parts.append(part)
    return ", ".join(parts) + _more(len(keys) - len(parts))


def fallback_text(
    *,
    event_name: str,
    watcher_id: str,
    priority: str,
    timeout_ms: int,
    payload: Any,
    escalation: tuple[str, str] | None = None,
    investigating: bool = False,
    stopped: str | None = None,
) -> str:
    """The fallback message; ``escalation`` is ``(severity, reason)`` when the session escalated,
    ``investigating`` adds the line that says its findings will follow (SPEC §6.4), and
    ``stopped`` says what ran out when its budget stopped the session before any page (SPEC §20)."""
    first = (
        f"Sentinel: {fired_on(event_name, watcher_id)} ({priority}) — no response from the agent "
        f"within {format_timeout(timeout_ms)}."
    )
    lines = [budget_ran_out(first, stopped), payload_line(payload)]
    return "\n".join([*lines, *after_payload(escalation, investigating)])


def budget_ran_out(first: str, stopped: str | None) -> str:
    """A fallback's first line, with `` — the agent's budget ran out ({which}).`` in place of its
    final full stop when the budget ``stopped`` the session (SPEC §20)."""
    return f"{first[:-1]} — the agent's budget ran out ({stopped})." if stopped else first


def after_payload(escalation: tuple[str, str] | None, investigating: bool) -> list[str]:
    """The lines a fallback carries after what it says of the fire or group: the escalation, and
    that the agent is still investigating."""
    lines = []
    if escalation is not None:
        severity, reason = escalation
        lines.append(f"Escalated ({severity}): {reason}")
    if investigating:
        lines.append(STILL_INVESTIGATING)
    return lines


def fired_on(event_name: str, watcher_id: str) -> str:
    """``{eventName} fired on {watcherId}``: how every line the service writes names a fire."""
    return f"{event_name} fired on {watcher_id}"


def fanout_text(*, event_name: str, watcher_id: str, rendered: str | None) -> str:
    """The fan-out line: the rendered messageTemplate, else ``{eventName} fired on {watcherId}``."""
    return rendered if rendered else fired_on(event_name, watcher_id)


def default_message(*, event_name: str, watcher_id: str, priority: str, payload: Any) -> str:
    """The scripted backend's message without a messageTemplate (SPEC §5.2):
    ``{eventName} fired on {watcherId} ({priority}): {payload summary}``."""
    return f"{fired_on(event_name, watcher_id)} ({priority}): {payload_summary(payload)}"


def member_line(envelope: Any) -> str:
    """One member of a group as its fallback and follow-ups list it (SPEC §19): its priority and
    payload summary (``envelope`` is an ``Envelope``)."""
    return f"• {envelope.trigger.priority}: {payload_summary(envelope.payload)}"
