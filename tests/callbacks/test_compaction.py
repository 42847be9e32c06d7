"""Pure compaction helpers: what is summarised, and how a transcript is rebuilt."""

from __future__ import annotations

from typing import Any

from sentinel_hooks.callbacks.backends.base import ToolSpec
from sentinel_hooks.callbacks.sessions import compaction


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


def big_conversation(results: list[int], *, first: int = 500) -> list[tuple[int, dict[str, Any]]]:
    """System, a first user message of ``first`` characters, then one tool turn per result size."""
    messages: list[tuple[int, dict[str, Any]]] = [
        (1, {"role": "system", "content": "You are Sentinel's hook agent."}),
        (2, {"role": "user", "content": "e" * first}),
    ]
    for n, chars in enumerate(results):
        call = {"id": f"c{n}", "name": "sentinel_history", "arguments": {"limit": 500}}
        messages.append((10 + 2 * n, {"role": "assistant", "content": None, "toolCalls": [call]}))
        result = {"role": "tool", "toolCallId": f"c{n}", "name": "sentinel_history", "content": "r" * chars}
        messages.append((11 + 2 * n, result))
    return messages


def rebuilt(messages: list[tuple[int, dict[str, Any]]], limit: int) -> list[dict[str, Any]]:
    """The conversation after recording ``cuts`` as compaction entries, as a resumed session reads it."""
    entries = [(seq, {"kind": "message", "message": m}) for seq, m in messages]
    for n, (seq, cut) in enumerate(compaction.cuts(messages, limit)):
        entries.append((1000 + n, {"kind": "compaction", "replaces": [seq], "message": cut, "cut": True}))
    return [m for _, m in compaction.apply(entries)]


def summary_at(seq: int) -> tuple[int, dict[str, Any]]:
    """A summary message, as a compaction entry puts it."""
    return (seq, compaction.summary_message("S"))


def test_the_budget_grows_with_the_payload_limit() -> None:
    """The default payload limit leaves CONTEXT_CHARS; a larger one gets room for eight payloads."""
    assert compaction.CONTEXT_CHARS == compaction.budget(2500)
    assert 160_000 == compaction.budget(20_000)


def test_the_room_sets_the_tool_specs_and_framing_aside() -> None:
    """What the messages may take is the budget less the tool specs and the wire framing."""
    spec = ToolSpec("t", "d" * 1000, {"type": "object"})
    assert 100_000 - compaction.RESERVE_CHARS - compaction.room(100_000, []) == 0
    assert 1000 < compaction.room(100_000, []) - compaction.room(100_000, [spec]) < 1100


def test_an_oversized_latest_tool_result_is_cut_to_fit() -> None:
    """A tool result larger than the whole budget is cut with a marker; the request then fits."""
    messages = big_conversation([50_000])
    after = rebuilt(messages, 20_000)
    assert compaction.size(after) <= 20_000
    assert "characters cut here to fit the model's context" in after[-1]["content"]
    assert after[-1]["content"].startswith("rrr")
    assert after[:3] == [m for _, m in messages[:3]]


def test_cuts_leave_room_for_the_next_turns() -> None:
    """After cutting, the turns take at most half of what the first two messages leave."""
    messages = big_conversation([30_000, 30_000, 30_000], first=4_000)
    after = rebuilt(messages, 60_000)
    head = compaction.size(after[:2])
    assert compaction.size(after) <= head + (60_000 - head) // 2


def test_older_turns_are_cut_before_the_latest() -> None:
    """The results the model is about to read stay whole while cutting older ones is enough."""
    messages = big_conversation([30_000, 30_000, 10_000], first=4_000)
    after = rebuilt(messages, 60_000)
    older, latest = [m["content"] for m in after if m["role"] == "tool"][:2], after[-1]["content"]
    assert "r" * 10_000 == latest
    assert all("characters cut here" in text for text in older)
    assert abs(len(older[0]) - len(older[1])) <= 1


def test_nothing_is_cut_when_the_conversation_fits() -> None:
    """Under the limit, no cut entries are made."""
    assert [] == compaction.cuts(big_conversation([1000, 1000]), 20_000)


def test_the_first_user_message_is_cut_only_as_a_last_resort() -> None:
    """The envelope message is cut only when cutting every later message cannot make it fit."""
    fits = rebuilt(big_conversation([30_000], first=9_000), 20_000)
    assert "e" * 9_000 == fits[1]["content"]
    too_big = rebuilt(big_conversation([30_000], first=40_000), 20_000)
    assert compaction.size(too_big) <= 20_000
    assert "characters cut here" in too_big[1]["content"]
    assert too_big[0]["content"] == "You are Sentinel's hook agent."


def test_small_tool_call_arguments_are_never_cut() -> None:
    """A call's arguments stay a JSON object (the loop guard reads them) unless they are huge."""
    messages = big_conversation([50_000, 50_000])
    after = rebuilt(messages, 20_000)
    assert all(isinstance(c["arguments"], dict) for m in after for c in m.get("toolCalls") or [])


def test_no_new_summary_until_enough_new_turns_left_the_tail() -> None:
    """Once a summary exists, the next one waits for three more model turns: not one per turn."""

    def summarised_then(turns: int) -> list[tuple[int, dict[str, Any]]]:
        head, rest = conversation(turns)[:2], conversation(turns)[2:]
        return [*head, summary_at(100), *rest]

    assert compaction.split_for_compaction(summarised_then(5)) is None  # 2 new turns past the tail
    seqs, middle = compaction.split_for_compaction(summarised_then(6)) or ([], [])
    assert [100, 3, 4, 5, 6, 7, 8] == seqs
    assert compaction.is_summary(middle[0])


def test_the_summary_request_fits_its_limit() -> None:
    """Asking for a summary of huge turns never sends more than the limit."""
    middle = [m for _, m in big_conversation([80_000, 80_000])[2:]]
    request = compaction.summary_request(middle, 30_000)
    assert compaction.size(request) <= 30_000
    assert compaction.SUMMARY_PROMPT == request[0]["content"]


def test_a_long_summary_is_cut() -> None:
    """A model that answers at length does not grow the conversation past SUMMARY_CHARS."""
    message = compaction.summary_message("s" * 50_000)
    assert len(message["content"]) <= compaction.SUMMARY_CHARS + len(compaction.SUMMARY_HEADER) + 1


def test_cut_text_keeps_the_start_and_the_end_and_says_how_much() -> None:
    """A cut text keeps its start and end, says how many characters went, and is at most ``keep`` long."""
    text = "a" * 5000 + "z" * 5000
    cut = compaction.cut_text(text, 1000)
    assert len(cut) <= 1000
    assert cut.startswith("aaa")
    assert cut.endswith("zzz")
    removed = len(text) - len(cut.replace(cut[cut.index("\n[") : cut.index("]\n") + 2], ""))
    assert f"[… {removed} characters cut here" in cut


def test_a_summary_is_written_from_the_turns_before_they_were_cut() -> None:
    """Cutting a turn to fit the budget does not take it away from the summary that replaces it."""
    messages = big_conversation([50_000, 50_000])
    entries = [(seq, {"kind": "message", "message": m}) for seq, m in messages]
    for n, (seq, cut) in enumerate(compaction.cuts(messages, 60_000)):
        entries.append((1000 + n, {"kind": "compaction", "replaces": [seq], "message": cut, "cut": True}))
    view = compaction.apply(entries)
    seqs = [seq for seq, _ in view[2:4]]
    assert "characters cut here" in view[3][1]["content"]
    assert [m for _, m in messages[2:4]] == compaction.originals(entries, seqs)


def test_turns_with_many_tool_calls_do_not_bring_summaries_sooner() -> None:
    """A turn with many tool results is still one turn: the summary waits for three of them."""
    head, wide = conversation(0), [(1000, compaction.summary_message("S"))]
    seq = 2000
    for _ in range(3):  # 19 messages: the kept six, and two wide turns before them
        calls = [{"id": str(seq + n)} for n in range(5)]
        wide.append((seq, {"role": "assistant", "toolCalls": calls}))
        wide += [(seq + 1 + n, {"role": "tool", "toolCallId": str(seq + n)}) for n in range(5)]
        seq += 10
    assert compaction.split_for_compaction([*head, *wide]) is None


def test_sizes_of_a_growing_conversation_are_its_size() -> None:
    """Sizes.of answers size() as messages are added and replaced by new ones."""
    sizes = compaction.Sizes()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "é" * 50},
        {"role": "user", "content": "u"},
    ]
    assert compaction.size(messages) == sizes.of(messages)
    messages.append(
        {"role": "assistant", "content": None, "toolCalls": [{"id": "1", "name": "x", "arguments": {}}]}
    )
    assert compaction.size(messages) == sizes.of(messages)
    messages[1:] = [{"role": "user", "content": "a longer replacement " * 9}]
    assert compaction.size(messages) == sizes.of(messages)


def test_sizes_within_agrees_with_size_near_and_far_from_the_room() -> None:
    """Sizes.within(messages, room) is size(messages) <= room, for rooms around the exact size."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": '\x01"é\n' * 40},
        {
            "role": "assistant",
            "content": None,
            "toolCalls": [{"id": "1", "name": "x", "arguments": {"a": 1}}],
        },
        {"role": "tool", "toolCallId": "1", "name": "x", "content": "ok"},
    ]
    exact = compaction.size(messages)
    rooms = [exact - 1, exact, exact + 1, 6 * exact]
    assert [r >= exact for r in rooms] == [compaction.Sizes().within(messages, r) for r in rooms]
