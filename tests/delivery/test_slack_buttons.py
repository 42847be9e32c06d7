"""Block Kit buttons (SPEC §21): one action id per button, the acted-on id as its value."""

from __future__ import annotations

from sentinel_hooks.delivery.targets.slack_buttons import (
    ACTION_IDS,
    approval_buttons,
    page_buttons,
    without_buttons,
)


def test_page_carries_ack_resolve_silence_and_feedback() -> None:
    """The inbox id rides on Ack/Resolve/Silence, the callback id on 👍/👎."""
    [block] = page_buttons("inb_1", "cb_1")
    values = {element["action_id"]: element["value"] for element in block["elements"]}
    assert {
        "sentinel.ack": "inb_1",
        "sentinel.resolve": "inb_1",
        "sentinel.silence_1h": "inb_1",
        "sentinel.feedback_up": "cb_1",
        "sentinel.feedback_down": "cb_1",
    } == values
    assert set(values) <= ACTION_IDS


def test_approval_carries_approve_and_deny_and_buttons_come_off() -> None:
    """Approve/Deny carry the approval id; without_buttons strips only Sentinel's blocks."""
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}, *approval_buttons("ap_1")]
    assert ["ap_1", "ap_1"] == [element["value"] for element in blocks[1]["elements"]]
    assert [blocks[0]] == without_buttons(blocks)
    assert [] == page_buttons(None, None)
