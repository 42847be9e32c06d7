"""Session memory: what a callback's model is told of its session's earlier callbacks (SPEC.md §5.1). Pure.

Before the envelope, the model reads one line per earlier callback of its session: when it
came, its callbackId, what fired (event, watcher, trigger, priority, its payload cut at
``PAYLOAD_CHARS``), what the agent did about it (the messages it sent and to whom,
escalations, commands with their results) and how its contract ended. It is plain text in the
first user message: nothing of an earlier callback is replayed as a tool call, so the model
cannot mistake an old callback for one it can still answer.

The lines come from a fold over the session's transcript, ``fold``. Its state, a
``MemoryState``, is kept in a checkpoint (``memory_key``) with the last ``seq`` it has seen, so
each callback reads only the transcript entries written since the previous one, and no model
is asked to summarise anything: the same transcript always gives the same lines. The memory is
bounded: at most ``RECENT`` callbacks are told one by one, in at most ``MEMORY_CHARS``
characters; older ones are rolled up into one line of counts (how many notified, escalated or
ran commands, which events, the last message sent), never dropped without a trace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sentinel_hooks.canonical import canonical_json, plain_copy
from sentinel_hooks.clock import iso
from sentinel_hooks.core.contract_states import FINAL_STATES
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.store.records import TranscriptEntry

VERSION = 1
RECENT = 8  # earlier callbacks told one by one
FOLDED = 4 * RECENT  # callbacks a fold keeps before their envelopes are looked up
MEMORY_CHARS = 6_000  # the whole memory block
LINE_CHARS = 600  # one callback's line
QUOTE_CHARS = 160  # a message, reason or command output quoted in a line
PAYLOAD_CHARS = 200  # the payload's compact JSON in a line (as in the fallback text)
ACTIONS_KEPT = 6  # actions listed per callback: the first two and the latest four
EVENTS_KEPT = 10  # event names counted in the rolled-up line

INTRO = (
    "What happened in this session before, oldest first (times UTC). These callbacks are past: "
    "your tools act only on the callback below. Use them to tell a repeat from a new problem."
)


def memory_key(session_key: str) -> str:
    """The checkpoint holding a session's ``MemoryState``."""
    return f"memory:{session_key}"


PLACE = "through_seq"  # the checkpoint's member holding the last seq folded in


def place(saved: Mapping[str, Any] | None) -> int:
    """The seq a store's ``TranscriptTail`` reads after, for the memory checkpoint ``saved``:
    the whole number under ``PLACE``, else 0 (the rule of ``Store.read_callback``)."""
    value = (saved or {}).get(PLACE)
    if isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    return 0


@dataclass
class Digest:
    """One earlier callback, as far as the transcript tells."""

    callback_id: str
    at: str  # its first transcript entry (ISO 8601 UTC); the envelope's matchedAt is told when known
    actions: list[str] = field(default_factory=list)
    more: int = 0  # actions left out between the first two and the latest ones
    notified: int = 0
    escalated: int = 0
    commands: int = 0  # commands that ran
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool calls still without a result
    status: str | None = None  # paused, failed, stopped at maxTurns
    said: str | None = None  # the agent's last words outside tool calls
    facts: dict[str, Any] | None = None  # from the envelope (None: not looked up yet)
    contract: str | None = None  # the contract's state when last looked up

    def to_json(self) -> dict[str, Any]:
        """The fields as ``dataclasses.asdict`` has them, copied by hand (several times faster)."""
        return {
            "callback_id": self.callback_id,
            "at": self.at,
            "actions": list(self.actions),
            "more": self.more,
            "notified": self.notified,
            "escalated": self.escalated,
            "commands": self.commands,
            "calls": plain_copy(self.calls) if self.calls else {},
            "status": self.status,
            "said": self.said,
            "facts": None if self.facts is None else plain_copy(self.facts),
            "contract": self.contract,
        }


@dataclass
class Older:
    """The callbacks rolled up out of the one-by-one lines: counts only."""

    callbacks: int = 0
    first_at: str | None = None
    last_at: str | None = None
    notified: int = 0  # callbacks that notified
    escalated: int = 0  # callbacks that escalated
    quiet: int = 0  # callbacks that did neither
    commands: int = 0
    events: dict[str, int] = field(default_factory=dict)
    last_notify: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields as ``dataclasses.asdict`` has them, copied by hand."""
        return {
            "callbacks": self.callbacks,
            "first_at": self.first_at,
            "last_at": self.last_at,
            "notified": self.notified,
            "escalated": self.escalated,
            "quiet": self.quiet,
            "commands": self.commands,
            "events": dict(self.events),
            "last_notify": self.last_notify,
        }


@dataclass
class MemoryState:
    """The fold's state: what was seen up to ``through_seq`` of the session's transcript."""

    through_seq: int = 0
    recent: list[Digest] = field(default_factory=list)
    older: Older = field(default_factory=Older)

    def to_json(self) -> dict[str, Any]:
        """The checkpoint: a copy sharing nothing with the state (the fold's steps copy the state
        through it, as they must not change their input)."""
        return {
            "version": VERSION,
            "through_seq": self.through_seq,
            "recent": [digest.to_json() for digest in self.recent],
            "older": self.older.to_json(),
        }

    def copy(self) -> MemoryState:
        """A copy sharing nothing with this state (``from_json(to_json())`` in one pass): the
        fold's steps change their copy, never their input."""
        return MemoryState(
            through_seq=self.through_seq,
            recent=[Digest(**digest.to_json()) for digest in self.recent],
            older=Older(**self.older.to_json()),
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> MemoryState:
        """The state stored by ``to_json``; a fresh one (fold from the start) for anything else."""
        if not data or data.get("version") != VERSION:
            return cls()
        try:
            return cls(
                through_seq=int(data["through_seq"]),
                recent=[Digest(**d) for d in data["recent"]],
                older=Older(**data["older"]),
            )
        except (KeyError, TypeError, ValueError):
            return cls()


EMPTY = MemoryState().to_json()
"""The checkpoint of a session with no earlier callback (none is written for it)."""


def fold(state: MemoryState, entries: Sequence[TranscriptEntry], *, exclude: str) -> MemoryState:
    """``state`` with ``entries`` (the transcript after ``state.through_seq``) taken in.

    Entries of the callback ``exclude`` (the one about to run) are left out; so are entries
    without a callback id. Beyond ``FOLDED`` callbacks (a long transcript read for the first
    time) the oldest are rolled up at once, before their envelopes are known; ``bound`` rolls
    up the rest once they are.
    """
    new = state.copy()
    found = {d.callback_id: d for d in new.recent}
    for item in entries:
        new.through_seq = max(new.through_seq, item.seq)
        callback_id = item.entry.get("callbackId")
        if not isinstance(callback_id, str) or callback_id == exclude:
            continue
        digest = found.get(callback_id)
        if digest is None:
            digest = found[callback_id] = Digest(callback_id, at=iso(item.at))
            new.recent.append(digest)
        _step(digest, item.entry)
        while len(new.recent) > FOLDED:
            found.pop(_roll(new).callback_id, None)
    return new


def wanted_envelopes(state: MemoryState) -> list[str]:
    """Callbacks whose envelope facts are not known yet."""
    return [d.callback_id for d in state.recent if d.facts is None]


def unsettled(state: MemoryState) -> list[str]:
    """The callbacks to be told whose contract may still change state (worth looking up again)."""
    return [d.callback_id for d in state.recent[-RECENT:] if d.contract not in FINAL_STATES]


def learn(
    state: MemoryState, *, envelopes: Mapping[str, Envelope], contracts: Mapping[str, str]
) -> MemoryState:
    """``state`` with envelope facts (for the ids ``wanted_envelopes`` named) and contract states."""
    new = state.copy()
    for digest in new.recent:
        if digest.facts is None:
            envelope = envelopes.get(digest.callback_id)
            digest.facts = facts(envelope) if envelope is not None else {}
        digest.contract = contracts.get(digest.callback_id, digest.contract)
    return new


def facts(envelope: Envelope) -> dict[str, Any]:
    """What a line tells of a callback's envelope: event, watcher, trigger, priority, when, payload."""
    watcher, trigger = envelope.watcher, envelope.trigger
    try:
        payload = canonical_json(envelope.payload)
    except (TypeError, ValueError):
        payload = json.dumps(envelope.payload, ensure_ascii=False, default=str)
    return {
        "event": watcher.event_name,
        "watcher": watcher.id,
        "trigger": trigger.kind,
        "priority": trigger.priority,
        "matchedAt": trigger.matched_at,
        "payload": cut(payload, PAYLOAD_CHARS),
    }


def bound(state: MemoryState, now: datetime) -> MemoryState:
    """``state`` with the oldest callbacks rolled up until its text fits ``MEMORY_CHARS``."""
    new = state.copy()
    while new.recent and (
        len(new.recent) > RECENT or (_may_overflow(new) and len(_text(new, now)) > MEMORY_CHARS)
    ):
        _roll(new)
    return new


def _may_overflow(state: MemoryState) -> bool:
    """Whether ``state``'s text could be longer than ``MEMORY_CHARS``: each line is cut at
    ``LINE_CHARS``, so a few callbacks' text fits without being written out (the common case,
    which then costs no rendering twice)."""
    return len(INTRO) + (LINE_CHARS + 1) * (len(state.recent) + 1) > MEMORY_CHARS


def render(state: MemoryState, now: datetime) -> str | None:
    """The memory block (without its heading), or None for a session's first callback."""
    if not state.recent and not state.older.callbacks:
        return None
    return cut(_text(state, now), MEMORY_CHARS)


def cut(text: str, limit: int) -> str:
    """``text`` shortened to ``limit`` characters, with ``…`` where it was cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


# -- the fold's steps ---------------------------------------------------------------------------


def _step(digest: Digest, entry: Mapping[str, Any]) -> None:
    kind = entry.get("kind")
    if kind == "status":
        digest.status = _status(entry)
        return
    if kind != "message":
        return
    message = entry.get("message") or {}
    if digest.status is not None and digest.status.startswith("paused"):
        digest.status = None  # the session went on after its pause
    role = message.get("role")
    if role == "assistant":
        calls = [c for c in message.get("toolCalls") or [] if isinstance(c, dict)]
        for call in calls:
            digest.calls[str(call.get("id"))] = {
                "name": str(call.get("name")),
                "arguments": _small(call.get("arguments")),
            }
        text = message.get("content")
        if not calls and isinstance(text, str) and text.strip():
            digest.said = cut(" ".join(text.split()), QUOTE_CHARS)
    elif role == "tool":
        unknown = {"name": str(message.get("name")), "arguments": {}}
        call = digest.calls.pop(str(message.get("toolCallId")), unknown)
        _act(digest, call, _result(message.get("content")))


def _status(entry: Mapping[str, Any]) -> str:
    status = str(entry.get("status"))
    if status == "paused":
        argv = " ".join(map(str, entry.get("argv") or []))
        return f"paused: waiting for approval to run `{cut(argv, QUOTE_CHARS)}`"
    if status == "failed":
        return f"session failed: {cut(str(entry.get('error', '')), QUOTE_CHARS)}"
    if status == "circuitBreaker":
        return f"stopped by the circuit breaker after {entry.get('denials')} denied actions in a row"
    if status == "maxTurns":
        return f"stopped after {entry.get('turns')} model turns (maxTurns)"
    if entry.get("text"):  # e.g. "session stopped: budget exhausted (…)"
        return cut(str(entry["text"]), QUOTE_CHARS)
    return status


def _act(digest: Digest, call: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    """Record what one answered tool call did."""
    name = call.get("name")
    arguments = call.get("arguments")
    args: Mapping[str, Any] = arguments if isinstance(arguments, dict) else {}
    ok = result.get("ok") is True
    error = _quote(result.get("error") or "error")
    action = args.get("action")
    if name == "sentinel_act" and action == "notify":
        message = _quote(args.get("message") or "")
        if ok:
            digest.notified += 1
            to = ", ".join(map(str, result.get("delivered") or args.get("targets") or []))
            text = f"notified {to}: {message}" if to else f"notified: {message}"
        else:
            text = f"notify not sent ({error}): {message}"
    elif name == "sentinel_act" and action == "run_command":
        argv = cut(" ".join([str(args.get("command", "")), *map(str, args.get("args") or [])]), QUOTE_CHARS)
        code = result.get("code")
        if isinstance(code, int):
            digest.commands += 1
            output = str(result.get("stdout") or result.get("stderr") or "").strip()
            text = f"ran `{argv}`: exit {code}" + (f", output {_quote(output)}" if output else "")
        else:
            text = f"ran `{argv}`: {error}" if result.get("error") else f"asked to run `{argv}`"
    elif name == "sentinel_escalate" and ok:
        digest.escalated += 1
        severity = result.get("severity") or args.get("severity") or "warning"
        text = f"escalated ({severity}): {_quote(args.get('reason') or '')}"
    elif name == "sentinel_history" and ok:
        text = f"looked at the history ({len(result.get('observations') or [])} observations)"
    else:
        text = f"called {name}" + ("" if ok else f" ({error})")
    _add(digest, text)


def _add(digest: Digest, text: str) -> None:
    digest.actions.append(text)
    if len(digest.actions) > ACTIONS_KEPT:
        del digest.actions[2]
        digest.more += 1


def _result(content: object) -> dict[str, Any]:
    if isinstance(content, str):
        try:
            decoded = json.loads(content)
        except json.JSONDecodeError:
            return {"ok": False, "error": content}
        return decoded if isinstance(decoded, dict) else {}
    return {}


def _small(value: object) -> object:
    """Tool-call arguments kept in the state: long strings cut, long lists shortened."""
    if isinstance(value, str):
        return cut(value, QUOTE_CHARS * 2)
    if isinstance(value, list):
        return [_small(v) for v in value[:20]]
    if isinstance(value, dict):
        return {str(k): _small(v) for k, v in list(value.items())[:20]}
    return value


def _quote(value: object) -> str:
    return json.dumps(cut(" ".join(str(value).split()), QUOTE_CHARS), ensure_ascii=False)


def _roll(state: MemoryState) -> Digest:
    """Move the oldest finished callback (else the oldest) into the rolled-up counts."""
    index = next(
        (i for i, d in enumerate(state.recent) if not d.calls and not (d.status or "").startswith("paused")),
        0,
    )
    digest = state.recent.pop(index)
    older = state.older
    older.callbacks += 1
    older.first_at = min(filter(None, (older.first_at, _at(digest))))
    older.last_at = max(filter(None, (older.last_at, _at(digest))))
    older.notified += digest.notified > 0
    older.escalated += digest.escalated > 0
    older.quiet += not digest.notified and not digest.escalated
    older.commands += digest.commands
    event = (digest.facts or {}).get("event")
    if event and (event in older.events or len(older.events) < EVENTS_KEPT):
        older.events[str(event)] = older.events.get(str(event), 0) + 1
    notifies = [a for a in digest.actions if a.startswith("notified")]
    if notifies:
        older.last_notify = cut(notifies[-1], QUOTE_CHARS + 40)
    return digest


# -- rendering ----------------------------------------------------------------------------------


def _text(state: MemoryState, now: datetime) -> str:
    lines = [INTRO]
    if state.older.callbacks:
        lines.append(_older_line(state.older))
    lines += [_line(digest, now) for digest in state.recent]
    return "\n".join(lines)


def _line(digest: Digest, now: datetime) -> str:
    facts = digest.facts or {}
    what = str(facts.get("event") or "(its envelope is no longer stored)")
    if facts.get("watcher"):
        what += f" on {facts['watcher']}"
    why = ", ".join(str(facts[k]) for k in ("trigger", "priority") if facts.get(k))
    if why:
        what += f" ({why})"
    if facts.get("payload"):
        what += f", payload {facts['payload']}"
    did = list(digest.actions)
    if digest.more:
        did[2:2] = [f"… {digest.more} more …"]
    parts = ["; ".join(did) or "no action"]
    if digest.status:
        parts.append(digest.status)
    if digest.said:
        parts.append(f"closing words: {json.dumps(digest.said, ensure_ascii=False)}")
    if digest.contract:
        parts.append(f"contract {digest.contract}")
    line = f"- {_when(_at(digest), now)}, callback {digest.callback_id}: {what} — " + "; ".join(parts)
    return cut(line, LINE_CHARS)


def _older_line(older: Older) -> str:
    span = f"{_clock(older.first_at)} to {_clock(older.last_at)}" if older.first_at else "earlier"
    counts = (
        f"{older.notified} notified, {older.escalated} escalated, {older.quiet} with neither; "
        f"{older.commands} command(s) ran"
    )
    line = f"- Before these, {older.callbacks} callback(s) from {span}: {counts}"
    if older.events:
        ranked = sorted(older.events.items(), key=lambda kv: (-kv[1], kv[0]))
        line += "; events " + ", ".join(f"{name} ({n})" for name, n in ranked)
    if older.last_notify:
        line += f"; the last message then: {older.last_notify}"
    return cut(line, LINE_CHARS)


def _at(digest: Digest) -> str:
    """When the callback fired (its trigger's matchedAt), else when its session started."""
    matched = (digest.facts or {}).get("matchedAt")
    return matched if isinstance(matched, str) and matched else digest.at


def _when(at: str, now: datetime) -> str:
    try:
        seconds = (now - datetime.fromisoformat(at)).total_seconds()
    except (TypeError, ValueError):
        return at
    return f"{_clock(at)} ({_ago(seconds)})"


def _clock(at: str | None) -> str:
    """``2026-01-01T10:52:03.000Z`` as ``2026-01-01 10:52:03``."""
    return (at or "")[:19].replace("T", " ")


def _ago(seconds: float) -> str:
    if seconds < 0:
        return "just now"
    if seconds < 90:
        return f"{int(seconds)} s ago"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min ago"
    if seconds < 48 * 3600:
        return f"{round(seconds / 3600)} h ago"
    return f"{round(seconds / 86400)} days ago"
