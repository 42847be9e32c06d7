"""Pure compaction helpers: what is summarised, and how a transcript is rebuilt."""

from __future__ import annotations

from typing import Any

from sentinel_hooks.callbacks import compaction


def conversation(n_turns: int) -> list[tuple[int, dict[str, Any]]]:
    messages: list[tuple[int, dict[str, Any]]] = [(1, {"role": "system"}), (2, {"role": "user"})]
    seq = 3
    for _ in range(n_turns):
        messages.append((seq, {"role": "assistant", "toolCalls": [{"id": str(seq)}]}))
        messages.append((seq + 1, {"role": "tool", "toolCallId": str(seq)}))
        seq += 2
    return messages


def test_short_conversations_are_not_compacted() -> None:
    """Nothing to summarise when only the latest turns exist."""
    assert compaction.split_for_compaction(conversation(3)) is None


def test_head_and_latest_turns_are_kept() -> None:
    """System and envelope messages and the latest turns stay; the middle is summarised."""
    seqs, middle = compaction.split_for_compaction(conversation(5)) or ([], [])
    assert [3, 4, 5, 6] == seqs
    assert ["assistant", "tool", "assistant", "tool"] == [m["role"] for m in middle]


def test_kept_tail_never_starts_with_a_tool_result() -> None:
    """A tool result stays with the assistant message that asked for it."""
    messages = [*conversation(4), (11, {"role": "assistant", "content": "x"})]
    seqs, _ = compaction.split_for_compaction(messages) or ([], [])
    assert [3, 4] == seqs


def test_apply_replaces_summarised_messages_in_place() -> None:
    """A compaction entry swaps the messages it replaces for its summary, where they stood."""
    entries = [(seq, {"kind": "message", "message": m}) for seq, m in conversation(4)]
    entries.append(
        (20, {"kind": "compaction", "replaces": [3, 4, 5, 6], "message": {"role": "user", "content": "S"}})
    )
    rebuilt = compaction.apply(entries)
    assert [1, 2, 20, 7, 8, 9, 10] == [seq for seq, _ in rebuilt]
