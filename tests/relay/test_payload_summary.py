"""The payload summary of the scripted backend's default message: bounded, one line, deterministic."""

from __future__ import annotations

from sentinel_hooks.relay.fallback import default_message, payload_summary


def test_summary_lists_top_level_keys_in_sorted_order() -> None:
    """Keys sorted, values as compact JSON: the same payload reads the same whatever its key order."""
    first = payload_summary({"vault": 7, "health": 1.05, "owner": "ops", "tags": ["a", "b"]})
    second = payload_summary({"tags": ["a", "b"], "owner": "ops", "health": 1.05, "vault": 7})
    assert 'health=1.05, owner="ops", tags=["a","b"], vault=7' == first == second


def test_summary_of_many_keys_is_bounded_and_counts_the_rest() -> None:
    """Past 200 characters the remaining keys are counted, not shown; each pair is cut at 48."""
    summary = payload_summary({f"key{n:03}": "v" * 100 for n in range(500)})
    assert len(summary) <= 200
    pair = 'key000="' + "v" * 39 + "…"
    assert (48, True, True) == (len(pair), summary.startswith(pair + ", key001="), summary.endswith(" more)"))


def test_summary_stays_on_one_line() -> None:
    """Newlines in keys and values never break the line."""
    summary = payload_summary({"a\nb": "line one\nline two"})
    assert "\n" not in summary


def test_summary_of_a_non_object_is_the_payload_line() -> None:
    """A list, a number or null reads as compact JSON."""
    assert ("[1,2]", "null", "{}") == (payload_summary([1, 2]), payload_summary(None), payload_summary({}))


def test_default_message_names_event_watcher_and_priority() -> None:
    """``{eventName} fired on {watcherId} ({priority}): {summary}``."""
    line = default_message(event_name="disk_full", watcher_id="db-1", priority="high", payload={"pct": 97})
    assert "disk_full fired on db-1 (high): pct=97" == line
