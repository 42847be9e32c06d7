"""Session memory: what a callback's model is told of the session's earlier callbacks (pure)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sentinel_hooks.callbacks.sessions import memory
from sentinel_hooks.callbacks.sessions.memory import MemoryState
from sentinel_hooks.callbacks.sessions.prompt import user_message
from sentinel_hooks.clock import iso
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.store.records import TranscriptEntry

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


class Transcript:
    """Builds a session's transcript entries, one callback after the other."""

    def __init__(self) -> None:
        self.entries: list[TranscriptEntry] = []
        self._calls = 0

    def add(self, callback_id: str, entry: dict[str, Any], *, minute: int = 0) -> None:
        at = T0 + timedelta(minutes=minute)
        seq = len(self.entries) + 1
        self.entries.append(TranscriptEntry(seq=seq, at=at, entry={"callbackId": callback_id, **entry}))

    def start(self, callback_id: str, *, minute: int = 0) -> None:
        """What a session writes first: the model, the system prompt and the envelope."""
        self.add(callback_id, {"kind": "model", "model": "m"}, minute=minute)
        for role in ("system", "user"):
            self.add(
                callback_id, {"kind": "message", "message": {"role": role, "content": "…"}}, minute=minute
            )

    def call(self, callback_id: str, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        """One tool call and its result."""
        self._calls += 1
        call_id = f"call_{self._calls}"
        asked = {
            "role": "assistant",
            "content": None,
            "toolCalls": [{"id": call_id, "name": name, "arguments": arguments}],
        }
        answer = {"role": "tool", "toolCallId": call_id, "name": name, "content": json.dumps(result)}
        self.add(callback_id, {"kind": "message", "message": asked})
        self.add(callback_id, {"kind": "message", "message": answer})

    def notify(self, callback_id: str, message: str, *, minute: int = 0) -> None:
        """A whole callback that notified ``hook`` with ``message``."""
        self.start(callback_id, minute=minute)
        self.call(
            callback_id,
            "sentinel_act",
            {"action": "notify", "message": message},
            {"ok": True, "delivered": ["hook"], "retrying": [], "contract": "fulfilled"},
        )


def envelope(event: str = "disk_high", payload: Any = None, *, matched_at: str) -> Envelope:
    return Envelope.model_validate(
        {
            "watcher": {"id": "db", "eventName": event},
            "trigger": {"kind": "match", "priority": "high", "matchedAt": matched_at},
            "payload": payload if payload is not None else {"disk": 97},
        }
    )


def test_a_callback_is_dated_by_when_it_fired() -> None:
    """The trigger's matchedAt dates a line; the session's start only when the envelope is gone."""
    transcript = Transcript()
    transcript.notify("A", "first", minute=30)
    state = memory.fold(MemoryState(), transcript.entries, exclude="NEW")
    fired = envelope(matched_at="2026-01-01T10:20:00.000Z")
    told = memory.render(memory.learn(state, envelopes={"A": fired}, contracts={}), NOW) or ""
    assert "- 2026-01-01 10:20:00 (40 min ago), callback A: disk_high on db (match, high)" in told
    gone = memory.render(memory.learn(state, envelopes={}, contracts={}), NOW) or ""
    gone_line = "- 2026-01-01 10:30:00 (30 min ago), callback A: (its envelope is no longer stored) —"
    assert gone_line in gone


def recall(
    entries: list[TranscriptEntry], *, exclude: str = "NEW", state: MemoryState | None = None
) -> MemoryState:
    """What the session does when a callback starts: fold, look up envelopes and contracts, bound
    (each callback matched when its session started)."""
    folded = memory.fold(state or MemoryState(), entries, exclude=exclude)
    started = {digest.callback_id: digest.at for digest in folded.recent}
    envelopes = {cid: envelope(matched_at=started[cid]) for cid in memory.wanted_envelopes(folded)}
    contracts = dict.fromkeys(memory.unsettled(folded), "fulfilled")
    return memory.bound(memory.learn(folded, envelopes=envelopes, contracts=contracts), NOW)


def test_a_sessions_first_callback_has_no_memory() -> None:
    """Nothing before: no memory block at all."""
    assert memory.render(recall([]), NOW) is None


def test_a_notify_is_told_with_its_message_target_event_and_outcome() -> None:
    """The earlier callback's line says when, what fired, whom it notified with what, and how it ended."""
    transcript = Transcript()
    transcript.notify("A", "disk at 97% on db-1", minute=50)
    text = memory.render(recall(transcript.entries), NOW) or ""
    [line] = [x for x in text.splitlines() if x.startswith("- ")]
    assert line.startswith("- 2026-01-01 10:50:00 (10 min ago), callback A: disk_high on db (match, high)")
    assert 'payload {"disk":97}' in line
    assert 'notified hook: "disk at 97% on db-1"' in line
    assert line.endswith("contract fulfilled")


def test_commands_escalations_and_denials_are_told_with_their_results() -> None:
    """A command's exit code and output, a denial's reason and an escalation's reason are in the line."""
    transcript = Transcript()
    transcript.start("A")
    run = {"action": "run_command", "command": "df", "args": ["-h"]}
    transcript.call("A", "sentinel_act", run, {"ok": True, "code": 0, "stdout": "/dev/sda1 97% /\n"})
    rm = {"action": "run_command", "command": "rm", "args": ["-rf", "/"]}
    transcript.call("A", "sentinel_act", rm, {"ok": False, "code": None, "error": "denied by policy: no-rm"})
    escalate = {"reason": "disk keeps filling", "severity": "critical"}
    transcript.call("A", "sentinel_escalate", escalate, {"ok": True, "inboxItemId": "i1"})
    text = memory.render(recall(transcript.entries), NOW) or ""
    assert 'ran `df -h`: exit 0, output "/dev/sda1 97% /"' in text
    assert 'ran `rm -rf /`: "denied by policy: no-rm"' in text
    assert 'escalated (critical): "disk keeps filling"' in text


def test_the_callback_about_to_run_is_left_out() -> None:
    """The new callback's own entries (a resumed start) are not told as an earlier callback."""
    transcript = Transcript()
    transcript.notify("A", "first")
    transcript.start("NEW")
    state = recall(transcript.entries, exclude="NEW")
    assert ["A"] == [d.callback_id for d in state.recent]
    assert len(transcript.entries) == state.through_seq


def test_no_tool_call_of_an_earlier_callback_becomes_a_message() -> None:
    """Earlier callbacks reach the model as text in the first user message, never as tool calls."""
    transcript = Transcript()
    transcript.notify("A", "disk at 97% on db-1")
    text = memory.render(recall(transcript.entries), NOW)
    message = user_message(envelope(matched_at=iso(NOW)), skill=None, tools=["sentinel_act"], memory=text)
    assert ["role", "content"] == list(message)
    content = message["content"]
    assert content.index("## Earlier callbacks in this session") < content.index("## Callback envelope")
    assert "disk at 97% on db-1" in content


def test_folding_step_by_step_gives_the_same_memory_as_all_at_once() -> None:
    """The state kept between callbacks makes reading only the new entries enough."""
    transcript = Transcript()
    for n in range(12):
        transcript.notify(f"C{n:02}", f"message {n}", minute=n)
    at_once = recall(transcript.entries)
    stepwise = MemoryState()
    for n in range(0, len(transcript.entries), 5):
        stepwise = recall(transcript.entries[n : n + 5], state=stepwise)
    assert at_once.to_json() == stepwise.to_json()
    assert memory.render(at_once, NOW) == memory.render(stepwise, NOW)


def test_older_callbacks_are_rolled_up_not_dropped() -> None:
    """Past RECENT callbacks, the oldest become counts with a time span and the last message they sent."""
    transcript = Transcript()
    total = memory.RECENT + 4
    for n in range(total):
        transcript.notify(f"C{n:02}", f"message {n}", minute=n)
    state = recall(transcript.entries)
    assert [f"C{n:02}" for n in range(4, total)] == [d.callback_id for d in state.recent]
    text = memory.render(state, NOW) or ""
    assert "- Before these, 4 callback(s) from 2026-01-01 10:00:00 to 2026-01-01 10:03:00" in text
    assert "4 notified, 0 escalated, 0 with neither" in text
    assert "events disk_high (4)" in text
    assert 'the last message then: notified hook: "message 3"' in text


def test_memory_stays_within_its_size_however_long_the_messages() -> None:
    """Long messages and many actions are cut: the block never exceeds MEMORY_CHARS."""
    transcript = Transcript()
    for n in range(30):
        transcript.start(f"C{n:02}")
        for _ in range(10):
            transcript.call(
                f"C{n:02}",
                "sentinel_act",
                {"action": "notify", "message": "x" * 5000},
                {"ok": True, "delivered": ["hook"]},
            )
    state = recall(transcript.entries)
    text = memory.render(state, NOW) or ""
    assert len(text) <= memory.MEMORY_CHARS
    assert all(len(d.actions) <= memory.ACTIONS_KEPT for d in state.recent)
    assert "… 4 more …" in text
    assert len(json.dumps(state.to_json())) < 4 * memory.MEMORY_CHARS


def test_a_paused_callback_stays_told_until_its_approval_is_decided() -> None:
    """Rolling up skips a callback still waiting for an approval, so its outcome is told when it comes."""
    transcript = Transcript()
    transcript.start("P")
    asked = {
        "role": "assistant",
        "content": None,
        "toolCalls": [
            {"id": "x", "name": "sentinel_act", "arguments": {"action": "run_command", "command": "reboot"}}
        ],
    }
    transcript.add("P", {"kind": "message", "message": asked})
    transcript.add("P", {"kind": "status", "status": "paused", "argv": ["reboot"]})
    for n in range(memory.RECENT):
        transcript.notify(f"C{n}", f"message {n}")
    state = recall(transcript.entries)
    assert "P" == state.recent[0].callback_id
    assert "paused: waiting for approval to run `reboot`" in (memory.render(state, NOW) or "")
    result = {
        "role": "tool",
        "toolCallId": "x",
        "name": "sentinel_act",
        "content": json.dumps({"ok": True, "code": 0}),
    }
    later = Transcript()
    later.entries = list(transcript.entries)
    later.add("P", {"kind": "message", "message": result})
    state = recall(later.entries[len(transcript.entries) :], state=state)
    text = memory.render(state, NOW) or ""
    assert "ran `reboot`: exit 0" in text
    assert "paused" not in text


def test_a_stored_state_reads_back_and_a_foreign_one_starts_afresh() -> None:
    """The checkpoint round-trips; an unknown version means folding the transcript from the start."""
    transcript = Transcript()
    transcript.notify("A", "hello")
    state = recall(transcript.entries)
    assert state.to_json() == MemoryState.from_json(json.loads(json.dumps(state.to_json()))).to_json()
    assert 0 == MemoryState.from_json({"version": 0, "through_seq": 9}).through_seq
    assert 0 == MemoryState.from_json({"version": memory.VERSION, "recent": "?"}).through_seq


def test_the_checkpoint_key_is_per_session() -> None:
    """Each session key has its own memory."""
    assert memory.memory_key("sentinel:hooks:watcher:a") != memory.memory_key("sentinel:hooks:watcher:b")


def test_the_checkpoint_is_the_states_fields_and_shares_nothing_with_it() -> None:
    """to_json is dataclasses.asdict with the version (written by hand for speed): every field,
    and a deep copy (changing the state afterwards leaves the checkpoint as it was)."""
    transcript = Transcript()
    transcript.notify("A", "hello")
    transcript.start("B", minute=1)
    transcript.add(
        "B",
        {
            "kind": "message",
            "message": {
                "role": "assistant",
                "content": None,
                "toolCalls": [
                    {
                        "id": "c9",
                        "name": "sentinel_act",
                        "arguments": {"action": "run_command", "command": "df"},
                    }
                ],
            },
        },
    )
    state = recall(transcript.entries)
    state.older.events["e"] = 1
    assert state.recent[-1].calls
    checkpoint = state.to_json()
    as_written = json.loads(json.dumps(checkpoint))
    assert {"version": memory.VERSION, **dataclasses.asdict(state)} == checkpoint
    copied = state.copy()
    assert copied == MemoryState.from_json(checkpoint)
    state.recent[-1].calls["c9"]["arguments"]["command"] = "rm"
    state.recent[0].actions.append("more")
    assert state.recent[0].facts is not None
    state.recent[0].facts["event"] = "changed"
    state.older.events["e"] = 2
    assert as_written == checkpoint
    assert as_written == copied.to_json()


def test_the_place_is_the_whole_number_the_checkpoint_holds() -> None:
    """memory.place reads through_seq as a store's TranscriptTail does: a whole number, else 0."""
    found = [memory.place(saved) for saved in (None, {}, {"through_seq": 7}, {"through_seq": 7.0})]
    odd = [memory.place({"through_seq": v}) for v in ("7", 7.5, True, None)]
    assert ([0, 0, 7, 7], [0, 0, 0, 0]) == (found, odd)


def test_a_stored_state_s_place_is_its_through_seq() -> None:
    """The checkpoint a state writes holds its through_seq where the tail reads it."""
    state = MemoryState(through_seq=12)
    assert 12 == memory.place(state.to_json())


def test_a_full_memory_of_the_longest_lines_is_told_whole() -> None:
    """``RECENT`` callbacks, every line as long as a line may be, and a rolled-up line with many
    events fit ``MEMORY_CHARS``: ``bound`` keeps them all (it does not write the text out to
    know) and nothing of the block is cut."""
    huge = "x" * 5000
    state = MemoryState(through_seq=99)
    state.older = memory.Older(
        callbacks=40,
        first_at=iso(T0),
        last_at=iso(T0),
        events={f"{huge}{n}": n for n in range(memory.EVENTS_KEPT)},
        last_notify=huge,
    )
    for n in range(memory.RECENT):
        digest = memory.Digest(f"C{n}-{huge}", at=iso(T0), actions=[huge] * memory.ACTIONS_KEPT, more=3)
        digest.status, digest.said = huge, huge
        digest.facts = {"event": huge, "watcher": huge, "trigger": huge, "priority": huge, "payload": huge}
        state.recent.append(digest)
    bounded = memory.bound(state, NOW)
    assert bounded == state
    assert len(memory._text(bounded, NOW)) <= memory.MEMORY_CHARS
