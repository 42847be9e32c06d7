"""A model call's usage (SPEC §20): as reported, or estimated at characters ÷ 4; its cost. Pure."""

from __future__ import annotations

from sentinel_hooks.core.usage import Usage, call_usage, estimate_tokens
from sentinel_hooks.relay.fallback import fallback_text


def test_reported_counts_are_taken_as_they_are() -> None:
    """The API's counts win over any estimate, and are priced per million tokens."""
    usage, estimated = call_usage(
        {"inputTokens": 1000, "outputTokens": 200},
        request="x" * 99,
        reply_text="y",
        reply_calls=[],
        prices=(3.0, 15.0),
    )
    assert (Usage(1000, 200, 0.006), False) == (usage, estimated)


def test_without_counts_characters_over_four_are_counted() -> None:
    """No counts: the request's and the reply's characters ÷ 4, rounded up; no pricing, no cost."""
    usage, estimated = call_usage({}, request="x" * 401, reply_text="abcd", reply_calls=[], prices=None)
    assert (Usage(101, 1, 0.0), True) == (usage, estimated)


def test_tool_calls_are_counted_as_their_json() -> None:
    """A reply that is only a tool call still has output tokens."""
    calls = [{"id": "c1", "name": "sentinel_act", "arguments": {"action": "notify"}}]
    usage, _ = call_usage({}, request="", reply_text=None, reply_calls=calls, prices=None)
    assert estimate_tokens(calls) == usage.output_tokens > 0


def test_the_fallback_says_which_budget_ran_out() -> None:
    """A session stopped by its budget: the fallback's first line names the budget."""
    text = fallback_text(
        event_name="disk_full",
        watcher_id="db",
        priority="high",
        timeout_ms=30000,
        payload={"disk": 97},
        stopped="budgets.perFire.tokens: 200010 of 200000",
    )
    assert (
        "Sentinel: disk_full fired on db (high) — no response from the agent within 30s — "
        "the agent's budget ran out (budgets.perFire.tokens: 200010 of 200000)."
    ) == text.splitlines()[0]
