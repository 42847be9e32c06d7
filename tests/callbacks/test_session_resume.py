"""kill -9 in the middle of a hook session: it resumes after restart without repeating a tool call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import aiohttp
import pytest

from sentinel_hooks.testing import FakeOpenAIServer
from tests.cli.conftest import sentinel_command
from tests.service.test_process import free_port
from tests.support import wait_for

pytestmark = pytest.mark.slow

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
hookResponseTimeoutMs: 60000
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model}", model: m, timeoutMs: 60000}}
targets: {{out: {{type: file, path: out.jsonl}}}}
actionPolicy:  # argv0 is the program that runs: sh links to dash or bash on most systems
  rules:
    - {{id: sh-ok, decision: auto, conditions: [{{path: argv0, op: in, value: [sh, dash, bash]}}]}}
"""


def start(config: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    with (config.parent / "service.log").open("ab") as log:
        return subprocess.Popen(
            [*sentinel_command(), "run", "-c", str(config)], stdout=log, stderr=log, env=env
        )


async def get(url: str) -> tuple[int, object]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


async def ready(base: str) -> bool:
    try:
        return (await get(base + "/readyz"))[0] == 200
    except OSError:
        return False


def project(folder: Path, port: int, model: FakeOpenAIServer) -> tuple[Path, str]:
    """``folder``'s sentinel.yaml with watcher ``w`` (a webhook watcher), and the service's URL."""
    config = folder / "sentinel.yaml"
    config.write_text(CONFIG.format(port=port, model=model.url))
    (folder / "watchers").mkdir()
    (folder / "watchers" / "w.yaml").write_text("id: w\nstrategy: webhook\ndeliveryTargets: [out]\n")
    return config, f"http://127.0.0.1:{port}"


async def fire_once(base: str) -> None:
    """Wait for the service to be ready, then fire watcher ``w`` once."""
    await wait_for(lambda: ready(base), timeout_s=60, what="the service")
    async with aiohttp.ClientSession() as session, session.post(base + "/hooks/ingest/w", json={"n": 1}) as r:
        assert 202 == r.status


async def test_session_resumes_after_kill_9(tmp_path: Path) -> None:
    """The command ran once before the kill; after restart the session continues from its checkpoint."""
    ran = tmp_path / "ran.txt"
    port = free_port()
    async with FakeOpenAIServer() as model:
        model.reply_tool_call(
            "sentinel_act", {"action": "run_command", "command": "sh", "args": ["-c", f"echo once >> {ran}"]}
        )
        model.hang()
        model.reply_tool_call("sentinel_act", {"action": "notify", "message": "checked, all fine"})
        config, base = project(tmp_path, port, model)
        proc = start(config)
        try:
            await fire_once(base)
            await wait_for(
                lambda: len(model.requests) == 2, timeout_s=30, what="the session to wait on the model"
            )
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert ["once"] == ran.read_text().split()

            proc = start(config)
            await wait_for(lambda: ready(base), timeout_s=60, what="the restarted service")
            await wait_for(
                lambda: (tmp_path / "out.jsonl").exists(), timeout_s=30, what="the notify after resume"
            )
            assert ["once"] == ran.read_text().split()
            [line] = (tmp_path / "out.jsonl").read_text().splitlines()
            assert ("notify", "checked, all fine") == (json.loads(line)["kind"], json.loads(line)["message"])

            async def tool_results() -> list[object]:
                _, session = await get(base + "/api/v1/sessions/sentinel:hooks:watcher:w")
                entries = session["transcript"]  # type: ignore[index]
                return [e for e in entries if e["entry"].get("message", {}).get("role") == "tool"]

            await wait_for(lambda: _count(tool_results, 2), timeout_s=45, what="the notify's tool result")
            assert 2 == len(await tool_results())  # run_command once (before the kill), notify once
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=15)


async def _count(found: object, n: int) -> bool:
    return len(await found()) >= n  # type: ignore[operator]


async def test_a_notify_cut_off_before_its_result_was_written_is_not_sent_twice(tmp_path: Path) -> None:
    """A notify's result is written with the session's next step; killed while the model thinks
    about its next reply, the restarted session tries the notify again, which sends nothing."""
    port = free_port()
    async with FakeOpenAIServer() as model:
        model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk full on db-1"})
        model.hang()
        model.reply_text("done")
        config, base = project(tmp_path, port, model)
        out = tmp_path / "out.jsonl"
        proc = start(config)
        try:
            await fire_once(base)
            await wait_for(lambda: len(model.requests) == 2, timeout_s=30, what="the model's second turn")
            assert out.exists()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)

            proc = start(config)
            await wait_for(lambda: ready(base), timeout_s=60, what="the restarted service")

            async def entries() -> list[dict[str, object]] | None:
                _, found = await get(base + "/api/v1/sessions/sentinel:hooks:watcher:w")
                listed = [e["entry"] for e in found["transcript"]]  # type: ignore[index]
                ended = any(e.get("message", {}).get("content") == "done" for e in listed)
                return listed if ended else None

            listed = await wait_for(entries, timeout_s=45, what="the resumed session's end")
            [line] = out.read_text().splitlines()
            assert "disk full on db-1" == json.loads(line)["message"]
            results = [e for e in listed if e.get("message", {}).get("role") == "tool"]  # type: ignore[union-attr]
            assert 1 == len(results)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=15)
