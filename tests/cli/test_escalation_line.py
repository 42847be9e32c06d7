"""`sentinel inbox show` says where an item's escalation chain is."""

from __future__ import annotations

from sentinel_hooks.cli.inbox import escalation_line


def test_the_line_names_the_policy_the_step_sent_and_the_next() -> None:
    """The last step sent and when the next goes out; a closed chain has no next."""
    chain = {"policy": "oncall", "step": 1, "nextStep": 2, "nextAt": "2026-01-01T00:30:00.000Z"}
    assert "oncall, step 1 sent, step 2 at 2026-01-01T00:30:00.000Z" == escalation_line(chain)
    assert "oncall, no step sent yet" == escalation_line({**chain, "step": None, "nextAt": None})
