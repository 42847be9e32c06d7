"""Grouping's pure part (SPEC §19): the group key, the session key, the group's texts, the bounds."""

from __future__ import annotations

import pytest

from sentinel_hooks.core.envelope import Envelope, EnvelopeTrigger, EnvelopeWatcher
from sentinel_hooks.core.grouping import (
    GroupRule,
    bounded_members,
    by_values,
    check_by_path,
    group_fallback_text,
    group_key,
    group_session_key,
    highest_priority,
    joined_text,
)

RULE = GroupRule(
    name="am", by=("payload.labels.alertname", "context.cluster"), wait_ms=1, interval_ms=1, max_fires=9
)


def envelope(payload: object, context: dict[str, object] | None = None) -> Envelope:
    return Envelope(
        watcher=EnvelopeWatcher(id="am", event_name="alert", tags=["db"]),
        trigger=EnvelopeTrigger(matched_at="2026-01-01T00:00:00Z", priority="high"),
        payload=payload,
        context=context or {},
    )


def test_by_values_are_read_from_the_envelope_a_missing_one_null() -> None:
    """Each `by` path's value in order; a path that does not resolve is None."""
    assert ["HighCPU", None] == by_values(RULE, envelope({"labels": {"alertname": "HighCPU"}}))


def test_watcher_and_trigger_paths_read_the_fire() -> None:
    """watcher.id, watcher.tags and trigger.priority read the envelope's own fields."""
    rule = GroupRule(
        name="x", by=("watcher.id", "watcher.tags", "trigger.priority"), wait_ms=1, interval_ms=1, max_fires=1
    )
    assert ["am", ["db"], "high"] == by_values(rule, envelope(None))


def test_the_key_is_canonical_whatever_the_key_order() -> None:
    """Equal values make equal keys (canonical JSON), and the name is part of the key."""
    one = group_key("am", [{"a": 1, "b": 2}])
    assert one == group_key("am", [{"b": 2, "a": 1}])
    assert '["am",[{"a":1,"b":2}]]' == one
    assert one != group_key("other", [{"a": 1, "b": 2}])


def test_session_key_is_the_group_s() -> None:
    """`{hookSessionPrefix}:group:{key}`."""
    assert 'sentinel:hooks:group:["am",[1]]' == group_session_key("sentinel:hooks", group_key("am", [1]))


@pytest.mark.parametrize("path", ["labels.x", "watcher.name", "payload", "trigger", "context"])
def test_paths_outside_the_envelope_are_refused(path: str) -> None:
    """Only watcher.id, watcher.tags, trigger.priority, payload.<path> and context.<path>."""
    with pytest.raises(ValueError, match="is not an envelope path grouping can read"):
        check_by_path(path)


def test_highest_priority_wins() -> None:
    """The group's priority is its most urgent member's."""
    assert "critical" == highest_priority(["low", "critical", "high"])
    assert "normal" == highest_priority([])


def test_fallback_names_the_group_and_shows_five_members_then_a_count() -> None:
    """SPEC §19's first line, one line per member (at most 5), then `… and K more`."""
    text = group_fallback_text(
        fires=40,
        event_name="alert",
        watcher_id="am",
        by=("payload.labels.alertname", "context.n"),
        values=("HighCPU", 3),
        priority="critical",
        timeout_ms=30000,
        lines=[f"m{i}" for i in range(40)],
    )
    expected = [
        "Sentinel: 40 fires of alert on am grouped by payload.labels.alertname=HighCPU, context.n=3 "
        "(critical) — no response from the agent within 30s.",
        "m0",
        "m1",
        "m2",
        "m3",
        "m4",
        "… and 35 more",
    ]
    assert expected == text.split("\n")


def test_joined_follow_up_counts_the_joins() -> None:
    """`{K} more fires:` with their lines, bounded like the fallback's."""
    assert "1 more fire:\na" == joined_text(1, ["a"])
    assert "7 more fires:\n0\n1\n2\n3\n4\n… and 2 more" == joined_text(7, [str(i) for i in range(7)])


def test_a_session_sees_twenty_members_whole_and_beyond_the_ends_and_a_count() -> None:
    """Up to 20 members all; past that the first 10, the last 10 and how many are left out."""
    assert (list(range(20)), 0, []) == bounded_members(list(range(20)))
    assert (list(range(10)), 5, list(range(15, 25))) == bounded_members(list(range(25)))
