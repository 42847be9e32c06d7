"""A dry run asks the real action policy about commands and MCP calls, runs no command, and calls
an MCP tool only on a readOnly server (SPEC §22).

The gate and its PATH are the command-gate tests' (``ls`` there is a link to ``rm``).
"""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.callbacks.backends.base import ToolSpec
from sentinel_hooks.callbacks.mcp.calls import McpGate
from sentinel_hooks.callbacks.policy.approvals import CommandGate
from sentinel_hooks.callbacks.sessions.dryrun import NOT_EXECUTED, DryRunCommands, DryRunMcp
from sentinel_hooks.callbacks.sessions.tools import McpTool
from sentinel_hooks.config.mcp import StdioMcpServer, UrlMcpServer
from sentinel_hooks.config.service import ActionPolicySpec
from tests.callbacks.test_command_gate import act, bin_dir, gate
from tests.callbacks.test_mcp_client import calls_file, seen, servers

__all__ = ["bin_dir", "calls_file", "gate", "servers"]  # pytest fixtures used by name


def test_an_allowed_command_is_judged_auto_and_does_not_run(
    gate: CommandGate, bin_dir: Path, tmp_path: Path
) -> None:
    """`echo` here is a script that leaves a mark: the policy allows it, the dry run never starts it."""
    marker = tmp_path / "ran"
    script = bin_dir / "echo"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    commands = DryRunCommands(gate)
    result = commands.decide("call-1", act("echo", "hi"), watcher_id="w", skill_id=None, history=[])
    assert (False, NOT_EXECUTED, "auto", "echo-ok") == (
        result["ok"],
        result["error"],
        result["policy"]["decision"],
        result["policy"]["ruleId"],
    )
    assert not marker.exists()
    assert [("call-1", ["echo", "hi"])] == [(j["toolCallId"], j["argv"]) for j in commands.judged]


def test_a_denied_command_shows_the_deny(gate: CommandGate, tmp_path: Path) -> None:
    """`ls` is a link to rm: the dry run shows the deny rule, and the file stays."""
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    result = DryRunCommands(gate).decide(
        "call-2", act("ls", str(victim)), watcher_id="w", skill_id=None, history=[]
    )
    assert ("deny", "no-rm", NOT_EXECUTED) == (
        result["policy"]["decision"],
        result["policy"]["ruleId"],
        result["error"],
    )
    assert "keep me" == victim.read_text()


async def test_an_mcp_call_runs_only_on_a_read_only_server(servers: McpGate, calls_file: Path) -> None:
    """The same call is not executed while ``logs`` is not readOnly, and reaches it once it is."""
    tool = McpTool("logs__search", "logs", "search", ToolSpec("logs__search", "", {"type": "object"}))
    arguments = {"service": "api", "lines": 1}
    writes = DryRunMcp(servers, ActionPolicySpec.model_validate({"default": "auto"}), frozenset())
    result = await writes.decide("c1", tool, arguments, watcher_id="w", skill_id=None, history=[])
    assert (False, NOT_EXECUTED, "auto") == (result["ok"], result["error"], result["policy"]["decision"])
    assert [] == seen(calls_file)
    reads = DryRunMcp(servers, ActionPolicySpec.model_validate({"default": "auto"}), frozenset({"logs"}))
    result = await reads.decide("c2", tool, arguments, watcher_id="w", skill_id=None, history=[])
    assert result["ok"], result
    assert 1 == len(seen(calls_file))


def test_read_only_is_a_server_key_off_by_default() -> None:
    """``readOnly`` marks the servers a dry run may call; a server is not read-only unless it says so."""
    marked = StdioMcpServer.model_validate({"command": ["x"], "readOnly": True})
    assert (True, False) == (
        marked.read_only,
        UrlMcpServer.model_validate({"url": "http://127.0.0.1:1/mcp"}).read_only,
    )
