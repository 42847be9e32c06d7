"""Judge rules, per-rule ``enabled`` and the circuit breaker through a running service (SPEC §5.4).

One fake OpenAI-compatible server plays both parts: the agent, from its script of tool calls,
and the judge, whose requests it tells by their system message (``JUDGE_INSTRUCTIONS``) and
answers per rule with ``Verdicts``. Commands run for real; deliveries reach a webhook sink.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.policy.judge import JUDGE_INSTRUCTIONS
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.relay.relay import escalation_key
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_checkpoint
from sentinel_hooks.testing import FakeOpenAIServer
from tests.cli.conftest import sentinel_command
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {deadline_ms}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
telemetry: {{eventsFile: events.jsonl}}
models:
  agent: {{type: openai, baseUrl: "{model_url}", model: agent-model, timeoutMs: 5000}}
  judge: {{type: openai, baseUrl: "{model_url}", model: judge-model, timeoutMs: 5000}}
defaultHookModel: agent
targets:
  hook: {{type: webhook, url: "{sink}"}}
actionPolicy:
  default: deny
  circuitBreaker: {breaker}
  rules:
    - {{id: no-rm, priority: 100, decision: deny, conditions: [{{path: argv0, op: eq, value: rm}}]}}
    - {{id: echo-ok, priority: 10, decision: auto, conditions: [{{path: argv0, op: eq, value: echo}}]}}
{rules}
"""

WATCHERS = """\
watchers:
  - id: w
    strategy: webhook
    deliveryTargets: [hook]
"""

Start = Callable[..., Awaitable[Service]]


def judge_rule(rule_id: str, prompt: str, **keys: Any) -> str:
    """A judge rule line for CONFIG's ``rules`` (decision deny, the ``judge`` model, unless given)."""
    fields = {"id": rule_id, "kind": "judge", "model": "judge", "prompt": prompt, "decision": "deny", **keys}
    return "    - " + json.dumps(fields)


class Verdicts:
    """The judge's side of the fake server: an answer per rule prompt, and the requests per rule."""

    def __init__(self, model: FakeOpenAIServer) -> None:
        self.answers: dict[str, Callable[[dict[str, Any]], Awaitable[str]]] = {}
        self.asked: list[str] = []  # rule prompts, in arrival order
        model.answer_when(is_judge_request, self._answer)

    def verdict(self, prompt: str, violation: bool, confidence: float, reason: str) -> None:
        text = json.dumps({"violation": violation, "confidence": confidence, "reason": reason})
        self.text(prompt, text)

    def text(self, prompt: str, text: str) -> None:
        async def answer(_: dict[str, Any]) -> str:
            return text

        self.answers[prompt] = answer

    async def _answer(self, body: dict[str, Any]) -> str:
        prompt = rule_of(body)
        self.asked.append(prompt)
        return await self.answers[prompt](body)


def is_judge_request(body: dict[str, Any]) -> bool:
    return bool(body["messages"]) and body["messages"][0]["content"] == JUDGE_INSTRUCTIONS


def rule_of(body: dict[str, Any]) -> str:
    """The rule prompt of a judge request (the first line of its user message)."""
    return str(body["messages"][1]["content"].split("\n", 1)[0].removeprefix("Rule: "))


def action_of(body: dict[str, Any]) -> dict[str, Any]:
    """The proposed action a judge request carries."""
    text = body["messages"][1]["content"]
    return dict(json.loads(text.split("```json\n", 1)[1].rsplit("\n```", 1)[0]))


@pytest.fixture
def verdicts(model: FakeOpenAIServer) -> Verdicts:
    return Verdicts(model)


@pytest.fixture
async def start(tmp_path: Path, sink: Sink, model: FakeOpenAIServer) -> AsyncIterator[Start]:
    services: list[Service] = []

    async def run(*rules: str, breaker: int = 5, deadline_ms: int = 20000) -> Service:
        text = CONFIG.format(
            model_url=model.url,
            sink=sink.url("/in"),
            rules="\n".join(rules),
            breaker=breaker,
            deadline_ms=deadline_ms,
        )
        (tmp_path / "sentinel.yaml").write_text(text)
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        services.append(service)
        return service

    yield run
    for service in services:
        await service.stop()


async def fire(service: Service, payload: Any = None) -> Contract:
    outcome = await service.manager.ingest("w", payload if payload is not None else {"n": 1})
    assert outcome.contract is not None
    return outcome.contract


async def finished(service: Service, contract: Contract) -> str:
    return await wait_for(
        lambda: service.sessions.queue.finished.get(contract.callback_id), what="the session"
    )


def agent_requests(model: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in model.requests if not is_judge_request(r)]


def tool_results(model: FakeOpenAIServer, index: int) -> list[dict[str, Any]]:
    """The tool results the agent's ``index``-th request carried."""
    request = agent_requests(model)[index]
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def run(*args: str) -> tuple[str, dict[str, Any]]:
    return ("sentinel_act", {"action": "run_command", "command": "echo", "args": list(args)})


async def policy_entries(service: Service, contract: Contract) -> list[dict[str, Any]]:
    transcript = await service.store.get_transcript(contract.session_key)
    return [e.entry for e in transcript if e.entry.get("kind") == "policy"]


DESTROY = "Never delete or overwrite data."


async def test_a_violation_above_the_threshold_denies_with_the_reason(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """confidence 0.9 ≥ 0.7: the rule's deny applies, the reason reaches the agent, nothing runs."""
    verdicts.verdict(DESTROY, True, 0.9, "it wipes the data directory")
    model.reply_tool_calls([run("wipe", "/data")])
    service = await start(judge_rule("no-destroy", DESTROY))
    assert "done" == await finished(service, await fire(service))
    [result] = tool_results(model, 1)
    assert (False, "deny", "no-destroy") == (
        result["ok"],
        result["policy"]["decision"],
        result["policy"]["ruleId"],
    )
    assert "it wipes the data directory" in result["error"]
    assert "stdout" not in result
    assert {"action": "run_command", "argv": ["echo", "wipe", "/data"]} == {
        k: v
        for k, v in action_of(next(r for r in model.requests if is_judge_request(r))).items()
        if k != "program"
    }


async def test_a_violation_below_the_threshold_lets_the_command_run(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """confidence 0.5 < 0.7: the judge's doubt is recorded, the command runs."""
    verdicts.verdict(DESTROY, True, 0.5, "might delete something")
    model.reply_tool_calls([run("hello")])
    service = await start(judge_rule("no-destroy", DESTROY))
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    [result] = tool_results(model, 1)
    assert (True, "hello\n", "auto") == (result["ok"], result["stdout"], result["policy"]["decision"])
    [entry] = await policy_entries(service, contract)
    [verdict] = entry["verdicts"]
    assert ("no-destroy", "below_threshold", 0.5, "judge") == (
        verdict["ruleId"],
        verdict["outcome"],
        verdict["confidence"],
        verdict["model"],
    )


async def test_a_judge_asking_for_approval_pauses_with_its_reason_in_the_item(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """decision needs_approval: an approval item carries the judge's reason and verdicts."""
    verdicts.verdict(DESTROY, True, 0.8, "it truncates a table")
    model.reply_tool_calls([run("truncate")])
    service = await start(judge_rule("ask-first", DESTROY, decision="needs_approval"))
    assert "paused" == await finished(service, await fire(service))
    [item] = (await service.store.list_inbox(kind="approval", status="open")).items
    assert "it truncates a table" in item.reason
    assert ("ask-first", 0.8) == (
        item.detail["policy"]["ruleId"],
        item.detail["policy"]["verdicts"][0]["confidence"],
    )


async def test_judge_rules_are_asked_in_parallel(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """The first rule's answer is held until the second rule's request arrives: only parallel calls pass."""
    second_arrived = asyncio.Event()

    async def first(_: dict[str, Any]) -> str:
        await asyncio.wait_for(second_arrived.wait(), 5)
        return json.dumps({"violation": False, "confidence": 0.9, "reason": "fine"})

    async def second(_: dict[str, Any]) -> str:
        second_arrived.set()
        return json.dumps({"violation": False, "confidence": 0.8, "reason": "also fine"})

    verdicts.answers["rule one"] = first
    verdicts.answers["rule two"] = second
    model.reply_tool_calls([run("both")])
    service = await start(
        judge_rule("one", "rule one", priority=2, timeoutMs=3000),
        judge_rule("two", "rule two", priority=1, timeoutMs=3000),
    )
    assert "done" == await finished(service, await fire(service))
    [result] = tool_results(model, 1)
    assert (True, "both\n") == (result["ok"], result["stdout"])
    assert ["rule one", "rule two"] == verdicts.asked


async def test_a_judge_rule_out_of_scope_costs_no_model_call(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """A judge rule whose conditions do not match the command is never asked."""
    verdicts.verdict(DESTROY, True, 1.0, "would be denied")
    model.reply_tool_calls([run("scoped")])
    scope = [{"path": "args", "op": "contains", "value": "--force"}]
    service = await start(judge_rule("forced", DESTROY, conditions=scope))
    assert "done" == await finished(service, await fire(service))
    assert ([], True) == (verdicts.asked, tool_results(model, 1)[0]["ok"])
    assert 2 == len(model.requests)  # the agent's two turns, no judge request


async def test_a_plain_deny_costs_no_model_call(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """Judges are asked only after the plain rules allowed the action."""
    verdicts.verdict(DESTROY, False, 1.0, "fine")
    model.reply_tool_calls(
        [("sentinel_act", {"action": "run_command", "command": "rm", "args": ["-rf", "/x"]})]
    )
    service = await start(judge_rule("no-destroy", DESTROY))
    assert "done" == await finished(service, await fire(service))
    assert ([], "no-rm") == (verdicts.asked, tool_results(model, 1)[0]["policy"]["ruleId"])


@pytest.mark.parametrize(("fail_open", "runs"), [(True, True), (False, False)])
async def test_a_judge_timeout_applies_fail_open(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts, fail_open: bool, runs: bool
) -> None:
    """No answer within timeoutMs: failOpen true lets the command run, false applies the deny."""
    never = asyncio.Event()

    async def hang(_: dict[str, Any]) -> str:
        await never.wait()
        return "{}"

    verdicts.answers[DESTROY] = hang
    model.reply_tool_calls([run("slow")])
    service = await start(judge_rule("no-destroy", DESTROY, timeoutMs=200, failOpen=fail_open))
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    never.set()
    [result] = tool_results(model, 1)
    assert runs == result["ok"]
    [entry] = await policy_entries(service, contract)
    assert ("timeout", "auto" if runs else "deny") == (entry["verdicts"][0]["outcome"], entry["decision"])
    assert 1 == service.metrics.judge_verdicts.labels("no-destroy", "timeout")._value.get()
    if not runs:
        assert "could not judge (timeout" in result["error"]


async def test_a_garbage_answer_fails_closed(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """An answer that is not the verdict JSON applies failOpen: false, so the rule denies."""
    verdicts.text(DESTROY, "Sure! The command looks fine to me.")
    model.reply_tool_calls([run("chatty")])
    service = await start(judge_rule("no-destroy", DESTROY))
    assert "done" == await finished(service, await fire(service))
    [result] = tool_results(model, 1)
    assert (False, "no-destroy") == (result["ok"], result["policy"]["ruleId"])
    assert "invalid" in result["error"]


async def test_a_judge_error_fails_open_when_asked(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts
) -> None:
    """A model error with failOpen: true lets the command run."""

    async def broken(_: dict[str, Any]) -> str:
        raise RuntimeError("the judge model is down")

    verdicts.answers[DESTROY] = broken
    model.reply_tool_calls([run("anyway")])
    service = await start(judge_rule("no-destroy", DESTROY, failOpen=True))
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    assert tool_results(model, 1)[0]["ok"] is True
    [entry] = await policy_entries(service, contract)
    assert "error" == entry["verdicts"][0]["outcome"]


EMAIL = "Never reveal a customer's e-mail address."


async def test_a_notify_judge_blocks_a_message_that_leaks_an_email(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts, sink: Sink
) -> None:
    """appliesTo notify: the leaking message is refused before it is sent; the clean one goes out."""

    async def leaks(body: dict[str, Any]) -> str:
        leaked = "@" in action_of(body)["message"]
        reason = "it contains an e-mail address" if leaked else "no personal data"
        return json.dumps({"violation": leaked, "confidence": 0.95, "reason": reason})

    verdicts.answers[EMAIL] = leaks
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "bob@example.com hit the quota"})
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "a customer hit the quota"})
    service = await start(judge_rule("no-emails", EMAIL, appliesTo=["notify"]))
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    [refused] = tool_results(model, 1)
    assert (False, "no-emails") == (refused["ok"], refused["policy"]["ruleId"])
    assert "e-mail address" in refused["error"]
    assert "nothing was sent" in refused["error"]
    assert ["a customer hit the quota"] == [b["message"] for b in sink.bodies("notify")]
    assert "fulfilled" == (await service.store.get_contract(contract.callback_id)).state  # type: ignore[union-attr]


async def test_a_run_command_judge_does_not_check_notifies(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts, sink: Sink
) -> None:
    """The default appliesTo is run_command: a notify costs no judge call."""
    verdicts.verdict(DESTROY, True, 1.0, "no")
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "all good"})
    service = await start(judge_rule("no-destroy", DESTROY))
    assert "done" == await finished(service, await fire(service))
    assert ([], ["all good"]) == (verdicts.asked, [b["message"] for b in sink.bodies("notify")])


async def test_disabled_rules_are_skipped(start: Start, model: FakeOpenAIServer, verdicts: Verdicts) -> None:
    """A disabled judge rule is never asked and a disabled plain deny never decides."""
    verdicts.verdict(DESTROY, True, 1.0, "would deny")
    model.reply_tool_calls([run("free")])
    disabled_deny = (
        "    - {id: deny-echo, priority: 500, decision: deny, enabled: false,"
        " conditions: [{path: argv0, op: eq, value: echo}]}"
    )
    service = await start(disabled_deny, judge_rule("off", DESTROY, enabled=False))
    assert "done" == await finished(service, await fire(service))
    [result] = tool_results(model, 1)
    assert (True, "echo-ok", []) == (result["ok"], result["policy"]["ruleId"], verdicts.asked)


async def test_decisions_are_in_the_transcript_and_telemetry(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts, tmp_path: Path
) -> None:
    """Each decision — rule, decision, reason, confidence, model, elapsed — is recorded twice; the
    agent sees only the decision, the rule and the reason."""
    verdicts.verdict(DESTROY, True, 0.93, "it deletes backups")
    model.reply_tool_calls([run("purge")])
    service = await start(judge_rule("no-destroy", DESTROY))
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    [entry] = await policy_entries(service, contract)
    assert ("deny", "no-destroy", "sentinel_act") == (entry["decision"], entry["ruleId"], entry["tool"])
    [verdict] = entry["verdicts"]
    assert ("violation", 0.93, "it deletes backups", "judge") == (
        verdict["outcome"],
        verdict["confidence"],
        verdict["reason"],
        verdict["model"],
    )
    assert verdict["elapsedMs"] >= 0
    assert entry["elapsedMs"] >= verdict["elapsedMs"]
    assert {"decision", "ruleId", "reason"} == set(tool_results(model, 1)[0]["policy"])
    rows = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    [row] = [r for r in rows if r["kind"] == "policy_decision"]
    assert (contract.callback_id, "no-destroy", 0.93) == (
        row["callbackId"],
        row["ruleId"],
        row["verdicts"][0]["confidence"],
    )
    assert 1 == service.metrics.judge_verdicts.labels("no-destroy", "violation")._value.get()


async def test_the_circuit_breaker_stops_and_escalates(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """Three denials in a row (breaker 3): the third is recorded, the model is not asked again, an
    escalation is filed and the fallback carries it; the contract is never fulfilled."""
    for n in range(6):
        model.reply_tool_calls(
            [("sentinel_act", {"action": "run_command", "command": "rm", "args": [str(n)]})]
        )
    service = await start(breaker=3, deadline_ms=1500)
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    assert 3 == len(agent_requests(model))
    assert 3 == len(tool_results(model, 2)) + 1  # the third result was recorded, never sent to the model
    transcript = [e.entry for e in await service.store.get_transcript(contract.session_key)]
    assert {"kind": "status", "status": "circuitBreaker", "denials": 3} == {
        k: transcript[-1][k] for k in ("kind", "status", "denials")
    }
    [item] = (await service.store.list_inbox(kind="escalation")).items
    assert ("the agent kept proposing denied actions", "warning", "sentinel") == (
        item.reason,
        item.severity,
        item.actor,
    )
    assert {
        "severity": "warning",
        "reason": "the agent kept proposing denied actions",
    } == await get_checkpoint(service.store, escalation_key(contract.callback_id))
    [fallback] = await wait_for(lambda: sink.bodies("fallback"), timeout_s=10, what="the fallback")
    assert fallback["message"].endswith("Escalated (warning): the agent kept proposing denied actions")


async def test_the_breaker_stops_mid_turn_before_the_next_call_runs(
    start: Start, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Denied calls in one turn count too: the call after the Nth denial is never executed."""
    denied = [
        ("sentinel_act", {"action": "run_command", "command": "rm", "args": [str(n)]}) for n in range(2)
    ]
    marker = tmp_path / "ran"
    model.reply_tool_calls(
        [*denied, ("sentinel_act", {"action": "run_command", "command": "touch", "args": [str(marker)]})]
    )
    service = await start(
        "    - {id: touch-ok, decision: auto, conditions: [{path: argv0, op: eq, value: touch}]}", breaker=2
    )
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    assert (1, False) == (len(agent_requests(model)), marker.exists())


async def test_an_allowed_action_resets_the_count(start: Start, model: FakeOpenAIServer) -> None:
    """Denials must come in a row: one allowed command between them starts the count again."""
    rm = ("sentinel_act", {"action": "run_command", "command": "rm", "args": ["x"]})
    model.reply_tool_calls([rm]).reply_tool_calls([run("ok")]).reply_tool_calls(
        [("sentinel_act", {"action": "run_command", "command": "rm", "args": ["y"]})]
    )
    service = await start(breaker=2)
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    assert 4 == len(agent_requests(model))
    assert [] == (await service.store.list_inbox(kind="escalation")).items


@pytest.mark.slow
async def test_callbacks_show_prints_each_decision_and_verdict(
    start: Start, model: FakeOpenAIServer, verdicts: Verdicts, tmp_path: Path
) -> None:
    """`sentinel callbacks show ID` prints the decision, its rule and reason, and each verdict with
    its outcome, confidence, model and time, one line each."""
    verdicts.verdict(DESTROY, True, 0.93, "it deletes [backups]")
    model.reply_tool_calls([run("purge")])
    service = await start(judge_rule("no-destroy", DESTROY))
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    done = await asyncio.to_thread(
        subprocess.run,
        [*sentinel_command(), "callbacks", "show", contract.callback_id, "--url", service.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "COLUMNS": "250"},
        cwd=tmp_path,
    )
    assert 0 == done.returncode, done.stderr
    lines = done.stdout.splitlines()
    policy = next(line for line in lines if line.strip().startswith("policy "))
    judged = next(line for line in lines if line.strip().startswith("judge "))
    assert policy.strip().startswith("policy sentinel_act: DENY by no-destroy in ")
    assert "it deletes [backups]" in policy  # model text is printed as written, not as markup
    assert "judge no-destroy: violation confidence 0.93 → deny (model judge, " in judged
