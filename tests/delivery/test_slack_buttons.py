"""Block Kit buttons (SPEC §21): one action id per button, the acted-on id as its value, the
posting target in the block id; a click parsed back from Slack's payload."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest

from sentinel_hooks.delivery.targets.slack_buttons import (
    ACTION_IDS,
    NotAClick,
    approval_buttons,
    done_line,
    page_buttons,
    parse_click,
    payload_json,
    with_status,
    without_buttons,
)

SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "x"}}


def click_payload(action_id: str, value: str, block_id: str, user: str = "U012ABCDEF") -> dict[str, Any]:
    """A ``block_actions`` payload as Slack posts it for one button."""
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "alice"},
        "container": {"type": "message", "message_ts": "1700000000.000001", "channel_id": "C0OPS"},
        "channel": {"id": "C0OPS"},
        "message": {"ts": "1700000000.000001", "text": "disk full", "blocks": [SECTION]},
        "actions": [{"action_id": action_id, "block_id": block_id, "value": value, "type": "button"}],
    }


def test_page_carries_ack_resolve_silence_and_feedback_on_its_callback() -> None:
    """Every page button carries the callback id; the block id names the target."""
    [block] = page_buttons("ops", "cb_1")
    values = {element["action_id"]: element["value"] for element in block["elements"]}
    expected = ["sentinel.ack", "sentinel.resolve", "sentinel.silence_1h"]
    assert dict.fromkeys([*expected, "sentinel.feedback_up", "sentinel.feedback_down"], "cb_1") == values
    assert ("sentinel.page:ops", set(values) <= ACTION_IDS) == (block["block_id"], True)


def test_approval_carries_approve_and_deny_and_buttons_come_off() -> None:
    """Approve/Deny carry the approval id; without_buttons strips only Sentinel's action blocks."""
    blocks = [SECTION, *approval_buttons("ops", "ap_1")]
    assert ["ap_1", "ap_1"] == [element["value"] for element in blocks[1]["elements"]]
    assert [SECTION] == without_buttons(blocks)


def test_a_status_line_goes_above_the_buttons_and_closing_drops_them() -> None:
    """Lines accumulate in one context block; a closed message keeps the lines, not the buttons."""
    at = datetime(2026, 1, 1, 10, 32, tzinfo=UTC)
    acked = with_status(
        [SECTION, *page_buttons("ops", "cb")], done_line("✔ acked", "alice", at), closed=False
    )
    assert ["section", "context", "actions"] == [b["type"] for b in acked]
    closed = with_status(acked, done_line("✔ resolved", "bob", at), closed=True)
    lines = [e["text"] for e in closed[1]["elements"]]
    assert (["section", "context"], ["✔ acked by alice at 10:32 UTC", "✔ resolved by bob at 10:32 UTC"]) == (
        [b["type"] for b in closed],
        lines,
    )


def test_a_click_is_parsed_from_the_form() -> None:
    """The form's payload gives who clicked what, on which id, from which target's message."""
    body = urlencode({"payload": json.dumps(click_payload("sentinel.ack", "cb_1", "sentinel.page:ops"))})
    click = parse_click(json.loads(payload_json(body.encode())))
    assert ("U012ABCDEF", "ack", "cb_1", "ops", "C0OPS", "1700000000.000001") == (
        click.user,
        click.action,
        click.value,
        click.target,
        click.channel,
        click.ts,
    )


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"type": "view_submission"}, "not block_actions"),
        (click_payload("other.button", "x", "sentinel.page:ops"), "not one of Sentinel's buttons"),
        (click_payload("sentinel.approve", "x", "sentinel.page:ops"), "not one of Sentinel's action blocks"),
        (click_payload("sentinel.ack", "", "sentinel.page:ops"), "not one of Sentinel's buttons"),
        ({**click_payload("sentinel.ack", "x", "sentinel.page:ops"), "user": {}}, "user.id is missing"),
    ],
)
def test_what_is_not_a_click_of_ours_is_refused(payload: dict[str, Any], why: str) -> None:
    """Anything but one of Sentinel's buttons in its own block is NotAClick, saying why."""
    with pytest.raises(NotAClick, match=why):
        parse_click(payload)


def test_a_form_without_one_payload_is_refused() -> None:
    with pytest.raises(NotAClick, match="no payload"):
        payload_json(b"a=1")
