"""Hook sessions as MCP clients (SPEC.md §17): a real MCP server written with the SDK
(``mcp_logs_server.py``), over stdio and over streamable HTTP, and a fake OpenAI-compatible model
that proposes the tool calls; every call through the action policy."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sentinel_hooks.callbacks.mcp.calls import McpGate
from sentinel_hooks.callbacks.mcp.client import McpServers
from sentinel_hooks.callbacks.policy.judge import JUDGE_INSTRUCTIONS
from sentinel_hooks.clock import SystemClock
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.mcp import StdioMcpServer, UrlMcpServer
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ActionPolicySpec
from sentinel_hooks.errors import ConfigError
from sentinel_hooks.net.policy import HostPolicy
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.testing import FakeOpenAIServer
from tests.cli.conftest import sentinel_command
from tests.support import Sink, wait_for

SERVER = Path(__file__).with_name("mcp_logs_server.py")
SECRET = "s3cr3t-logs-token"

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 5000}}
defaultHookModel: local
targets:
  hook: {{type: webhook, url: "{sink}"}}
mcpServers:
  logs: {logs}
  broken: {{command: ["{broken}"], timeoutMs: 3000}}
actionPolicy:
  default: deny
  rules:
    - id: no-prod
      priority: 100
      decision: deny
      conditions: [{{path: arguments.service, op: eq, value: prod}}]
    - id: ask-delete
      priority: 90
      decision: needs_approval
      conditions: [{{path: tool, op: eq, value: logs.delete}}]
    - {{id: mcp-reads, priority: 1, decision: auto, conditions: [{{path: action, op: eq, value: mcp}}]}}
    - id: no-secret-hunting
      kind: judge
      model: local
      prompt: Never search logs for credentials.
      decision: deny
      conditions: [{{path: arguments.query, op: contains, value: password}}]
"""

WATCHERS = """\
watchers:
  - id: a
    strategy: webhook
    deliveryTargets: [hook]
    fire: {tools: ["logs.*"]}
  - id: quiet
    strategy: webhook
    deliveryTargets: [hook]
    autonomy: notify_only
    fire: {tools: ["logs.*"]}
  - id: b
    strategy: webhook
    deliveryTargets: [hook]
    fire: {tools: ["broken.search"]}
"""

Start = Callable[..., Awaitable[Service]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def calls_file(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


@pytest.fixture(params=["stdio", "http"])
async def logs_server(request: pytest.FixtureRequest, tmp_path: Path, calls_file: Path) -> AsyncIterator[str]:
    """The ``logs`` entry of mcpServers: the test server as a stdio command, or one already
    listening on 127.0.0.1 over streamable HTTP."""
    env = {
        "MCP_CALLS_FILE": str(calls_file),
        "MCP_PID_FILE": str(tmp_path / "pid"),
        "MCP_TOKEN": "${env:LOGS_TOKEN}",
    }
    if request.param == "stdio":
        yield json.dumps({"command": [sys.executable, str(SERVER), "stdio"], "env": env})
        return
    port = free_port()
    child = subprocess.Popen(  # noqa: ASYNC220 - started once, before the test's loop work
        [sys.executable, str(SERVER), "http", str(port)],
        env={**os.environ, "MCP_CALLS_FILE": str(calls_file)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    async def listening() -> bool:
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return True
        return False

    try:
        await wait_for(listening, timeout_s=30, what="the MCP server over HTTP")
        url = f"http://127.0.0.1:{port}/mcp"
        yield json.dumps({"url": url, "headers": {"Authorization": "Bearer ${env:LOGS_TOKEN}"}})
    finally:
        child.terminate()
        child.wait(timeout=10)


@pytest.fixture
async def start(
    tmp_path: Path, sink: Sink, model: FakeOpenAIServer, logs_server: str
) -> AsyncIterator[Start]:
    services: list[Service] = []

    async def run() -> Service:
        text = CONFIG.format(
            model_url=model.url, sink=sink.url("/in"), logs=logs_server, broken=tmp_path / "no-such-server"
        )
        (tmp_path / "sentinel.yaml").write_text(text)
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={"LOGS_TOKEN": SECRET}))
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
        lambda: service.sessions.queue.finished.get(contract.callback_id), timeout_s=30, what="the session"
    )


def tool_results(model: FakeOpenAIServer, index: int) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in model.requests[index]["messages"] if m["role"] == "tool"]


def offered(model: FakeOpenAIServer, index: int = 0) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in model.requests[index].get("tools") or []}


def seen(calls_file: Path) -> list[dict[str, Any]]:
    if not calls_file.exists():
        return []
    return [json.loads(line) for line in calls_file.read_text().splitlines()]


async def test_an_allowed_call_reaches_the_server_and_its_result_the_model(
    start: Start, model: FakeOpenAIServer, calls_file: Path
) -> None:
    """logs__search is offered with the server's schema; the call runs; the next model request
    carries its text (secrets of the environment masked)."""
    model.reply_tool_call("logs__search", {"service": "api", "query": SECRET, "lines": 2})
    service = await start()
    contract = await fire(service, "a", {"errors": 40})
    assert "done" == await finished(service, contract)
    tools = offered(model)
    assert {"logs__search", "logs__delete"} <= set(tools)
    assert ["service"] == tools["logs__search"]["parameters"]["required"]
    assert "Search a service's recent log lines." in tools["logs__search"]["description"]
    [result] = tool_results(model, 1)
    assert result["ok"] is True
    assert result["tool"] == "logs.search"
    assert "api: ERROR connection refused (***) #1" in result["content"]
    assert SECRET not in json.dumps(model.requests[1])
    assert "auto" == result["policy"]["decision"]
    # the model's turn is stored (and its calls run) with secrets masked, as for run_command
    assert [{"tool": "search", "arguments": {"service": "api", "query": "***", "lines": 2}}] == seen(
        calls_file
    )


async def test_a_denied_call_never_reaches_the_server(
    start: Start, model: FakeOpenAIServer, calls_file: Path
) -> None:
    """A rule on arguments.<path> denies: the model gets denied: <rule id>: <reason>."""
    model.reply_tool_call("logs__search", {"service": "prod"})
    service = await start()
    contract = await fire(service, "a", {"errors": 40})
    assert "done" == await finished(service, contract)
    [result] = tool_results(model, 1)
    assert result["ok"] is False
    assert result["error"].startswith("denied: no-prod: ")
    assert [] == seen(calls_file)


async def test_a_judge_rule_denies_an_allowed_call_that_breaks_it(
    start: Start, model: FakeOpenAIServer, calls_file: Path
) -> None:
    """Judge rules apply to MCP calls the plain rules allow (appliesTo defaults to run_command and
    mcp): the judge sees the tool and its arguments, its violation denies, the server never sees it."""
    judged: list[dict[str, Any]] = []

    async def violation(body: dict[str, Any]) -> str:
        judged.append(body)
        return json.dumps({"violation": True, "confidence": 0.95, "reason": "looks for passwords"})

    model.answer_when(lambda body: body["messages"][0]["content"] == JUDGE_INSTRUCTIONS, violation)
    model.reply_tool_call("logs__search", {"service": "api", "query": "password="})
    service = await start()
    contract = await fire(service, "a", {"errors": 40})
    assert "done" == await finished(service, contract)
    [request] = judged
    assert '"tool": "logs.search"' in request["messages"][1]["content"]
    [result] = [json.loads(m["content"]) for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert result["ok"] is False
    assert result["error"].startswith("denied: no-secret-hunting: ")
    assert "looks for passwords" in result["error"]
    assert [] == seen(calls_file)


async def test_needs_approval_pauses_and_approve_runs_the_call(
    start: Start, model: FakeOpenAIServer, calls_file: Path
) -> None:
    model.reply_tool_call("logs__delete", {"service": "api"})
    service = await start()
    contract = await fire(service, "a", {"errors": 40})
    assert "paused" == await finished(service, contract)
    [item] = (await service.store.list_inbox(kind="approval", status="open")).items
    assert "logs.delete" in item.reason
    assert "ask-delete" in item.reason
    assert [] == seen(calls_file)
    await service.inbox.approve(item.id, actor="alice", note="ok")
    await wait_for(lambda: len(model.requests) >= 2, timeout_s=30, what="the resumed session")
    [result] = tool_results(model, 1)
    assert result["ok"] is True
    assert "deleted the logs of api" == result["content"]
    assert "alice" == result["approval"]["by"]
    assert [{"tool": "delete", "arguments": {"service": "api"}}] == seen(calls_file)


async def test_a_denied_approval_never_calls_the_tool(
    start: Start, model: FakeOpenAIServer, calls_file: Path
) -> None:
    model.reply_tool_call("logs__delete", {"service": "api"})
    service = await start()
    contract = await fire(service, "a", {"errors": 40})
    assert "paused" == await finished(service, contract)
    [item] = (await service.store.list_inbox(kind="approval", status="open")).items
    await service.inbox.deny(item.id, actor="bob", note="no")
    await wait_for(lambda: len(model.requests) >= 2, timeout_s=30, what="the resumed session")
    [result] = tool_results(model, 1)
    assert result["ok"] is False
    assert "the tool was not called" in result["error"]
    assert [] == seen(calls_file)


async def test_a_long_result_is_cut_at_4000_characters(start: Start, model: FakeOpenAIServer) -> None:
    model.reply_tool_call("logs__search", {"service": "api", "lines": 500})
    service = await start()
    contract = await fire(service, "a", {"errors": 40})
    assert "done" == await finished(service, contract)
    [result] = tool_results(model, 1)
    assert 4000 == len(result["content"])
    assert "cut at 4000 of 10000 characters" == result["truncated"]


async def test_notify_only_offers_no_mcp_tools(start: Start, model: FakeOpenAIServer) -> None:
    service = await start()
    contract = await fire(service, "quiet", {"errors": 40})
    assert "done" == await finished(service, contract)
    assert {"sentinel_act", "sentinel_escalate", "sentinel_history"} == set(offered(model))


async def test_a_server_that_cannot_start_is_an_error_result_and_in_status(
    start: Start, model: FakeOpenAIServer
) -> None:
    model.reply_tool_call("broken__search", {"service": "api"})
    service = await start()
    contract = await fire(service, "b", {"errors": 40})
    assert "done" == await finished(service, contract)
    assert "broken__search" in offered(model)
    [result] = tool_results(model, 1)
    assert result["ok"] is False
    assert "MCP server 'broken' is not available" in result["error"]
    status = (await service.status())["mcpServers"]
    assert "failed" == status["broken"]["state"]
    assert "no-such-server" in status["broken"]["error"]
    await wait_for(lambda: service.mcp.status()["logs"]["state"] == "ready", timeout_s=30)
    async with aiohttp.ClientSession() as http, http.get(f"{service.url}/readyz") as answer:
        assert 200 == answer.status
        body = await answer.json()
    assert {"logs": "ready", "broken": "failed"} == body["mcpServers"]


@pytest.mark.parametrize("logs_server", ["stdio"], indirect=True)
async def test_sentinel_status_prints_each_mcp_server(start: Start, tmp_path: Path) -> None:
    """`sentinel status` (a subprocess against the running service) shows the states and why."""
    service = await start()
    await wait_for(lambda: service.mcp.status()["logs"]["state"] == "ready", timeout_s=30)
    await wait_for(lambda: service.mcp.status()["broken"]["state"] == "failed", timeout_s=30)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    child = await asyncio.create_subprocess_exec(
        *sentinel_command(),
        "status",
        "--url",
        service.url,
        "-c",
        str(tmp_path / "sentinel.yaml"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**env, "COLUMNS": "250", "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    out, err = await asyncio.wait_for(child.communicate(), 60)
    text = out.decode()
    assert 0 == child.returncode, err.decode()
    assert "mcp server logs (stdio): ready, 2 tool(s)" in text
    assert "mcp server broken (stdio): failed, 0 tool(s): FileNotFoundError" in text


@pytest.mark.parametrize("logs_server", ["stdio"], indirect=True)
async def test_the_stdio_server_process_is_gone_after_stop(start: Start, tmp_path: Path) -> None:
    service = await start()
    await wait_for(lambda: service.mcp.status()["logs"]["state"] == "ready", timeout_s=30)
    pid = int((tmp_path / "pid").read_text())
    os.kill(pid, 0)  # alive
    await service.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "stopped" == service.mcp.status()["logs"]["state"]
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("mcp:")]


@pytest.fixture
async def servers(tmp_path: Path, calls_file: Path) -> AsyncIterator[McpGate]:
    """The stdio test server behind a gate, without a service (retried at once after a failure)."""
    spec = StdioMcpServer.model_validate(
        {
            "command": [sys.executable, str(SERVER), "stdio"],
            "env": {"MCP_CALLS_FILE": str(calls_file), "MCP_PID_FILE": str(tmp_path / "pid")},
        }
    )
    connections = McpServers(
        {"logs": spec}, base_dir=tmp_path, redactor=Redactor(), clock=SystemClock(), retry_s=0
    )
    connections.start()
    gate = McpGate(servers=connections, policy=ActionPolicySpec(), inbox=None, redactor=Redactor())  # type: ignore[arg-type]
    yield gate
    await connections.stop()


@pytest.mark.parametrize("logs_server", ["http"], indirect=True)
@pytest.mark.parametrize(
    ("allowed", "state"),
    [(("localhost",), "failed"), (("localhost", "127.0.0.1"), "ready")],
    ids=["private-address-refused", "listed-address-allowed"],
)
async def test_a_url_server_obeys_the_host_policy_where_it_connects(
    logs_server: str, tmp_path: Path, allowed: tuple[str, ...], state: str
) -> None:
    """A URL server's name is checked at load; where it connects is checked too: ``localhost``
    is allowed by name, but the loopback address it resolves to is private, refused unless listed
    (the SDK's own HTTP client is guarded like Apprise's connections)."""
    url = json.loads(logs_server)["url"].replace("127.0.0.1", "localhost")
    spec = UrlMcpServer.model_validate({"url": url, "timeoutMs": 10000})
    servers = McpServers(
        {"logs": spec},
        base_dir=tmp_path,
        redactor=Redactor(),
        clock=SystemClock(),
        policy=HostPolicy(allowed),
    )
    servers.start()
    connection = servers.connections["logs"]
    try:
        await wait_for(lambda: connection.state in ("ready", "failed"), timeout_s=20, what="the connection")
        assert state == connection.state, connection.error
    finally:
        await servers.stop()


async def test_concurrent_calls_share_one_connection(servers: McpGate, calls_file: Path) -> None:
    """Twenty calls at once over the one shared connection: each gets its own answer."""
    results = await asyncio.gather(
        *(servers.call("logs", "search", {"service": f"s{i}", "lines": 1}) for i in range(20))
    )
    assert [f"s{i}: ERROR connection refused () #0" for i in range(20)] == [r["content"] for r in results]
    assert 20 == len(seen(calls_file))


async def test_a_server_that_dies_is_an_error_result_then_comes_back(
    servers: McpGate, tmp_path: Path
) -> None:
    """The stdio server is killed: the next call is an error result (never an exception); a later
    call starts a new server process (retried at once here: retry_s=0)."""
    assert (await servers.call("logs", "search", {"service": "api"}))["ok"] is True
    first = int((tmp_path / "pid").read_text())
    os.kill(first, signal.SIGKILL)
    failed = await servers.call("logs", "search", {"service": "api"})
    assert failed["ok"] is False, failed
    assert "MCP server 'logs'" in failed["error"]
    back = await wait_for(
        lambda: _ok(servers.call("logs", "search", {"service": "api"})), timeout_s=30, what="a new server"
    )
    assert back["ok"] is True
    assert first != int((tmp_path / "pid").read_text())
    assert "ready" == servers.servers.status()["logs"]["state"]


async def _ok(call: Awaitable[dict[str, Any]]) -> dict[str, Any] | None:
    result = await call
    return result if result["ok"] else None


async def test_an_unknown_tool_is_an_error_result(servers: McpGate) -> None:
    result = await servers.call("logs", "nope", {})
    assert result["ok"] is False
    assert "Unknown tool" in result["content"]
    assert "ready" == servers.servers.status()["logs"]["state"]


def write_project(tmp_path: Path, servers: str, tools: str) -> Path:
    (tmp_path / "sentinel.yaml").write_text(f'allowedHosts: ["mcp.example.com"]\nmcpServers:\n{servers}')
    (tmp_path / "watchers").mkdir(exist_ok=True)
    (tmp_path / "watchers" / "w.yaml").write_text(f"id: a\nstrategy: webhook\nfire: {{tools: {tools}}}\n")
    return tmp_path / "sentinel.yaml"


def issues(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={"K8S_TOKEN": "k8s-secret-token"})
    return [str(issue) for issue in caught.value.issues]


def test_a_url_server_whose_host_is_not_allowed_is_a_load_error(tmp_path: Path) -> None:
    path = write_project(
        tmp_path,
        '  k8s: {url: "http://10.0.0.8:8811/mcp", headers: {Authorization: "Bearer ${env:K8S_TOKEN}"}}\n',
        '["k8s.list_pods"]',
    )
    [problem] = issues(path)
    assert "sentinel.yaml:3: mcpServers.k8s.url: host '10.0.0.8' is not in allowedHosts" in problem
    assert "k8s-secret-token" not in problem


def test_an_unknown_server_in_fire_tools_is_a_load_error(tmp_path: Path) -> None:
    path = write_project(tmp_path, '  grafana: {command: ["mcp-grafana"]}\n', '["grafana.*", "grafna.query"]')
    [problem] = issues(path)
    assert "w.yaml:3: fire.tools[1]: unknown MCP server 'grafna'" in problem
    assert "did you mean 'grafana'" in problem


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ("  x: {}\n", "an MCP server needs either command"),
        ("  x: {command: []}\n", "mcpServers.x.command"),
        ("  x: {url: ftp://h/mcp}\n", "is not an http(s) URL"),
        ('  x: {command: [a], url: "http://mcp.example.com"}\n', "url"),
        ("  bad.name: {command: [a]}\n", "mcpServers"),
    ],
)
def test_bad_server_entries_are_load_errors(tmp_path: Path, servers: str, expected: str) -> None:
    path = write_project(tmp_path, servers, "[]")
    found = issues(path)
    assert any(expected in problem and "sentinel.yaml:3: " in problem for problem in found), found


@pytest.mark.parametrize("pattern", ['["grafana"]', '["*.query"]', '[".x"]'])
def test_bad_tool_patterns_are_load_errors(tmp_path: Path, pattern: str) -> None:
    path = write_project(tmp_path, '  grafana: {command: ["mcp-grafana"]}\n', pattern)
    [problem] = issues(path)
    assert "fire.tools[0]" in problem


def test_policy_paths_accept_tool_action_and_arguments(tmp_path: Path) -> None:
    (tmp_path / "sentinel.yaml").write_text(
        "actionPolicy:\n  rules:\n"
        "    - {id: r, decision: deny, conditions: [{path: arguments.query, op: contains, value: drop}]}\n"
        "    - {id: s, decision: deny, conditions: [{path: argumentz, op: exists}]}\n"
    )
    [problem] = issues(tmp_path / "sentinel.yaml")
    assert "argumentz" in problem
    assert "arguments.<path>" in problem
