"""The pure transition table of inbox items: which actions each kind and status accept."""

from __future__ import annotations

import pytest

from sentinel_hooks.inbox.transitions import RULES, initial_status, kind_refusal, refusal, status_refusal


@pytest.mark.parametrize("kind", ["escalation", "approval", "delivery_failure"])
def test_every_kind_starts_open(kind: str) -> None:
    """New items of every kind are open."""
    assert "open" == initial_status(kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("action", "status", "expected"),
    [
        ("ack", "open", "acked"),
        ("resolve", "open", "resolved"),
        ("resolve", "acked", "resolved"),
        ("approve", "open", "approved"),
        ("deny", "open", "denied"),
        ("expire", "open", "expired"),
    ],
)
def test_allowed_moves(action: str, status: str, expected: str) -> None:
    """Each allowed move accepts its from-status and sets its to-status."""
    rule = RULES[action]  # type: ignore[index]
    assert (True, expected) == (status in rule.from_statuses, rule.to_status)


@pytest.mark.parametrize(
    ("action", "kind", "status"),
    [
        ("ack", "escalation", "acked"),
        ("ack", "delivery_failure", "resolved"),
        ("resolve", "escalation", "resolved"),
        ("approve", "approval", "denied"),
        ("deny", "approval", "approved"),
        ("expire", "approval", "approved"),
    ],
)
def test_moves_from_a_later_status_are_refused(action: str, kind: str, status: str) -> None:
    """A settled or already-moved item refuses the action."""
    assert refusal("i-1", kind, status, action) is not None  # type: ignore[arg-type]


def test_status_refusal_names_current_status_and_allowed_ones() -> None:
    """Resolving a resolved item says what it is and which statuses can be resolved."""
    expected = "item i-1 is resolved; only open or acked items can be resolved"
    assert expected == status_refusal("i-1", "resolved", "resolve")


def test_approval_status_refusal_speaks_of_approvals() -> None:
    """Approving a denied approval says only open approvals can be approved."""
    expected = "item a-1 is denied; only open approvals can be approved"
    assert expected == status_refusal("a-1", "denied", "approve")


@pytest.mark.parametrize(
    ("action", "done"), [("approve", "approved"), ("deny", "denied"), ("expire", "expired")]
)
def test_decisions_refuse_non_approvals(action: str, done: str) -> None:
    """approve/deny/expire on an escalation is refused, pointing to ack/resolve."""
    expected = (
        f"item e-1 is an escalation, not an approval; only approvals can be {done} "
        "(ack or resolve it instead)"
    )
    assert expected == kind_refusal("e-1", "escalation", action)  # type: ignore[arg-type]


@pytest.mark.parametrize(("action", "done"), [("ack", "acked"), ("resolve", "resolved")])
def test_ack_and_resolve_refuse_approvals(action: str, done: str) -> None:
    """ack/resolve on an approval is refused, pointing to approve/deny."""
    expected = (
        f"item a-1 is an approval; approvals are approved or denied, not {done} "
        "(use `sentinel approvals approve|deny a-1`)"
    )
    assert expected == kind_refusal("a-1", "approval", action)  # type: ignore[arg-type]


def test_delivery_failure_article_reads_naturally() -> None:
    """A delivery failure is 'a delivery failure' in messages."""
    expected = (
        "item d-1 is a delivery failure, not an approval; only approvals can be approved "
        "(ack or resolve it instead)"
    )
    assert expected == kind_refusal("d-1", "delivery_failure", "approve")


def test_allowed_move_has_no_refusal() -> None:
    """An allowed action for the kind and status gives no refusal."""
    assert refusal("i-1", "escalation", "acked", "resolve") is None
