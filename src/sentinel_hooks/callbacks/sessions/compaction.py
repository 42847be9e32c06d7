"""Keeping every model request of a hook session inside its budget (SPEC.md §5.1). Pure.

A request may hold ``budget(limits.maxPayloadChars)`` characters: ``CONTEXT_CHARS`` (about 24k
tokens), or eight payloads at the limit when that is more, so that raising the limit never
leaves the agent unable to read what it was sent (a payload at the limit then fills an eighth of
a request, a full ``sentinel_history`` result, at most four payloads, about half). The tool specs
and the wire format's framing are set aside (``room``); the messages get the rest.

When the messages outgrow their room, the session compacts them:

1. The older turns are summarised by the model (``split_for_compaction``, ``summary_request``);
   the system prompt, the first user message (earlier callbacks and envelope) and the latest
   ``KEEP_LATEST`` messages are kept. Once a summary exists, a new one is made only after
   ``TURNS_BETWEEN_SUMMARIES`` more model turns have left the kept tail: at most one summary
   call every three turns, however large the turns are.
2. Whatever is still too large is cut (``cuts``): the largest contents (big tool results) lose
   their middle, with a marker saying how much, until the turns after the first user message fill
   at most half of the room it leaves, so the next turns fit without compacting again. Older turns
   are cut before the latest one, and the first user message only when nothing else makes the
   request fit.

Both are recorded in the transcript as ``compaction`` entries naming the messages they replace,
so the full history stays auditable and a resumed session rebuilds the same conversation (``apply``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from sentinel_hooks.callbacks.backends.base import ToolSpec

CONTEXT_CHARS = 96_000
PAYLOADS_PER_REQUEST = 8
RESERVE_CHARS = 2_000  # the wire format's framing, the model name and options
KEEP_LATEST = 6
TURNS_BETWEEN_SUMMARIES = 3
SUMMARY_CHARS = 4_000  # a summary longer than this is cut
MIN_CUT_CHARS = 200  # a cut content keeps at least this much
ARGUMENTS_KEPT = 2_000  # tool-call arguments up to this size are never cut
SUMMARY_HEADER = "(Summary of the earlier turns of this callback)"

SUMMARY_PROMPT = (
    "Summarise the conversation below for yourself in at most 15 lines: what was observed, which tools "
    "were called with which results, what was decided, and what is still open. Keep exact numbers, names "
    "and command outputs that matter. Answer with the summary only."
)

Messages = list[dict[str, Any]]
Numbered = list[tuple[int, dict[str, Any]]]


def budget(max_payload_chars: int) -> int:
    """The characters one model request may hold, for ``limits.maxPayloadChars``."""
    return max(CONTEXT_CHARS, PAYLOADS_PER_REQUEST * max_payload_chars)


def room(request_budget: int, tools: Sequence[ToolSpec]) -> int:
    """What the messages may take of ``request_budget``: the tool specs and the framing set aside."""
    specs = sum(tool.chars for tool in tools)
    return max(request_budget - specs - RESERVE_CHARS, request_budget // 2)


def size(messages: Messages) -> int:
    """The conversation's size in characters (its JSON)."""
    return sum(map(_size, messages))


def _size(message: dict[str, Any]) -> int:
    return len(json.dumps(message, ensure_ascii=False, default=str))


class Sizes:
    """``size`` of one session's conversation, each message encoded once.

    The session asks before every model turn, and its first messages (the instructions, the
    envelope) are the largest; messages are never changed in place (compaction makes new ones),
    so a message's size is kept with the message itself, which keeps its ``id`` its own.
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[dict[str, Any], int]] = {}

    def of(self, messages: Messages) -> int:
        """``size(messages)``."""
        total = 0
        for message in messages:
            found = self._known.get(id(message))
            if found is None or found[0] is not message:
                found = self._known[id(message)] = (message, _size(message))
            total += found[1]
        return total

    def within(self, messages: Messages, room: int) -> bool:
        """``size(messages) <= room``, answered from an upper bound of each message's size while
        that suffices (a conversation far inside its room is then not encoded at all), else
        from ``of``."""
        return sum(map(_bound, messages)) <= room or self.of(messages) <= room


def _bound(message: dict[str, Any]) -> int:
    """At least ``_size(message)``, cheaply: six characters per character of a text member
    (JSON's longest escape, ``\\u0001``) and the framing; exact for any other kind of member."""
    total = 2
    for key, value in message.items():
        if type(value) is str and type(key) is str:
            total += 6 * (len(key) + len(value)) + 8
        elif value is None and type(key) is str:
            total += 6 * len(key) + 12
        else:
            return _size(message)
    return total


def is_summary(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and str(message.get("content") or "").startswith(SUMMARY_HEADER)


def split_for_compaction(messages: Numbered) -> tuple[list[int], Messages] | None:
    """``(seqs to replace, messages to summarise)``, or None when no summary is due.

    Messages are ``(seq, message)``; the first two (system, first user message) and the latest
    ``KEEP_LATEST`` are kept, and the kept tail never starts with a tool result (which must
    follow the assistant message that asked for it). When the older part already holds a
    summary, a new one is due only once ``TURNS_BETWEEN_SUMMARIES`` model turns have joined it.
    """
    head, rest = messages[:2], messages[2:]
    if len(rest) <= KEEP_LATEST:
        return None
    cut = len(rest) - KEEP_LATEST
    while cut > 0 and rest[cut][1].get("role") == "tool":
        cut -= 1
    middle = rest[:cut]
    if not middle or not head:
        return None
    summarised = any(is_summary(m) for _, m in middle)
    turns = sum(1 for _, m in middle if m.get("role") == "assistant")
    if summarised and turns < TURNS_BETWEEN_SUMMARIES:
        return None
    return [seq for seq, _ in middle], [m for _, m in middle]


def summary_request(middle: Messages, limit: int = CONTEXT_CHARS) -> Messages:
    """The messages asking the model for a summary of ``middle``, at most ``limit`` characters."""

    def build(cap: int) -> Messages:
        text = "\n".join(json.dumps(_cut_message(m, cap), ensure_ascii=False, default=str) for m in middle)
        return [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": text}]

    cap = _largest_cap(lambda c: size(build(c)), limit, max(map(_longest, middle), default=0))
    request = build(cap if cap is not None else MIN_CUT_CHARS)
    if size(request) > limit:  # more messages than even their minimum fits: cut the text itself
        text = str(request[1]["content"])

        def whole(c: int) -> Messages:
            return [request[0], {"role": "user", "content": cut_text(text, c)}]

        request = whole(_largest_cap(lambda c: size(whole(c)), limit, len(text)) or MIN_CUT_CHARS)
    return request


def summary_message(summary: str) -> dict[str, Any]:
    return {"role": "user", "content": f"{SUMMARY_HEADER}\n{cut_text(summary.strip(), SUMMARY_CHARS)}"}


def cuts(messages: Numbered, limit: int) -> Numbered:
    """The messages to replace with cut copies, as ``(seq, cut copy)``, so the whole fits ``limit``.

    The messages after the first two are brought down to half of what the first two leave of
    ``limit``, so the next turns fit without cutting again. The older turns are cut first (the
    model has read and acted on them), their largest contents to a common length, the largest
    that fits; the latest turn (the results the model is about to read) only when cutting all
    older contents to ``MIN_CUT_CHARS`` is not enough; the first user message only when nothing
    else makes the whole fit ``limit``. The system message is never cut. Returns ``[]`` when the
    messages fit already.
    """
    plain = [m for _, m in messages]
    first = size(plain[:2])
    target = first + max(limit - first, 0) // 2
    if size(plain) <= target:
        return []
    latest = next(
        (i for i in range(len(plain) - 1, 1, -1) if plain[i].get("role") == "assistant"), len(plain)
    )
    tiers = [(range(2, latest), target), (range(latest, len(plain)), target), (range(1, 2), limit)]
    caps: dict[int, int] = {}

    def view(more: dict[int, int]) -> Messages:
        chosen = {**caps, **more}
        return [_cut_message(m, chosen[i]) if i in chosen else m for i, m in enumerate(plain)]

    def measure(tier: range, cap: int) -> int:
        return size(view(dict.fromkeys(tier, cap)))

    for tier, goal in tiers:
        longest = max((_longest(plain[i]) for i in tier), default=0)
        cap = _largest_cap(partial(measure, tier), goal, longest)
        caps.update(dict.fromkeys(tier, cap if cap is not None else MIN_CUT_CHARS))
        if cap is not None:
            break
    return [(seq, new) for (seq, old), new in zip(messages, view({}), strict=True) if new is not old]


def cut_text(text: str, keep: int) -> str:
    """``text`` in at most ``keep`` characters: its start and end, with a marker for the cut middle."""
    if len(text) <= keep:
        return text
    kept = max(keep - len(_marker(len(text))), 0)
    head = kept * 3 // 4
    tail = text[len(text) - (kept - head) :] if kept > head else ""
    return text[:head] + _marker(len(text) - kept) + tail


def apply(entries: Numbered) -> Numbered:
    """Rebuild a callback's messages from its transcript entries, applying compactions in order.

    ``entries`` are ``(seq, entry)``; message entries carry ``message``, compaction entries
    carry ``replaces`` (seqs) and ``message`` (the summary or cut copy, placed where the first
    replaced one was).
    """
    messages: Numbered = []
    for seq, entry in entries:
        if entry.get("kind") == "message":
            messages.append((seq, entry["message"]))
        elif entry.get("kind") == "compaction":
            replaced = set(entry.get("replaces") or [])
            position = next((i for i, (s, _) in enumerate(messages) if s in replaced), len(messages))
            kept = [(s, m) for s, m in messages if s not in replaced]
            kept.insert(min(position, len(kept)), (seq, entry["message"]))
            messages = kept
    return messages


def originals(entries: Numbered, seqs: Sequence[int]) -> Messages:
    """The messages ``seqs`` name (seqs of ``apply``'s result) as they were before any cut.

    A summary is written from these, so cutting a turn to fit the budget does not also take
    it away from the summary that later replaces it.
    """
    found: dict[int, dict[str, Any]] = {}
    for seq, entry in entries:
        replaced = entry.get("replaces") or []
        if entry.get("kind") == "message":
            found[seq] = entry["message"]
        elif entry.get("kind") == "compaction":
            cut = entry.get("cut") and len(replaced) == 1 and replaced[0] in found
            found[seq] = found[replaced[0]] if cut else entry["message"]
    return [found[seq] for seq in seqs if seq in found]


def _marker(cut: int) -> str:
    return f"\n[… {cut} characters cut here to fit the model's context …]\n"


def _arguments_text(arguments: object) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)


def _longest(message: dict[str, Any]) -> int:
    """The longest cuttable text of ``message`` (its content, or a large call's arguments)."""
    content = message.get("content")
    lengths = [len(content) if isinstance(content, str) else 0]
    for call in message.get("toolCalls") or []:
        length = len(_arguments_text(call.get("arguments")))
        if length > ARGUMENTS_KEPT:
            lengths.append(length)
    return max(lengths)


def _cut_message(message: dict[str, Any], cap: int) -> dict[str, Any]:
    """``message`` with its content (and arguments above ``ARGUMENTS_KEPT``) cut to ``cap``;
    the same object when nothing needed cutting."""
    changed: dict[str, Any] = {}
    content = message.get("content")
    if isinstance(content, str) and len(content) > cap:
        changed["content"] = cut_text(content, cap)
    calls = message.get("toolCalls") or []
    new_calls = []
    for call in calls:
        text = _arguments_text(call.get("arguments"))
        if len(text) > max(cap, ARGUMENTS_KEPT):
            call = {**call, "arguments": cut_text(text, max(cap, ARGUMENTS_KEPT))}
        new_calls.append(call)
    if any(new is not old for new, old in zip(new_calls, calls, strict=True)):
        changed["toolCalls"] = new_calls
    return {**message, **changed} if changed else message


def _largest_cap(measure: Callable[[int], int], limit: int, longest: int) -> int | None:
    """The largest cap in ``[MIN_CUT_CHARS, longest]`` with ``measure(cap) <= limit``.

    ``longest`` itself (nothing cut) when that fits; None when even ``MIN_CUT_CHARS`` does not.
    """
    if measure(longest) <= limit:
        return longest
    if longest <= MIN_CUT_CHARS or measure(MIN_CUT_CHARS) > limit:
        return None
    good, bad = MIN_CUT_CHARS, longest
    while bad - good > 1:
        middle = (good + bad) // 2
        if measure(middle) <= limit:
            good = middle
        else:
            bad = middle
    return good
