"""Hook sessions through a running service, against a fake OpenAI-compatible server and a webhook sink."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.testing import FakeAnthropicServer, FakeOpenAIServer
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 5000}}
  big: {{type: openai, baseUrl: "{model_url}", model: big-model, timeoutMs: 5000}}
  claude: {{type: anthropic, baseUrl: "{anthropic_url}", model: claude-test, apiKey: k, timeoutMs: 5000}}
defaultHookModel: {default}
targets:
  hook: {{type: webhook, url: "{sink}"}}
  other: {{type: webhook, url: "{sink}"}}
actionPolicy:
  default: needs_approval
  rules:
    - {{id: no-rm, priority: 100, decision: deny, conditions: [{{path: argv0, op: eq, value: rm}}]}}
    - {{id: echo-ok, priority: 10, decision: auto, conditions: [{{path: argv0, op: eq, value: echo}}]}}
"""

WATCHERS = """\
watchers:
  - id: a
    strategy: webhook
    deliveryTargets: [hook]
    fire: {eventName: a_fired, operatorGoal: "check a", operatorGoalFile: goal.md}
  - id: b
    strategy: webhook
    deliveryTargets: [other]
    fire: {eventName: b_fired, model: big}
  - id: c
    strategy: webhook
    deliveryTargets: [hook]
    fire: {model: claude}
"""

Start = Callable[..., Awaitable[Service]]


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def start(
    tmp_path: Path, sink: Sink, model: FakeOpenAIServer, anthropic: FakeAnthropicServer
) -> AsyncIterator[Start]:
    services: list[Service] = []

    async def run(default: str = "local") -> Service:
        text = CONFIG.format(
            model_url=model.url, anthropic_url=anthropic.url, sink=sink.url("/in"), default=default
        )
        (tmp_path / "sentinel.yaml").write_text(text)
        (tmp_path / "goal.md").write_text("first policy")
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        services.append(service)
        return service

    yield run
    for service in services:
        await service.stop()


async def fire(service: Service, watcher_id: str, payload: Any) -> Contract:
    outcome = await service.manager.ingest(watcher_id, payload)
    assert outcome.contract is not None
    return outcome.contract


async def finished(service: Service, contract: Contract) -> str:
    return await wait_for(
        lambda: service.sessions.queue.finished.get(contract.callback_id), what="the session"
    )


async def state(service: Service, contract: Contract) -> str:
    current = await service.store.get_contract(contract.callback_id)
    assert current is not None
    return current.state


def tool_results(model: FakeOpenAIServer, index: int) -> list[dict[str, Any]]:
    """The tool results sent back to the model in its ``index``-th request."""
    return [json.loads(m["content"]) for m in model.requests[index]["messages"] if m["role"] == "tool"]


async def test_notify_reaches_the_sink_and_fulfils(start: Start, model: FakeOpenAIServer, sink: Sink) -> None:
    """sentinel_act notify: the message reaches the target and the contract is fulfilled."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk at 97% on db-1"})
    service = await start()
    contract = await fire(service, "a", {"disk": 97})
    assert "done" == await finished(service, contract)
    assert "fulfilled" == await state(service, contract)
    [body] = sink.bodies("notify")
    assert "disk at 97% on db-1" == body["message"]
    request = model.requests[0]
    assert ("small-model", False) == (request["model"], bool(request.get("stream")))
    assert {"sentinel_act", "sentinel_escalate", "sentinel_history"} == {
        t["function"]["name"] for t in request["tools"]
    }


async def test_escalate_creates_an_item_and_leaves_the_contract_pending(
    start: Start, model: FakeOpenAIServer
) -> None:
    """sentinel_escalate files an inbox item; the contract stays pending (the fallback will follow)."""
    model.reply_tool_call("sentinel_escalate", {"reason": "needs a human", "severity": "critical"})
    service = await start()
    contract = await fire(service, "a", {"n": 1})
    assert "done" == await finished(service, contract)
    assert "pending" == await state(service, contract)
    [item] = (await service.store.list_inbox(kind="escalation")).items
    assert ("needs a human", "critical", contract.callback_id) == (
        item.reason,
        item.severity,
        item.callback_id,
    )


async def test_bad_arguments_get_an_error_and_the_model_corrects_itself(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """A call with bad arguments gets a precise error result; the corrected call then works."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "msg": "typo"})
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "fixed"})
    service = await start()
    contract = await fire(service, "a", {"n": 1})
    assert "done" == await finished(service, contract)
    [error] = tool_results(model, 1)
    assert error["ok"] is False
    assert "msg" in error["error"]
    assert "fulfilled" == await state(service, contract)


async def test_only_control_tokens_are_refused_as_control_tokens(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """NO_REPLY, HEARTBEAT_OK and the like (alone, in any case, wrapped in brackets, quotes or
    markdown) are refused; a message that is an ordinary word ("done", "ack", "skip") is sent."""
    tokens = ["NO_REPLY", " heartbeat_ok ", "[NO_REPLY]", "`HEARTBEAT_OK`", "ANNOUNCE_SKIP", "REPLY_SKIP"]
    words = ["done", "DONE", "ack", "skip", "silent", "noop", "NO_REPLY needed: disk is fine"]
    model.reply_tool_calls(
        [("sentinel_act", {"action": "notify", "message": text}) for text in tokens + words]
    )
    service = await start()
    contract = await fire(service, "a", {"n": 1})
    assert "done" == await finished(service, contract)
    results = tool_results(model, 1)
    refused = [r["error"] for r in results[: len(tokens)]]
    assert [f"{t.strip()!r} is a control token" for t in tokens] == [e.split(", not")[0] for e in refused]
    assert [True] * len(words) == [r["ok"] for r in results[len(tokens) :]]
    assert sorted(words) == sorted(b["message"] for b in sink.bodies())


async def test_sessions_are_isolated(start: Start, model: FakeOpenAIServer, sink: Sink) -> None:
    """Two watchers: separate sessions; one cannot reach the other's targets."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "x", "targets": ["other"]})
    service = await start()
    first = await fire(service, "a", {"n": 1})
    assert "done" == await finished(service, first)
    [refused] = tool_results(model, 1)
    assert "not allowed" in refused["error"]
    assert "pending" == await state(service, first)
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "from b"})
    second = await fire(service, "b", {"n": 2})
    assert "done" == await finished(service, second)
    assert first.session_key != second.session_key
    assert ("pending", "fulfilled") == (await state(service, first), await state(service, second))


async def test_model_selection(start: Start, model: FakeOpenAIServer) -> None:
    """fire.model wins; otherwise defaultHookModel; the chosen model name is what the server receives."""
    service = await start(default="local")
    await finished(service, await fire(service, "b", {"n": 1}))
    await finished(service, await fire(service, "a", {"n": 2}))
    assert ["big-model", "small-model"] == [r["model"] for r in model.requests]
    transcript = await service.store.get_transcript("sentinel:hooks:watcher:b")
    assert {"kind": "model", "model": "big-model", "entry": "big", "via": "fire.model"} == {
        k: transcript[0].entry[k] for k in ("kind", "model", "entry", "via")
    }


async def test_anthropic_backend_notifies(start: Start, anthropic: FakeAnthropicServer, sink: Sink) -> None:
    """The anthropic backend: a tool_use block becomes a notify."""
    anthropic.reply_tool_call("sentinel_act", {"action": "notify", "message": "via claude"})
    service = await start()
    contract = await fire(service, "c", {"n": 1})
    assert "done" == await finished(service, contract)
    assert ["via claude"] == [b["message"] for b in sink.bodies("notify")]
    assert "claude-test" == anthropic.requests[0]["model"]


async def test_goal_file_changes_are_seen_by_the_next_fire(
    start: Start, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """operatorGoalFile is read at fire time: the second session's prompt has the new text."""
    service = await start()
    await finished(service, await fire(service, "a", {"n": 1}))
    (tmp_path / "goal.md").write_text("second policy")
    await finished(service, await fire(service, "a", {"n": 2}))
    prompts = [r["messages"][1]["content"] for r in model.requests if len(r["messages"]) == 2]
    assert "first policy" in prompts[0]
    assert "second policy" in prompts[1]


async def test_approval_runs_the_command_only_after_approve(start: Start, model: FakeOpenAIServer) -> None:
    """needs_approval pauses; approve runs the exact command and resumes the session with its output."""
    model.reply_tool_call("sentinel_act", {"action": "run_command", "command": "uname", "args": ["-s"]})
    service = await start()
    contract = await fire(service, "a", {"n": 1})
    assert "paused" == await finished(service, contract)
    assert 1 == len(model.requests)
    [item] = (await service.store.list_inbox(kind="approval", status="open")).items
    assert ["uname", "-s"] == item.detail["argv"]
    service.sessions.queue.finished.pop(contract.callback_id)
    await service.inbox.approve(item.id, actor="alice", note="go")
    assert "done" == await finished(service, contract)
    [result] = tool_results(model, 1)
    assert (True, "Linux\n") == (result["ok"], result["stdout"])


async def test_denied_approval_never_runs(start: Start, model: FakeOpenAIServer) -> None:
    """deny: the agent gets a denial and the command never runs."""
    model.reply_tool_call("sentinel_act", {"action": "run_command", "command": "uname"})
    service = await start()
    contract = await fire(service, "a", {"n": 1})
    assert "paused" == await finished(service, contract)
    [item] = (await service.store.list_inbox(kind="approval", status="open")).items
    service.sessions.queue.finished.pop(contract.callback_id)
    await service.inbox.deny(item.id, actor="bob", note="not now")
    assert "done" == await finished(service, contract)
    [result] = tool_results(model, 1)
    assert result["ok"] is False
    assert "denied by bob (not now)" in result["error"]
    assert "stdout" not in result


async def test_deny_rule_blocks_and_auto_rule_runs(start: Start, model: FakeOpenAIServer) -> None:
    """A deny rule refuses rm; an auto rule runs echo at once."""
    model.reply_tool_calls(
        [
            ("sentinel_act", {"action": "run_command", "command": "rm", "args": ["-rf", "/tmp/x"]}),
            ("sentinel_act", {"action": "run_command", "command": "echo", "args": ["hi"]}),
        ]
    )
    service = await start()
    assert "done" == await finished(service, await fire(service, "a", {"n": 1}))
    denied, ran = tool_results(model, 1)
    assert (False, "no-rm") == (denied["ok"], denied["policy"]["ruleId"])
    assert (True, "hi\n") == (ran["ok"], ran["stdout"])


async def test_loop_guard_trips(start: Start, model: FakeOpenAIServer) -> None:
    """The same command a third time in a row within one callback is refused."""
    echo = ("sentinel_act", {"action": "run_command", "command": "echo", "args": ["again"]})
    model.reply_tool_calls([echo]).reply_tool_calls([echo]).reply_tool_calls([echo])
    service = await start()
    assert "done" == await finished(service, await fire(service, "a", {"n": 1}))
    last = tool_results(model, 3)[-1]
    assert (False, "loop-guard") == (last["ok"], last["policy"]["ruleId"])


async def test_model_down_fails_the_session_and_keeps_the_contract_pending(
    start: Start, model: FakeOpenAIServer
) -> None:
    """A model that keeps failing: the session is marked failed and the fallback still covers the fire."""
    for _ in range(3):
        model.fail(500)
    service = await start()
    contract = await fire(service, "a", {"n": 1})
    assert "failed" == await finished(service, contract)
    assert "pending" == await state(service, contract)


async def test_long_conversations_are_compacted_by_the_model(
    start: Start, model: FakeOpenAIServer, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the context budget the model summarises older turns; system, envelope and latest turns stay."""
    from sentinel_hooks.callbacks.sessions import compaction

    monkeypatch.setattr(compaction, "budget", lambda max_payload_chars: 2000)
    for _ in range(4):
        model.reply_tool_call("sentinel_history", {"limit": 5})
    model.reply_text("SUMMARY: four history checks, all quiet")
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "all quiet"})
    service = await start()
    contract = await fire(service, "a", {"n": 1})
    assert "done" == await finished(service, contract)
    assert compaction.SUMMARY_PROMPT == model.requests[4]["messages"][0]["content"]
    after = model.requests[5]["messages"]
    assert ["system", "user", "user"] == [m["role"] for m in after[:3]]
    assert "SUMMARY: four history checks" in after[2]["content"]
    assert len(after) < len(model.requests[3]["messages"]) + 2
    assert ["all quiet"] == [b["message"] for b in sink.bodies("notify")]
