"""The service's environment and memory are closed to the commands it runs (real processes, Linux).

A parent process calls ``protect_process`` as ``sentinel run`` does at start, then runs a child
that tries to open the parent's ``/proc/PID/environ`` and ``/proc/PID/mem``. The same script
without the call is the control: there the child reads the parent's secret. Last, a real
``sentinel run`` and its agent's allowed ``cat`` of the service's environ.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_hooks.testing import FakeOpenAIServer
from tests.service.test_process import Running, free_port
from tests.support import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")

SECRET = "sv_Hq4Wm8Tz2Kc6Pb9N"

CHILD = """\
import json, os, sys
found = {}
for name in ("environ", "mem"):
    try:
        with open(f"/proc/{os.getppid()}/{name}", "rb") as f:
            found[name] = "opened" if name == "mem" else "secret read" * (sys.argv[1].encode() in f.read())
    except PermissionError:
        found[name] = "refused"
print(json.dumps(found))
"""

PARENT = """\
import subprocess, sys
from sentinel_hooks.hardening import protect_process
protected = protect_process() if sys.argv[1] == "protect" else False
child = subprocess.run([sys.executable, "-c", *sys.argv[2:]], capture_output=True, text=True, check=True)
print(protected, child.stdout, end="")
"""


def parent(mode: str) -> tuple[bool, dict[str, str]]:
    """Run the parent (``protect`` or ``plain``) with the secret in its environment."""
    done = subprocess.run(
        [sys.executable, "-c", PARENT, mode, CHILD, SECRET],
        env={**os.environ, "SERVICE_SECRET": SECRET},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    protected, found = done.stdout.split(" ", 1)
    return protected == "True", json.loads(found)


def test_a_child_cannot_read_a_protected_parent() -> None:
    """After protect_process, the child's open of the parent's environ and mem is refused."""
    assert (True, {"environ": "refused", "mem": "refused"}) == parent("protect")


def test_an_unprotected_parent_is_readable_by_its_child() -> None:
    """The control: without protect_process the child reads the parent's secret."""
    assert (False, {"environ": "secret read", "mem": "opened"}) == parent("plain")


PROJECT = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: m, apiKey: "${{env:MODEL_KEY}}", timeoutMs: 5000}}
targets: {{console: {{type: console}}}}
actionPolicy:
  default: deny
  rules:
    - {{id: cat-ok, priority: 10, decision: auto, conditions: [{{path: argv0, op: eq, value: cat}}]}}
"""


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    """A `sentinel run` to be started by the test (killed after it), with a secret in its environment."""
    monkeypatch.setenv("MODEL_KEY", SECRET)
    port = free_port()
    started = Running(tmp_path / "sentinel.yaml", port)
    yield started
    if started.proc is not None and started.proc.poll() is None:
        started.proc.kill()
        started.proc.wait()


@pytest.mark.slow
async def test_a_command_of_the_agent_cannot_read_the_running_service(service: Running) -> None:
    """`sentinel run`: the agent's allowed `cat /proc/<service pid>/environ` is refused by the kernel."""
    project = service.config.parent
    async with FakeOpenAIServer() as model:
        service.config.write_text(PROJECT.format(port=service.port, model_url=model.url))
        (project / "watchers").mkdir()
        (project / "watchers" / "w.yaml").write_text("id: w\nstrategy: webhook\ndeliveryTargets: [console]\n")
        await asyncio.to_thread(service.start)
        assert service.proc is not None
        environ = f"/proc/{service.proc.pid}/environ"
        model.reply_tool_call("sentinel_act", {"action": "run_command", "command": "cat", "args": [environ]})
        assert 202 == (await asyncio.to_thread(service.call, "POST", "/hooks/ingest/w", {"n": 1}))[0]
        await wait_for(lambda: len(model.requests) >= 2, timeout_s=20, what="the tool result")
    result = json.loads(next(m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"))
    assert (False, 1) == (result["ok"], result["code"])
    assert result["stderr"].endswith(f"cat: {environ}: Permission denied\n")
