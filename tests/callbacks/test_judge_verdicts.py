"""Reading a judge's answer, folding verdicts into a decision, and the circuit breaker's guarantees."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sentinel_hooks.callbacks.policy.judge import Verdict, overrule, read_answer
from sentinel_hooks.callbacks.policy.rules import PolicyDecision
from sentinel_hooks.callbacks.sessions.actions import denial_streak
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.testing import FakeOpenAIServer
from tests.support import wait_for


def test_a_verdict_json_is_read() -> None:
    """The three keys with their types make an answer."""
    assert (True, 0.8, "deletes data") == read_answer(
        '{"violation": true, "confidence": 0.8, "reason": "deletes data"}'
    )


def test_a_fenced_verdict_is_read() -> None:
    """Small models wrap JSON in a Markdown fence; that is still the answer."""
    assert (False, 1.0, "ok") == read_answer(
        '```json\n{"violation": false, "confidence": 1, "reason": "ok"}\n```'
    )


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "no violation",
        "[1, 2]",
        '{"violation": "yes", "confidence": 0.9, "reason": "x"}',
        '{"violation": true, "confidence": 1.2, "reason": "x"}',
        '{"violation": true, "confidence": true, "reason": "x"}',
        '{"violation": true, "confidence": 0.9}',
        '{"violation": true, "reason": "x"}',
    ],
)
def test_anything_else_is_not_an_answer(text: str | None) -> None:
    """Prose, other JSON, a wrong type or a confidence outside 0..1 is not the verdict JSON."""
    assert read_answer(text) is None


def verdict(decision: str, priority: int = 0, rule_id: str = "r") -> Verdict:
    outcome = "violation" if decision != "auto" else "clear"
    return Verdict(rule_id, "judge", outcome, decision, 0.9, "because", 1.0, priority)  # type: ignore[arg-type]


DECISIONS = st.sampled_from(["auto", "needs_approval", "deny"])


@given(plain=DECISIONS, asked=st.lists(st.tuples(DECISIONS, st.integers(-5, 5)), max_size=5))
def test_judges_never_loosen_a_decision(plain: str, asked: list[tuple[str, int]]) -> None:
    """Whatever the verdicts, the result is at least as strict as the plain decision and as every
    objection; an allow comes only from auto with no objection."""
    strictness = {"auto": 0, "needs_approval": 1, "deny": 2}
    verdicts = [verdict(d, p, f"r{n}") for n, (d, p) in enumerate(asked)]
    result = overrule(PolicyDecision(plain, None, "plain"), verdicts)  # type: ignore[arg-type]
    assert strictness[result.decision] >= strictness[plain]
    if plain == "auto":
        assert strictness[result.decision] == max([0, *(strictness[d] for d, _ in asked)])
    assert len(verdicts) == len(result.verdicts)


def test_the_strictest_then_highest_priority_objection_decides() -> None:
    """deny beats needs_approval whatever the priorities; among denials the higher priority speaks."""
    verdicts = [verdict("needs_approval", 9, "ask"), verdict("deny", 1, "low"), verdict("deny", 5, "high")]
    decided = overrule(PolicyDecision("auto", None, "plain"), verdicts)
    assert ("deny", "high") == (decided.decision, decided.rule_id)


def tool(result: dict[str, Any]) -> dict[str, Any]:
    return {"role": "tool", "toolCallId": "c", "name": "sentinel_act", "content": json.dumps(result)}


def test_denials_in_a_row_are_counted_from_the_end() -> None:
    """Policy denials and denied or expired approvals count; anything else resets the count."""
    deny = tool({"ok": False, "policy": {"decision": "deny"}})
    expired = tool({"ok": False, "approval": {"status": "expired"}})
    allowed = tool({"ok": True, "policy": {"decision": "auto"}})
    assert 2 == denial_streak([deny, deny, allowed, deny, {"role": "assistant"}, expired])
    assert 0 == denial_streak([deny, allowed])


CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
hookResponseTimeoutMs: 60000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  agent: {{type: openai, baseUrl: "{model}", model: m, timeoutMs: 5000}}
targets: {{out: {{type: console}}}}
actionPolicy:
  default: deny
  circuitBreaker: {breaker}
  rules:
    - {{id: no-denied, decision: deny, conditions: [{{path: command, op: matches, value: denied}}]}}
    - {{id: touch-ok, decision: auto, conditions: [{{path: argv0, op: eq, value: touch}}]}}
"""


def expected_trip(plan: list[bool], breaker: int) -> int | None:
    """The index of the proposal after which the breaker trips (None: it never does)."""
    streak = 0
    for index, denied in enumerate(plan):
        streak = streak + 1 if denied else 0
        if streak >= breaker:
            return index
    return None


async def scenario(plan: list[bool], breaker: int, work: Path) -> tuple[int, int]:
    """Run one callback whose agent proposes ``plan`` (True: a denied command) one call per turn;
    the agent's requests and the escalations filed."""
    async with FakeOpenAIServer() as model:
        for index, denied in enumerate(plan):
            name = f"denied-{index}" if denied else f"allowed-{index}"
            model.reply_tool_call(
                "sentinel_act", {"action": "run_command", "command": "touch", "args": [str(work / name)]}
            )
        (work / "sentinel.yaml").write_text(CONFIG.format(model=model.url, breaker=breaker))
        (work / "watchers").mkdir()
        (work / "watchers" / "w.yaml").write_text("id: w\nstrategy: webhook\ndeliveryTargets: [out]\n")
        service = Service(load_config(work / "sentinel.yaml", environ={}))
        await service.start()
        try:
            outcome = await service.manager.ingest("w", {"n": 1})
            assert outcome.contract is not None
            callback_id = outcome.contract.callback_id
            await wait_for(lambda: service.sessions.queue.finished.get(callback_id), what="the session")
            escalations = len((await service.store.list_inbox(kind="escalation")).items)
        finally:
            await service.stop()
        return len(model.requests), escalations


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=st.lists(st.booleans(), min_size=1, max_size=7), breaker=st.integers(1, 4))
def test_the_breaker_stops_exactly_at_n_denials_and_never_allows(plan: list[bool], breaker: int) -> None:
    """No denied command ever runs; the session stops right after the Nth denial in a row (the model
    not asked again) and escalates once; without such a run every proposal is handled."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        requests, escalations = asyncio.run(scenario(plan, breaker, work))
        made = sorted(p.name for p in work.iterdir() if p.name.startswith(("denied-", "allowed-")))
    trip = expected_trip(plan, breaker)
    handled = len(plan) if trip is None else trip + 1
    assert [] == [name for name in made if name.startswith("denied-")]
    assert sorted(f"allowed-{i}" for i in range(handled) if not plan[i]) == made
    assert (handled + (trip is None), int(trip is not None)) == (requests, escalations)
