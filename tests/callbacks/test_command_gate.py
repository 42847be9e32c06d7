"""The command gate judges the program that really runs: real symlinks on a PATH it resolves.

A link named ``ls`` that points at ``rm`` is ``rm`` to the policy; the file judged is the file
started; an approved command whose name has come to lead elsewhere does not run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sentinel_hooks.callbacks.policy.approvals import CommandGate
from sentinel_hooks.callbacks.sessions.tools import ActArgs
from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.service import ActionPolicySpec
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.service import Service
from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.testing import FakeOpenAIServer
from tests.support import wait_for

POLICY = {
    "default": "needs_approval",
    "rules": [
        {
            "id": "no-rm",
            "priority": 100,
            "decision": "deny",
            "conditions": [{"path": "argv0", "op": "eq", "value": "rm"}],
        },
        {
            "id": "ls-ok",
            "priority": 10,
            "decision": "auto",
            "conditions": [{"path": "argv0", "op": "eq", "value": "ls"}],
        },
        {
            "id": "echo-ok",
            "priority": 10,
            "decision": "auto",
            "conditions": [{"path": "argv0", "op": "eq", "value": "echo"}],
        },
    ],
}


def real(program: str) -> str:
    found = shutil.which(program)
    assert found is not None, f"{program} is not installed"
    return os.path.realpath(found)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A directory for the gate's PATH, holding an ``ls`` that is a symlink to ``rm``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "ls").symlink_to(real("rm"))
    return folder


@pytest.fixture
def gate(tmp_path: Path, bin_dir: Path) -> CommandGate:
    return CommandGate(
        policy=ActionPolicySpec.model_validate(POLICY),
        inbox=Inbox(SqliteStore.in_memory(), FakeClock()),
        work_dir=tmp_path / "work",
        secrets=(),
        path=str(bin_dir),
    )


def act(command: str, *args: str) -> ActArgs:
    return ActArgs(action="run_command", command=command, args=list(args))


def test_a_link_named_ls_to_rm_is_rm(gate: CommandGate) -> None:
    """`ls` found on the PATH is a link to rm: argv0 is `rm`, and the deny rule decides."""
    request, located, decision = gate.judge(act("ls", "x"), watcher_id="w", skill_id=None, history=[])
    assert ("rm", "deny", "no-rm") == (request.facts()["argv0"], decision.decision, decision.rule_id)
    assert located is not None
    assert (request.executable, "ls x") == (real("rm"), request.facts()["command"])


async def test_the_program_judged_is_the_program_started(gate: CommandGate, bin_dir: Path) -> None:
    """An allowed command starts the file the policy saw, even when its link changes afterwards."""
    (bin_dir / "say").symlink_to(real("echo"))
    _, located, decision = gate.judge(act("say", "hello"), watcher_id="w", skill_id=None, history=[])
    assert "auto" == decision.decision
    (bin_dir / "say").unlink()
    (bin_dir / "say").symlink_to(real("false"))
    result = await gate.run(["say", "hello"], 5000, located=located)
    assert (True, "hello\n") == (result["ok"], result["stdout"])


async def test_an_approved_command_does_not_run_once_its_name_leads_elsewhere(
    gate: CommandGate, bin_dir: Path, tmp_path: Path
) -> None:
    """Approved as echo, `say` now links to rm: nothing runs and the result says why."""
    (bin_dir / "say").symlink_to(real("echo"))
    request, _, _ = gate.judge(act("say", "x"), watcher_id="w", skill_id=None, history=[])
    (bin_dir / "say").unlink()
    (bin_dir / "say").symlink_to(real("rm"))
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    result = await gate.run_approved(["say", str(victim)], 5000, request.executable)
    assert (False, True) == (result["ok"], victim.exists())
    assert f"`say` was approved as {real('echo')} but now runs {real('rm')}" in result["error"]


CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: m, timeoutMs: 5000}}
targets: {{console: {{type: console}}}}
actionPolicy:
  default: needs_approval
  rules:
    - {{id: no-rm, priority: 100, decision: deny, conditions: [{{path: argv0, op: eq, value: rm}}]}}
    - {{id: ls-ok, priority: 10, decision: auto, conditions: [{{path: argv0, op: eq, value: ls}}]}}
"""


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[tuple[Service, FakeOpenAIServer]]:
    async with FakeOpenAIServer() as model:
        (tmp_path / "sentinel.yaml").write_text(CONFIG.format(model_url=model.url))
        (tmp_path / "watchers").mkdir()
        (tmp_path / "watchers" / "w.yaml").write_text(
            "id: w\nstrategy: webhook\ndeliveryTargets: [console]\n"
        )
        running = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await running.start()
        yield running, model
        await running.stop()


async def test_an_agent_cannot_pass_rm_off_as_ls(
    service: tuple[Service, FakeOpenAIServer], bin_dir: Path, tmp_path: Path
) -> None:
    """Through a running service: the agent's `<dir>/ls victim` (a link to rm) is denied; the file stays."""
    running, model = service
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    command = {"action": "run_command", "command": str(bin_dir / "ls"), "args": [str(victim)]}
    model.reply_tool_call("sentinel_act", command)
    outcome = await running.manager.ingest("w", {"n": 1})
    assert outcome.contract is not None
    callback_id = outcome.contract.callback_id
    await wait_for(lambda: running.sessions.queue.finished.get(callback_id), what="the session")
    tool = next(m for m in model.requests[1]["messages"] if m["role"] == "tool")
    assert ('"ruleId": "no-rm"' in tool["content"], victim.exists()) == (True, True)


async def test_an_approval_names_the_program_that_will_run(
    service: tuple[Service, FakeOpenAIServer], bin_dir: Path
) -> None:
    """A command whose name leads to another program asks for approval showing that program."""
    running, model = service
    (bin_dir / "show").symlink_to(real("echo"))
    command = {"action": "run_command", "command": str(bin_dir / "show"), "args": ["hi"]}
    model.reply_tool_call("sentinel_act", command)
    await running.manager.ingest("w", {"n": 1})

    async def approvals() -> list[str]:
        page = await running.inbox.list(kind="approval")
        return [item.reason for item in page.items]

    [reason] = await wait_for(approvals, what="the approval item")
    assert reason.startswith(f"run `{bin_dir / 'show'} hi` (runs {real('echo')})? ")
