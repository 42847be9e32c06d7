"""Two `sentinel run` replicas on one Redis: kill -9 the one running a hook session; the other
finishes it from its checkpoint, without running its completed command again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio

from sentinel_hooks.testing import FakeOpenAIServer
from tests.cli.conftest import sentinel_command
from tests.cluster.conftest import LEASE_MS, PREFIX
from tests.service.test_process import free_port
from tests.support import wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: {port}}}
cluster: {{leaseMs: {lease_ms}}}
hookResponseTimeoutMs: 60000
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model}", model: m, timeoutMs: 60000}}
targets: {{out: {{type: file, path: "{out}"}}}}
actionPolicy:  # argv0 is the program that runs: sh links to dash or bash on most systems
  rules:
    - {{id: sh-ok, decision: auto, conditions: [{{path: argv0, op: in, value: [sh, dash, bash]}}]}}
"""

SESSION_KEY = "sentinel:hooks:watcher:w"


def start(root: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    with (root / "service.log").open("ab") as log:
        return subprocess.Popen(
            [*sentinel_command(), "run", "-c", str(root / "sentinel.yaml")], stdout=log, stderr=log, env=env
        )


async def ready(base: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(base + "/readyz") as response:
            return response.status == 200
    except OSError:
        return False


async def test_killing_the_replica_running_a_session_lets_the_other_finish_it(
    tmp_path: Path, redis_url: str, raw: redis.asyncio.Redis
) -> None:
    """The session's command ran once before the kill; the surviving replica notifies, once."""
    ran, out = tmp_path / "ran.txt", tmp_path / "out.jsonl"
    async with FakeOpenAIServer() as model:
        model.reply_tool_call(
            "sentinel_act", {"action": "run_command", "command": "sh", "args": ["-c", f"echo once >> {ran}"]}
        )
        model.hang()
        model.reply_tool_call("sentinel_act", {"action": "notify", "message": "checked, all fine"})
        procs: dict[int, subprocess.Popen[bytes]] = {}
        bases: list[str] = []
        for name in ("a", "b"):
            root = tmp_path / name
            (root / "watchers").mkdir(parents=True)
            port = free_port()
            text = CONFIG.format(store=redis_url, port=port, lease_ms=LEASE_MS, model=model.url, out=out)
            (root / "sentinel.yaml").write_text(text)
            (root / "watchers" / "w.yaml").write_text("id: w\nstrategy: webhook\ndeliveryTargets: [out]\n")
            proc = start(root)
            procs[proc.pid] = proc
            bases.append(f"http://127.0.0.1:{port}")
        try:
            for base in bases:
                await wait_for(lambda base=base: ready(base), timeout_s=60, what=f"the replica at {base}")
            async with (
                aiohttp.ClientSession() as session,
                session.post(bases[0] + "/hooks/ingest/w", json={"n": 1}) as response,
            ):
                assert 202 == response.status
            await wait_for(
                lambda: len(model.requests) == 2, timeout_s=30, what="the session to wait on the model"
            )
            holder = await raw.get(f"{PREFIX}session-lock:{SESSION_KEY}")
            assert holder is not None
            pid = int(holder.split(" ")[0].rsplit("-", 2)[1])  # replica id: <host>-<pid>-<hex>
            victim = procs.pop(pid)
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=10)
            assert ["once"] == ran.read_text().split()

            await wait_for(  # the line, not the file: the target creates it before it writes
                lambda: out.exists() and out.read_text().endswith("\n"),
                timeout_s=4 * LEASE_MS / 1000 + 15,
                what="the notify",
            )
            # one notify (the dispatcher may send one delivery twice, under its one Idempotency-Key)
            sent = {
                (r["idempotencyKey"], r["kind"], r["message"])
                for r in map(json.loads, out.read_text().splitlines())
            }
            assert ["notify"] == [kind for _, kind, _ in sent]
            assert ["checked, all fine"] == [message for _, _, message in sent]
            await wait_for(lambda: len(model.requests) >= 4, what="the session's last model turn")
            assert 4 == len(model.requests)  # command, (killed), notify, final answer: nothing repeated
            assert ["once"] == ran.read_text().split()
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout=15)
