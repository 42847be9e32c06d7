"""What a hook session's model reads first (SPEC.md §5.1). Pure.

The system message carries the instructions, which name only the tools the callback's
``mode.autonomy`` offers (a model told of a tool it may not use wastes turns on it); the
first user message carries the skill (``skills/injection.py``), the operator's goal, the goal
file read at fire time, what the session did about its earlier callbacks (``memory.py``), and
the envelope as JSON (its payload already truncated to ``limits.maxPayloadChars``), with
secrets redacted.
"""

from __future__ import annotations

from typing import Any

from sentinel_hooks.config.skills import Skill
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.skills.injection import skill_section

_OPENING = """\
You are Sentinel's hook agent. A watcher fired; the callback envelope below says what was observed and why.
Decide what the people on call need to know, then act through the tools:"""

_NOTIFY = (
    '- sentinel_act with action "notify" is the ONLY way your words reach people. '
    "Send one concise, useful message."
)
_NO_NOTIFY = (
    "- You cannot message people yourself; sentinel_escalate puts what a human must know in the inbox."
)
_ESCALATE = (
    "- sentinel_escalate when a human must decide something "
    "(it files an inbox item; it does not notify by itself)."
)
_RUN = (
    '- sentinel_act with action "run_command" runs an allowed diagnostic command '
    "(it may need a human's approval)."
)
_HISTORY = "- sentinel_history shows this watcher's recent observations, to compare against an average."

_CLOSING = """\
Earlier callbacks of this session, when there were any, are listed before the envelope: they are past,
so your tools cannot answer them; use them to tell a repeat from a new problem, and say which it is.
Never answer with control tokens such as NO_REPLY or HEARTBEAT_OK.
Text you write outside tool calls is not delivered.
When you are done, stop calling tools."""


def instructions(autonomy: str = "act") -> str:
    """The system message's text for ``mode.autonomy``: it names only the tools the model is offered."""
    lines = [_OPENING, _NO_NOTIFY if autonomy == "escalate_only" else _NOTIFY, _ESCALATE]
    if autonomy == "act":
        lines.append(_RUN)
    lines += [_HISTORY, _CLOSING]
    return "\n".join(lines)


def system_message(autonomy: str = "act") -> dict[str, Any]:
    """The first message of a session: the instructions for ``mode.autonomy``."""
    return {"role": "system", "content": instructions(autonomy)}


def group_section(fires: int, head: list[Envelope], left_out: int, tail: list[Envelope]) -> str:
    """What a group's session is told of its members (SPEC §19): every member's envelope up to 20,
    beyond that the first and the last ones and how many are left out between them."""
    lines = [
        f"## Group\nThis callback speaks for a group of {fires} fires that share a group key; "
        "the first one's envelope is below. Their envelopes, oldest first:"
    ]
    lines += [f"```json\n{e.wire_text()}\n```" for e in head]
    if left_out:
        lines.append(f"… {left_out} more fires, left out here …")
    lines += [f"```json\n{e.wire_text()}\n```" for e in tail]
    return "\n".join(lines)


def joined_section(count: int, fires: int, head: list[Envelope], left_out: int, tail: list[Envelope]) -> str:
    """The message that hands a group's session the fires that joined it since it last looked."""
    noun = "fire" if count == 1 else "fires"
    lines = [f"## More fires joined this group\n{count} more {noun} (the group now holds {fires}):"]
    lines += [f"```json\n{e.wire_text()}\n```" for e in head]
    if left_out:
        lines.append(f"… {left_out} more fires, left out here …")
    lines += [f"```json\n{e.wire_text()}\n```" for e in tail]
    return "\n".join(lines)


GROUP_FIRES = "groupFires"
"""The transcript entry key that records how many of its group's fires a session was shown."""


def seen_fires(group: Any) -> dict[str, int]:
    """The ``groupFires`` mark of a message showing a group's members (``group``: a ``GroupInfo``
    or None), to put in its transcript entry; nothing for a callback that is no group."""
    return {} if group is None else {GROUP_FIRES: int(group.fires)}


def group_fires_seen(entries: list[dict[str, Any]], group: Any) -> int:
    """How many of its group's fires a session was shown: the last ``groupFires`` mark among its
    transcript ``entries``; a new session is shown ``group.fires`` (0 for no group)."""
    marks = [int(e[GROUP_FIRES]) for e in entries if isinstance(e.get(GROUP_FIRES), int)]
    if marks:
        return marks[-1]
    return 0 if group is None else int(group.fires)


def user_message(
    envelope: Envelope,
    *,
    skill: Skill | None,
    tools: list[str],
    operator_goal: str | None = None,
    memory: str | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    """The first user message: skill, goal, goal file contents, earlier callbacks, the group's
    members (``group_section``) and the envelope JSON."""
    parts: list[str] = []
    section = skill_section(skill)
    if section:
        parts.append(section)
    goal = operator_goal if operator_goal is not None else envelope.mode.operator_goal
    if goal:
        parts.append(f"## Operator goal\n{goal.strip()}")
    runtime = envelope.operator_goal_runtime_context
    if runtime:
        parts.append(f"## Operator goal file (read at fire time)\n{runtime.strip()}")
    parts.append(f"## Tools you may use\n{', '.join(tools)}")
    if memory:
        parts.append(f"## Earlier callbacks in this session\n{memory.strip()}")
    if group:
        parts.append(group)
    # the same compact text the store keeps (``Envelope.wire_text``), not a second rendering
    parts.append("## Callback envelope\n```json\n" + envelope.wire_text() + "\n```")
    return {"role": "user", "content": "\n\n".join(parts)}
