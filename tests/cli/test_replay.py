"""`sentinel replay` as a real process against a real `sentinel run` (SPEC §22): the replayed agent
notifies, runs a command and calls a write MCP tool and a readOnly one; no sink hears of it, the
command does not run, the write server is not called, the readOnly one is."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.testing import FakeOpenAIServer
from tests.callbacks.test_mcp_client import SERVER, seen
from tests.service.test_process import Running, free_port
from tests.support import Sink, wait_for

pytestmark = pytest.mark.slow

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 600000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 10000}}
defaultHookModel: local
targets:
  hook: {{type: webhook, url: "{sink}"}}
mcpServers:
  reads: {{command: ["{python}", "{server}", "stdio"], env: {{MCP_CALLS_FILE: "{reads}"}}, readOnly: true}}
  writes: {{command: ["{python}", "{server}", "stdio"], env: {{MCP_CALLS_FILE: "{writes}"}}}}
actionPolicy:
  default: auto
"""

WATCHERS = """\
watchers:
  - id: disk
    strategy: webhook
    deliveryTargets: [hook]
    fire: {tools: ["reads.*", "writes.*"]}
"""


@pytest.fixture
async def service(tmp_path: Path, model: FakeOpenAIServer, sink: Sink) -> AsyncIterator[Running]:
    port = free_port()
    text = CONFIG.format(
        port=port,
        model_url=model.url,
        sink=sink.url("/in"),
        python=sys.executable,
        server=SERVER,
        reads=tmp_path / "reads.jsonl",
        writes=tmp_path / "writes.jsonl",
    )
    (tmp_path / "sentinel.yaml").write_text(text)
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
    running = Running(tmp_path / "sentinel.yaml", port)
    await asyncio.to_thread(running.start)
    yield running
    await asyncio.to_thread(running.kill, 15)


async def replay(service: Running, *args: str) -> tuple[int, str, str]:
    done = await asyncio.to_thread(service.cli, "replay", *args)
    return done.returncode, done.stdout, done.stderr


async def stored_callback(service: Running) -> str:
    """Fire the watcher and wait for its (quiet) session to end: the callback's id."""
    status, body = await asyncio.to_thread(
        service.call, "POST", "/api/v1/watchers/disk/fire", {"payload": {"host": "db-3"}}
    )
    assert 202 == status, body
    callback_id: str = body["callbackId"]

    async def ended() -> bool:
        _, shown = await asyncio.to_thread(service.call, "GET", f"/api/v1/callbacks/{callback_id}")
        messages = [e["entry"].get("message") or {} for e in shown["transcript"]]
        return any(m.get("role") == "assistant" and not m.get("tool_calls") for m in messages)

    await wait_for(ended, timeout_s=60, what="the original session")
    return callback_id


async def test_a_replayed_fire_reaches_nothing_but_read_only_tools(
    service: Running, model: FakeOpenAIServer, sink: Sink, tmp_path: Path
) -> None:
    callback_id = await stored_callback(service)
    marker = tmp_path / "ran"
    model.reply_tool_calls(
        [
            ("sentinel_act", {"action": "notify", "message": "db-3 disk is full"}),
            ("sentinel_act", {"action": "run_command", "command": "touch", "args": [str(marker)]}),
            ("writes__delete", {"service": "api"}),
            ("reads__search", {"service": "api", "lines": 1}),
        ]
    )
    code, out, err = await replay(service, callback_id, "--json")
    assert 0 == code, err
    result: dict[str, Any] = json.loads(out)
    replayed = result["replay"]
    assert ("notify", ["db-3 disk is full"]) == (replayed["outcome"], replayed["messages"])
    by_name = {c["name"]: c for c in replayed["toolCalls"]}
    assert {"writes__delete", "reads__search"} <= set(by_name), json.dumps(replayed["toolCalls"])
    assert "auto" == by_name["writes__delete"]["policy"]["decision"]
    assert (False, True) == (by_name["writes__delete"]["executed"], by_name["reads__search"]["executed"])
    assert "dry run: not executed" in by_name["writes__delete"]["result"]
    assert "silent" == result["original"]["outcome"]
    assert not marker.exists()
    assert [] == seen(tmp_path / "writes.jsonl")
    assert 1 == len(seen(tmp_path / "reads.jsonl"))
    assert 0 == sink.requests


async def test_replay_prints_both_sides_and_refuses_an_unknown_id(
    service: Running, model: FakeOpenAIServer, sink: Sink
) -> None:
    callback_id = await stored_callback(service)
    model.reply_tool_calls([("sentinel_act", {"action": "notify", "message": "db-3 disk is full"})])
    code, out, err = await replay(service, callback_id, "--goal", "page about full disks")
    assert 0 == code, err
    assert ("original" in out, "replay" in out, "db-3 disk is full" in out) == (True, True, True), out
    code, out, err = await replay(service, "01JNOSUCHCALLBACK000000000")
    assert (1, "not found" in err, "Traceback" in err) == (code, True, False), err
    assert 0 == sink.requests


async def test_replay_without_a_service_says_so(tmp_path: Path) -> None:
    (tmp_path / "sentinel.yaml").write_text(f"server: {{host: 127.0.0.1, port: {free_port()}}}\n")
    done = await asyncio.to_thread(Running(tmp_path / "sentinel.yaml", 0).cli, "replay", "01J")
    assert (3, "no Sentinel service answers", "Traceback" in done.stderr) == (
        done.returncode,
        "no Sentinel service answers" if "no Sentinel service answers" in done.stderr else done.stderr,
        False,
    )


async def test_eval_record_prints_a_case_for_the_stored_callback(service: Running) -> None:
    """The case names the watcher and callback, its outcome as the expectation; it loads as a case."""
    from sentinel_hooks.callbacks.sessions.evaluation import load_cases

    callback_id = await stored_callback(service)
    done = await asyncio.to_thread(service.cli, "eval", "record", callback_id, "--name", "quiet-disk")
    assert 0 == done.returncode, done.stderr
    cases_file = service.config.parent / "cases.yaml"
    cases_file.write_text("cases:\n" + done.stdout)
    (case,) = load_cases(cases_file)
    assert ("quiet-disk", "disk", callback_id, "silent") == (
        case.name,
        case.watcher,
        case.callback_id,
        case.expect.outcome,
    )


async def test_eval_runs_cases_from_a_stored_callback_and_from_an_envelope_file(
    service: Running, model: FakeOpenAIServer, sink: Sink, tmp_path: Path
) -> None:
    """`sentinel eval` reads a case's envelope from the running service (``callbackId``) and from
    a file next to the cases (``envelope: "@…"``); both run in the dry run, nothing reaches the sink."""
    callback_id = await stored_callback(service)
    _, shown = await asyncio.to_thread(service.call, "GET", f"/api/v1/callbacks/{callback_id}")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "disk.json").write_text(json.dumps(shown["envelope"]))
    (tmp_path / "cases.yaml").write_text(
        "cases:\n"
        f"  - {{name: from-the-service, callbackId: {callback_id}, expect: {{outcome: notify,"
        ' messageContains: ["db-3"]}}\n'
        '  - {name: from-a-file, watcher: disk, envelope: "@cases/disk.json", expect: {outcome: notify,'
        ' messageContains: ["db-3"]}}\n'
    )
    delivered = len(sink.received)
    for _ in range(2):
        model.reply_tool_call("sentinel_act", {"action": "notify", "message": "db-3 disk is full"})
        model.reply_text("done")
    done = await asyncio.to_thread(service.cli, "eval", str(tmp_path / "cases.yaml"), "--json")
    assert 0 == done.returncode, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [("from-the-service", 1), ("from-a-file", 1)] == [(r["case"], r["passed"]) for r in results]
    assert delivered == len(sink.received)
    (tmp_path / "cases" / "disk.json").write_text("{not json")
    broken = await asyncio.to_thread(service.cli, "eval", str(tmp_path / "cases.yaml"))
    assert (1, True, False) == (
        broken.returncode,
        "cases.yaml:3: from-a-file: envelope" in broken.stderr,
        "Traceback" in broken.stderr,
    ), broken.stderr
