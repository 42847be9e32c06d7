"""A dry run asks the real action policy about a command and never starts it (SPEC §22)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sentinel_hooks.callbacks.policy.approvals import CommandGate
from sentinel_hooks.callbacks.sessions.dryrun import NOT_EXECUTED, DryRunCommands
from sentinel_hooks.callbacks.sessions.tools import ActArgs
from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import ActionPolicySpec
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.store.sqlite import SqliteStore

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
            "id": "touch-ok",
            "priority": 10,
            "decision": "auto",
            "conditions": [{"path": "argv0", "op": "eq", "value": "touch"}],
        },
    ],
}


def dry_run(tmp_path: Path) -> DryRunCommands:
    folder = tmp_path / "bin"
    folder.mkdir()
    for program in ("touch", "rm"):
        found = shutil.which(program)
        assert found is not None
        (folder / program).symlink_to(os.path.realpath(found))
    gate = CommandGate(
        policy=ActionPolicySpec.model_validate(POLICY),
        inbox=Inbox(SqliteStore.in_memory(), FakeClock()),
        work_dir=tmp_path,
        secrets=(),
        path=str(folder),
    )
    return DryRunCommands(gate)


def test_an_allowed_command_is_judged_auto_and_does_not_run(tmp_path: Path) -> None:
    commands = dry_run(tmp_path)
    marker = tmp_path / "ran"
    act = ActArgs(action="run_command", command="touch", args=[str(marker)])
    result = commands.decide("call-1", act, watcher_id="w", skill_id=None, history=[])
    assert (False, NOT_EXECUTED, "auto", "touch-ok") == (
        result["ok"],
        result["error"],
        result["policy"]["decision"],
        result["policy"]["ruleId"],
    )
    assert not marker.exists()
    assert [("call-1", ["touch", str(marker)])] == [(j["toolCallId"], j["argv"]) for j in commands.judged]


def test_a_denied_command_shows_the_deny(tmp_path: Path) -> None:
    commands = dry_run(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    act = ActArgs(action="run_command", command="rm", args=[str(victim)])
    result = commands.decide("call-2", act, watcher_id="w", skill_id=None, history=[])
    assert ("deny", NOT_EXECUTED) == (result["policy"]["decision"], result["error"])
    assert "keep me" == victim.read_text()
