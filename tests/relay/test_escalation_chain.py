"""The pure part of escalation chains: when each step is due, which follows, what it says."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from sentinel_hooks.config.escalation import EscalationPolicySpec
from sentinel_hooks.relay.escalation import Chain, chain_status, format_age, step_text
from sentinel_hooks.store.records import Delivery, InboxItem

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def chain(after: list[int], repeat: int | None = None) -> Chain:
    steps = [{"afterMs": ms, "targets": [f"t{i}"]} for i, ms in enumerate(after)]
    return Chain.of("p", EscalationPolicySpec.model_validate({"steps": steps, "repeatAfterMs": repeat}))


def item(kind: str = "escalation", status: str = "open", watcher: str | None = "vault") -> InboxItem:
    return InboxItem.model_validate(
        {
            "id": "01ITEM",
            "kind": kind,
            "status": status,
            "severity": "critical",
            "reason": "vault health low",
            "watcherId": watcher,
            "createdAt": T0,
            "updatedAt": T0,
            "actor": "agent",
        }
    )


def test_steps_are_due_after_their_after_ms() -> None:
    """Without repeat, step n is due afterMs of step n after creation, and the chain ends."""
    three = chain([0, 900_000, 1_800_000])
    assert [0, 900_000, 1_800_000] == [three.offset_ms(n) for n in range(3)]
    assert [1, 2, None] == [three.next_after(n, elapsed_ms=0) for n in range(3)]


def test_repeat_restarts_the_steps_repeat_after_ms_after_the_last_one() -> None:
    """Steps 0/15/30 min with a 60 min repeat: round two starts at 90 min, numbering goes on."""
    three = chain([0, 900_000, 1_800_000], repeat=3_600_000)
    assert [5_400_000, 6_300_000, 7_200_000, 10_800_000] == [three.offset_ms(n) for n in (3, 4, 5, 6)]
    assert ("t0", 3) == (three.step(3).targets[0], three.next_after(2, elapsed_ms=1_800_000))


def test_repeat_counts_from_the_last_step_when_the_first_is_late() -> None:
    """Steps at 5 and 10 min, repeat 60 min: the next round's first step is 60 min after the 10th."""
    two = chain([300_000, 600_000], repeat=3_600_000)
    assert 4_200_000 == two.offset_ms(2)


def test_whole_overdue_rounds_are_skipped_after_downtime() -> None:
    """Down for three periods: the next step is the latest overdue repeat of that step, not each."""
    one = chain([0], repeat=60_000)
    assert 1 == one.next_after(0, elapsed_ms=60_000)  # on time: the next round
    assert 4 == one.next_after(0, elapsed_ms=240_500)  # rounds 1 to 3 missed: only round 4 (due 240 s)


@given(
    st.lists(st.integers(0, 10_000), min_size=1, max_size=5).map(sorted),
    st.one_of(st.none(), st.integers(60_000, 120_000)),  # the §15 floor is 60000
    st.integers(0, 40),
    st.integers(0, 4_000_000),
)
def test_next_step_is_later_and_never_skips_a_step_of_the_first_round(
    after: list[int], repeat: int | None, number: int, elapsed_ms: int
) -> None:
    """The following step is numbered higher and due no earlier; within the first round no step is
    skipped; a skipped repeat is overdue and the step chosen is the same policy step."""
    policy = chain(after, repeat)
    if repeat is None:
        number = number % len(after)
    following = policy.next_after(number, elapsed_ms=elapsed_ms)
    if following is None:
        assert (None, len(after) - 1) == (repeat, number)
        return
    assert following > number
    assert policy.offset_ms(following) >= policy.offset_ms(number)
    if number + 1 < len(after):
        assert number + 1 == following
    elif following != number + 1:
        assert following % len(after) == (number + 1) % len(after)
        assert policy.offset_ms(following) <= elapsed_ms


def test_ages_read_at_a_glance() -> None:
    """Seconds below a minute, then days, hours and minutes."""
    assert ["1.5s", "45s", "15m", "1h", "1h30m", "1d2h"] == [
        format_age(ms) for ms in (1500, 45_000, 900_000, 3_600_000, 5_400_000, 93_600_000)
    ]


def test_a_later_step_says_how_long_it_has_been_unacknowledged() -> None:
    """SPEC §15's text, then the link when publicUrl is set."""
    text = step_text(item(), 900_000, public_url="https://s.example.com")
    assert (
        "Unacknowledged for 15m: vault health low (escalation, critical, watcher vault) — "
        "ack: sentinel inbox ack 01ITEM\nhttps://s.example.com/#inbox/01ITEM"
    ) == text


def test_an_approval_step_says_how_to_approve_or_deny() -> None:
    """An approval cannot be acked: its steps name approve and deny instead."""
    assert step_text(item("approval", watcher=None), 60_000).endswith(
        "(approval, critical) — approve: sentinel approvals approve 01ITEM"
        " · deny: sentinel approvals deny 01ITEM"
    )


def test_the_first_step_names_the_item_and_how_to_ack_it() -> None:
    """Step 0 at afterMs 0 has SPEC §15's text too: the first person paged can ack from it."""
    assert (
        "Unacknowledged for 0s: vault health low (escalation, critical, watcher vault) — "
        "ack: sentinel inbox ack 01ITEM"
    ) == step_text(item(), 0)
    assert step_text(item("approval"), 0).endswith(
        "(approval, critical, watcher vault) — approve: sentinel approvals approve 01ITEM"
        " · deny: sentinel approvals deny 01ITEM"
    )


def delivery(step: int, state: str = "pending", attempts: int = 0, due_s: int = 0) -> Delivery:
    made = Delivery.new(
        "01ITEM",
        "t",
        f"escalation.{step}",
        {"extra": {"escalation": {"policy": "p", "step": step}}},
        at=T0.replace(second=due_s),
    )
    return made.model_copy(update={"state": state, "attempts": attempts})


def test_status_names_the_step_reached_and_the_next() -> None:
    """Step 1 sent, step 2 waiting: step 1, next 2 at its time; a closed item shows no next."""
    sent = [delivery(0, "delivered", 1), delivery(1, "delivered", 1, 5), delivery(2, due_s=9)]
    assert {"policy": "p", "step": 1, "nextStep": 2, "nextAt": "2026-01-01T00:00:09.000Z"} == chain_status(
        item(), sent
    )
    assert {"policy": "p", "step": 1, "nextStep": None, "nextAt": None} == chain_status(
        item(status="acked"), sent
    )
    assert chain_status(item(), []) is None
