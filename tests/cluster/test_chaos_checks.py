"""The chaos test's checks catch what they are meant to catch (fast; no processes)."""

from __future__ import annotations

from typing import Any

from tests.cluster.chaos import Poll, Received, judge, overlapping_polls


def polls(watcher_id: str, replica: str, *times: float) -> list[Poll]:
    return [Poll(watcher_id, replica, at) for at in times]


def test_a_hand_off_is_not_an_overlap() -> None:
    """A polls at 0, 1, 2; B takes over at 2.1 (a hand-off, even a close one)."""
    seen = polls("w", "A", 0, 1, 2) + polls("w", "B", 2.1, 3.1, 4.1)
    assert [] == overlapping_polls(seen, 1.0)


def test_two_replicas_polling_one_watcher_overlap() -> None:
    seen = polls("w", "A", 0, 1, 2, 3) + polls("w", "B", 0.5, 1.5)
    assert {("w", "A", "B"), ("w", "B", "A")} == {found[:3] for found in overlapping_polls(seen, 1.0)}


def test_a_poll_after_a_long_gap_is_not_an_overlap() -> None:
    """A lost the lease (a pause), B polled meanwhile, A polls again later: not the same interval."""
    seen = polls("w", "A", 0, 5) + polls("w", "B", 2)
    assert [] == overlapping_polls(seen, 1.0)


def contract(callback_id: str, state: str, *, late_s: float = 0.0) -> dict[str, Any]:
    deadline = "2026-01-01T00:00:03.000Z"
    settled = f"2026-01-01T00:00:{3 + late_s:06.3f}Z"
    return {"callbackId": callback_id, "state": state, "deadline": deadline, "settledAt": settled}


def got(callback_id: str, kind: str, at: float = 0.0, *, page: bool = True) -> Received:
    return Received(callback_id, f"{callback_id}:sink:{kind}", at, page)


def test_one_outcome_each_passes() -> None:
    contracts = [contract("a", "fulfilled"), contract("b", "fallback_sent"), contract("c", "deduped")]
    outcomes = judge(contracts, [got("a", "notify"), got("b", "fallback")], late_after_s=2)
    assert {} == outcomes.violations()
    assert (2, 1, 1, 1) == (outcomes.contracts, outcomes.fulfilled, outcomes.fallback_sent, outcomes.deduped)


def test_each_violation_is_caught() -> None:
    contracts = [
        contract("missing", "fulfilled"),
        contract("both", "fulfilled"),
        contract("wrong", "fallback_sent"),
        contract("late", "fallback_sent", late_s=2.5),
        contract("open", "pending"),
        contract("dup", "deduped"),
    ]
    received = [
        got("both", "notify"),
        got("both", "fallback"),
        got("wrong", "notify"),
        got("late", "fallback"),
        got("dup", "notify"),
        got("late", "fallback"),
    ]
    outcomes = judge(contracts, received, late_after_s=2)
    assert ["missing"] == outcomes.missing
    assert ["both"] == [entry.split(":")[0] for entry in outcomes.doubled]
    assert ["wrong"] == [entry.split(":")[0] for entry in outcomes.wrong_kind]
    assert [("late", 2.5)] == outcomes.late
    assert {"pending": 1} == dict(outcomes.other_states)
    assert ["dup"] == outcomes.unknown
    assert 1 == outcomes.redelivered


def test_a_notify_for_a_fallback_sent_contract_is_late_but_a_fallback_for_a_fulfilled_one_is_doubled() -> (
    None
):
    contracts = [
        contract("after", "fallback_sent"),
        contract("before", "fallback_sent"),
        contract("f", "fulfilled"),
    ]
    received = [
        got("after", "fallback", at=1.0),
        got("after", "notify", at=2.0),
        got("before", "notify", at=1.0),
        got("before", "fallback", at=2.0),
        got("f", "notify", at=1.0),
        got("f", "fallback", at=2.0),
    ]
    outcomes = judge(contracts, received, late_after_s=2)
    assert (["after", "before"], 1) == (outcomes.late_notify, outcomes.notify_first)
    assert ["f"] == [entry.split(":")[0] for entry in outcomes.doubled]


def test_a_follow_up_of_the_fallback_is_no_second_outcome() -> None:
    """An agent that answered after the fallback reaches people as a follow-up (``page`` false):
    counted apart, neither late nor doubled."""
    contracts = [contract("slow", "fallback_sent")]
    received = [got("slow", "fallback", at=1.0), got("slow", "notify", at=2.0, page=False)]
    outcomes = judge(contracts, received, late_after_s=2)
    assert ([], [], 1) == (outcomes.late_notify, outcomes.doubled, outcomes.follow_ups)
