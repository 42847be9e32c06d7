"""A callback's notifies are numbered from its transcript (``notifies_in``), so a resumed
session gives a repeated tool call the same number, and so the same delivery keys."""

from __future__ import annotations

import json
from typing import Any

from sentinel_hooks.callbacks.sessions.tools import notifies_in


def result(content: Any, name: str = "sentinel_act") -> dict[str, Any]:
    return {"role": "tool", "name": name, "toolCallId": "x", "content": json.dumps(content)}


def test_no_notify_yet_is_zero() -> None:
    """The first notify of a callback is number 1."""
    assert 0 == notifies_in([{"role": "system", "content": "…"}, {"role": "user", "content": "…"}])


def test_the_highest_number_handed_to_delivery_counts() -> None:
    """Failed and retrying notifies took their number too; refused ones (no number) did not."""
    messages = [
        result({"ok": True, "notify": 1, "delivered": ["oncall"]}),
        result({"ok": False, "notify": 2, "failed": ["oncall"]}),
        result({"ok": False, "error": "too late: …"}),
        result({"ok": True, "notify": 3, "retrying": ["oncall"]}),
    ]
    assert 3 == notifies_in(messages)


def test_other_tools_and_unreadable_results_are_ignored() -> None:
    """Only sentinel_act results that carry a number count."""
    messages = [
        result({"ok": True, "notify": 7}, name="sentinel_escalate"),
        {"role": "tool", "name": "sentinel_act", "content": "[… 300 characters cut here …]"},
        {"role": "assistant", "content": '{"notify": 9}'},
    ]
    assert 0 == notifies_in(messages)
