"""Model budgets (SPEC §20) through a running service: usage as each API reports it, budgets per fire,
per watcher day and per service day held in the store, and what a spent budget does.

Real parts: the fake OpenAI-compatible and Anthropic servers of ``sentinel_hooks.testing`` (aiohttp on
127.0.0.1), a webhook sink, SQLite files and the tests' own redis-server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.api.routes.callbacks import callback_json
from sentinel_hooks.callbacks.policy.judge import JUDGE_INSTRUCTIONS
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.usage import Usage, service_day_key, utc_day
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.testing import FakeAnthropicServer, FakeModelServer, FakeOpenAIServer
from tests.cli.conftest import remote_lines
from tests.support import Sink, wait_for

PRICING = "pricing: {inputPerMTok: 3.0, outputPerMTok: 15.0}"
CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 30000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  m: {model}
  judge: {{type: openai, baseUrl: "{judge_url}", model: judge-model, timeoutMs: 5000}}
defaultHookModel: m
targets:
  hook: {{type: webhook, url: "{sink}"}}
budgets: {budgets}
actionPolicy:
  default: needs_approval
  rules: {rules}
"""
WATCHERS = """\
watchers:
  - id: a
    strategy: webhook
    deliveryTargets: [hook]
    fire: {{eventName: a_fired{budget}}}
  - id: b
    strategy: webhook
    deliveryTargets: [hook]
    fire: {{eventName: b_fired}}
"""

Start = Callable[..., Awaitable[Service]]


@pytest.fixture(params=["openai", "anthropic"])
async def server(request: pytest.FixtureRequest) -> AsyncIterator[FakeModelServer]:
    """The session's model: each backend's stand-in in turn."""
    made: FakeModelServer = FakeOpenAIServer() if request.param == "openai" else FakeAnthropicServer()
    async with made:
        yield made


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each durable store in turn (budgets are shared through it)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    url: str = request.getfixturevalue("redis_url")
    return url


@pytest.fixture
async def start(
    tmp_path: Path, sink: Sink, server: FakeModelServer, model: FakeOpenAIServer, store_url: str
) -> AsyncIterator[Start]:
    services: list[Service] = []

    async def run(
        budgets: str = "{}", watcher_budget: str = "", rules: str = "[]", priced: bool = True
    ) -> Service:
        if isinstance(server, FakeOpenAIServer):
            spec = f'{{type: openai, baseUrl: "{server.url}", model: small, timeoutMs: 5000'
        else:
            spec = f'{{type: anthropic, baseUrl: "{server.url}", model: claude-t, apiKey: k, timeoutMs: 5000'
        spec += f", {PRICING}}}" if priced else "}"
        text = CONFIG.format(
            store=store_url,
            model=spec,
            judge_url=model.url,
            sink=sink.url("/in"),
            budgets=budgets,
            rules=rules,
        )
        (tmp_path / "sentinel.yaml").write_text(text)
        (tmp_path / "watchers").mkdir(exist_ok=True)
        budget = f", budget: {watcher_budget}" if watcher_budget else ""
        (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS.format(budget=budget))
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        services.append(service)
        return service

    yield run
    for service in services:
        await service.stop()


async def fire(service: Service, watcher_id: str = "a") -> Contract:
    outcome = await service.manager.ingest(watcher_id, {"disk": 97})
    assert outcome.contract is not None
    return outcome.contract


async def finished(service: Service, contract: Contract) -> str:
    return await wait_for(
        lambda: service.sessions.queue.finished.get(contract.callback_id), what="the session"
    )


async def entries(service: Service, contract: Contract) -> list[dict[str, Any]]:
    transcript = await service.store.get_transcript(contract.session_key)
    return [e.entry for e in transcript if e.entry.get("callbackId") == contract.callback_id]


def notify(server: FakeModelServer, message: str = "disk at 97% on db-1") -> None:
    server.reply_tool_call("sentinel_act", {"action": "notify", "message": message})


def look(server: FakeModelServer) -> None:
    """A turn that pages nobody: the agent reads the watcher's history."""
    server.reply_tool_call("sentinel_history", {"limit": 1})


async def test_each_call_records_the_usage_the_api_reports_and_its_cost(
    start: Start, server: FakeModelServer
) -> None:
    """Tokens as the API reports them (10 in, 5 out per reply) and their price are in the transcript,
    the API's usage and the day's counters."""
    notify(server)
    service = await start()
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    turns = [
        e["usage"] for e in await entries(service, contract) if e.get("kind") == "message" and "usage" in e
    ]
    cost = (10 * 3.0 + 5 * 15.0) / 1_000_000
    assert [("turn", "m", 10, 5, round(cost, 8))] * 2 == [
        (u["call"], u["entry"], u["inputTokens"], u["outputTokens"], u["costUsd"]) for u in turns
    ]
    assert not any("estimated" in u for u in turns)
    body = await callback_json(service, contract.callback_id)
    assert {"inputTokens": 20, "outputTokens": 10, "costUsd": round(2 * cost, 8)} == body["usage"]
    day = service_day_key(utc_day(service.clock.now()))
    assert Usage(20, 10, pytest.approx(2 * cost)) == (await service.store.get_usage([day]))[day]


async def test_a_reply_without_usage_is_estimated_from_its_characters(
    start: Start, server: FakeModelServer
) -> None:
    """No usage in the reply: characters ÷ 4 of the request and the reply, marked estimated."""
    server.usage = None
    server.reply_text("nothing to do")
    service = await start(priced=False)
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    [usage] = [e["usage"] for e in await entries(service, contract) if "usage" in e]
    assert (True, 4, 0.0) == (usage["estimated"], usage["outputTokens"], usage["costUsd"])  # 13 chars
    assert usage["inputTokens"] > 100  # the instructions and the envelope


async def test_a_spent_fire_budget_stops_the_session_and_sends_the_fallback_at_once(
    start: Start, server: FakeModelServer, sink: Sink
) -> None:
    """perFire 15 tokens: the first turn spends them, the second call is not made, the transcript says
    why, and the fallback (deadline 30 s) arrives now, naming the budget."""
    look(server)
    notify(server)
    service = await start(budgets="{perFire: {tokens: 15}}")
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    assert 1 == len(server.requests)
    which = "budgets.perFire.tokens: 15 of 15"
    assert f"session stopped: budget exhausted ({which})" in [
        e.get("text") for e in await entries(service, contract)
    ]
    [fallback] = await wait_for(lambda: sink.bodies("fallback"), timeout_s=10, what="the fallback")
    assert f"— the agent's budget ran out ({which})." in fallback["message"]
    assert not sink.bodies("notify")
    metrics = service.metrics.render().decode()
    assert 'sentinel_budget_exhausted_total{scope="fire"} 1.0' in metrics


async def test_a_paged_contract_gets_no_fallback_when_the_budget_runs_out(
    start: Start, server: FakeModelServer, sink: Sink
) -> None:
    """The agent notified, then its budget ran out: the page stands, no fallback follows."""
    notify(server)
    look(server)
    service = await start(budgets="{perFire: {tokens: 15}}")
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    assert (1, []) == (len(sink.bodies("notify")), sink.bodies("fallback"))
    current = await service.store.get_contract(contract.callback_id)
    assert current is not None
    assert current.state == "fulfilled"


async def test_a_spent_service_day_opens_one_escalation_for_the_day(
    start: Start, server: FakeModelServer
) -> None:
    """perDay 15 tokens: the first fire spends them; the next two fires make no call, and one
    warning escalation 'budget exhausted: …' is opened, not two."""
    server.reply_text("ok")
    service = await start(budgets="{perDay: {tokens: 15}}")
    first = await fire(service)
    assert "done" == await finished(service, first)
    for watcher_id in ("a", "b"):
        assert "done" == await finished(service, await fire(service, watcher_id))
    assert 1 == len(server.requests)
    page = await service.store.list_inbox(kind="escalation", limit=10)
    assert [("warning", "budget exhausted: budgets.perDay.tokens: 15 of 15")] == [
        (i.severity, i.reason) for i in page.items
    ]
    assert 'sentinel_budget_exhausted_total{scope="service_day"} 2.0' in service.metrics.render().decode()


async def test_a_watcher_day_budget_bounds_only_its_watcher(start: Start, server: FakeModelServer) -> None:
    """fire.budget.perDay of watcher a: a's second fire makes no call, b's fires still do."""
    service = await start(watcher_budget="{perDay: {tokens: 15}}")
    for watcher_id in ("a", "a", "b"):
        assert "done" == await finished(service, await fire(service, watcher_id))
    assert 2 == len(server.requests)
    [item] = (await service.store.list_inbox(kind="escalation", limit=10)).items
    assert ("a", "budget exhausted: watcher a fire.budget.perDay.tokens: 15 of 15") == (
        item.watcher_id,
        item.reason,
    )
    assert 'sentinel_budget_exhausted_total{scope="watcher_day"} 1.0' in service.metrics.render().decode()


async def test_day_counts_outlive_a_restart(start: Start, server: FakeModelServer) -> None:
    """A day's spend is read from the store: a restarted service (or a replica) sees it."""
    first = await start(budgets="{perDay: {tokens: 15}}")
    assert "done" == await finished(first, await fire(first))
    await first.stop()
    second = await start(budgets="{perDay: {tokens: 15}}")
    contract = await fire(second)
    assert "done" == await finished(second, contract)
    assert 1 == len(server.requests)
    assert any("budget exhausted" in str(e.get("text")) for e in await entries(second, contract))


@pytest.mark.parametrize(("fail_open", "delivered"), [(False, 0), (True, 1)])
async def test_a_judge_whose_budget_is_spent_applies_its_fail_open(
    start: Start,
    server: FakeModelServer,
    model: FakeOpenAIServer,
    sink: Sink,
    fail_open: bool,
    delivered: int,
) -> None:
    """The first turn spends the fire's 15 tokens; the judge of its notify is not asked: failOpen
    false denies the message, true lets it through."""
    notify(server)
    model.reply_text_when(lambda body: JUDGE_INSTRUCTIONS in json.dumps(body), "{}")
    rule = (
        "[{id: kind, kind: judge, model: judge, prompt: be kind, decision: deny, appliesTo: [notify], "
        f"failOpen: {str(fail_open).lower()}}}]"
    )
    service = await start(budgets="{perFire: {tokens: 15}}", rules=rule)
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    assert [] == model.requests
    [policy] = [e for e in await entries(service, contract) if e.get("kind") == "policy"]
    [verdict] = policy["verdicts"]
    assert ("error", "budget exhausted (budgets.perFire.tokens: 15 of 15)") == (
        verdict["outcome"],
        verdict["reason"],
    )
    assert delivered == len(sink.bodies("notify"))


async def test_metrics_count_tokens_and_cost_per_model(start: Start, server: FakeModelServer) -> None:
    """sentinel_model_tokens_total by direction and sentinel_model_cost_usd_total, per models: entry."""
    server.reply_text("ok")
    service = await start()
    assert "done" == await finished(service, await fire(service))
    text = service.metrics.render().decode()
    assert 'sentinel_model_tokens_total{direction="input",model="m"} 10.0' in text
    assert 'sentinel_model_tokens_total{direction="output",model="m"} 5.0' in text
    assert 'sentinel_model_cost_usd_total{model="m"} 0.000105' in text


async def test_status_shows_todays_usage_per_model_against_the_day_budgets(
    start: Start, server: FakeModelServer
) -> None:
    """`sentinel status`'s body: today's tokens and cost per model, the service's and each watcher's
    day against its budget."""
    server.reply_text("ok")
    service = await start(
        budgets="{perDay: {tokens: 1000, usd: 2.5}}", watcher_budget="{perDay: {tokens: 99}}"
    )
    assert "done" == await finished(service, await fire(service))
    usage = (await service.status())["usage"]
    spent = {"inputTokens": 10, "outputTokens": 5, "costUsd": 0.000105}
    assert {
        "day": utc_day(service.clock.now()),
        "models": {"m": spent, "judge": {"inputTokens": 0, "outputTokens": 0, "costUsd": 0.0}},
        "service": {**spent, "perDay": {"tokens": 1000, "usd": 2.5}},
        "watchers": {"a": {**spent, "perDay": {"tokens": 99, "usd": None}}},
    } == usage


@pytest.mark.slow
@pytest.mark.parametrize("server", ["openai"], indirect=True)
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_callbacks_show_prints_each_calls_usage_and_the_total(
    start: Start, server: FakeModelServer, tmp_path: Path
) -> None:
    """`sentinel callbacks show`: a usage line under each model turn (tokens, cost, time) and the
    callback's total; a budget stop is printed as the transcript says it."""
    look(server)
    service = await start(budgets="{perFire: {tokens: 15}}")
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    lines = await remote_lines(service.url, tmp_path, "callbacks", "show", contract.callback_id)
    [call] = [line for line in lines if line.startswith("usage (")]
    assert call.startswith("usage (turn, m): 10 in + 5 out tokens, $0.0001, ")
    assert call.endswith(" ms")
    assert "usage: 10 in + 5 out tokens, $0.0001" in lines
    assert "session stopped: budget exhausted (budgets.perFire.tokens: 15 of 15)" in lines


@pytest.mark.slow
@pytest.mark.parametrize("server", ["openai"], indirect=True)
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_sentinel_status_prints_todays_usage(
    start: Start, server: FakeModelServer, tmp_path: Path
) -> None:
    """`sentinel status`: today's tokens and cost per model, and the day against its budget."""
    server.reply_text("ok")
    service = await start(budgets="{perDay: {tokens: 1000}}")
    assert "done" == await finished(service, await fire(service))
    lines = await remote_lines(service.url, tmp_path, "status")
    at = lines.index(f"model usage today ({utc_day(service.clock.now())} UTC):")
    assert [
        "m: 10 in + 5 out tokens, $0.0001",
        "judge: 0 in + 0 out tokens, $0.0000",
        "service: 10 in + 5 out tokens, $0.0001 of a day budget of 1000 tokens",
    ] == lines[at + 1 : at + 4]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_a_compaction_summary_is_counted_like_a_turn(
    start: Start, server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary call of a compaction records its usage in its compaction entry and the callback's total."""
    from sentinel_hooks.callbacks.sessions import compaction

    monkeypatch.setattr(compaction, "budget", lambda max_payload_chars: 2000)
    for _ in range(4):
        server.reply_tool_call("sentinel_history", {"limit": 5})
    server.reply_text("SUMMARY: all quiet")
    notify(server, "all quiet")
    service = await start()
    contract = await fire(service)
    assert "done" == await finished(service, contract)
    found = await entries(service, contract)
    [summary] = [e["usage"] for e in found if e.get("kind") == "compaction" and "usage" in e]
    assert ("summary", 10, 5) == (summary["call"], summary["inputTokens"], summary["outputTokens"])
    body = await callback_json(service, contract.callback_id)
    assert 10 * len(server.requests) == body["usage"]["inputTokens"]
