"""A group's fallback (SPEC §19) carries what a single fire's says beyond its payload line: the
budget that stopped the session on its first line (§20), the escalation and the "still
investigating" line after the members (§6.4); and it pages with the most urgent priority."""

from __future__ import annotations

from sentinel_hooks.relay.fallback import STILL_INVESTIGATING
from sentinel_hooks.relay.groups import group_fallback
from sentinel_hooks.store.records import GroupInfo
from tests.contract.stores import contract, envelope


def test_a_group_fallback_names_the_budget_the_escalation_and_the_investigation() -> None:
    group = GroupInfo(key="k", by=[("payload.name", "db")], fires=2, members=["cb-1", "cb-2"])
    opened = contract("cb-1", deadline=30).model_copy(update={"group": group})
    members = {m: envelope(m, payload={"n": m}) for m in group.members}
    loud = members["cb-2"].trigger.model_copy(update={"priority": "critical"})
    members["cb-2"] = members["cb-2"].model_copy(update={"trigger": loud})
    text, priority = group_fallback(
        opened,
        group,
        "price_drop",
        members,
        escalation=("critical", "disk full"),
        investigating=True,
        stopped="budgets.perFire.tokens: 200010 of 200000",
    )
    assert "critical" == priority, "a member's priority is above the contract's own"
    assert [
        "Sentinel: 2 fires of price_drop on eth-price grouped by payload.name=db (critical) — no "
        "response from the agent within 30s — the agent's budget ran out "
        "(budgets.perFire.tokens: 200010 of 200000).",
        '• high: n="cb-1"',
        '• critical: n="cb-2"',
        "Escalated (critical): disk full",
        STILL_INVESTIGATING,
    ] == text.split("\n")


def test_without_a_stop_or_escalation_a_group_fallback_is_its_first_line_and_members() -> None:
    group = GroupInfo(key="k", by=[("payload.name", "db")], fires=1, members=["cb-1"])
    opened = contract("cb-1", deadline=30).model_copy(update={"group": group})
    text, _ = group_fallback(opened, group, "price_drop", {"cb-1": envelope("cb-1", payload={"n": 1})})
    assert [
        "Sentinel: 1 fires of price_drop on eth-price grouped by payload.name=db (high) — no response "
        "from the agent within 30s.",
        "• high: n=1",
    ] == text.split("\n")
