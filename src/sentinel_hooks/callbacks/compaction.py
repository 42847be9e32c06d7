"""Keeping a session's conversation inside the model's context (SPEC.md §5.1).

When the messages of a callback grow past ``CONTEXT_CHARS`` (about 24k tokens), the older
turns are summarised by the model itself; the system prompt, the first user message (the
envelope) and the latest turns are kept. The summary is recorded in the transcript as a
``compaction`` entry naming the messages it replaces, so the full history stays auditable and
a resumed session rebuilds the same conversation.
"""

from __future__ import annotations

import json
from typing import Any

CONTEXT_CHARS = 96_000
KEEP_LATEST = 6

SUMMARY_PROMPT = (
    "Summarise the conversation below for yourself in at most 15 lines: what was observed, which tools "
    "were called with which results, what was decided, and what is still open. Keep exact numbers, names "
    "and command outputs that matter. Answer with the summary only."
)


def size(messages: list[dict[str, Any]]) -> int:
    """The conversation's size in characters (its JSON)."""
    return sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in messages)


def split_for_compaction(
    messages: list[tuple[int, dict[str, Any]]],
) -> tuple[list[int], list[dict[str, Any]]] | None:
    """``(seqs to replace, messages to summarise)``, or None when nothing can be compacted.

    Messages are ``(seq, message)``; the first two (system, envelope) and the latest
    ``KEEP_LATEST`` are kept, and the kept tail never starts with a tool result (which must
    follow the assistant message that asked for it).
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
    return [seq for seq, _ in middle], [m for _, m in middle]


def summary_request(middle: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages asking the model for a summary of ``middle``."""
    text = "\n".join(json.dumps(m, ensure_ascii=False, default=str) for m in middle)
    return [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": text[-CONTEXT_CHARS:]}]


def summary_message(summary: str) -> dict[str, Any]:
    return {"role": "user", "content": f"(Summary of the earlier turns of this callback)\n{summary.strip()}"}


def apply(entries: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """Rebuild a callback's messages from its transcript entries, applying compactions in order.

    ``entries`` are ``(seq, entry)``; message entries carry ``message``, compaction entries
    carry ``replaces`` (seqs) and ``message`` (the summary, placed where the first replaced one was).
    """
    messages: list[tuple[int, dict[str, Any]]] = []
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
