"""run_command through the action policy, and approvals that pause and resume sessions (SPEC.md §5.4, §8).

The program a command names is located once (fixed PATH, symlinks resolved): the policy judges
that real program and, when it allows it, that very file is started. ``auto`` runs the command
at once; ``deny`` answers the agent with the reason; ``needs_approval`` files an approval inbox
item (with the real program when its name differs from the command's) and pauses the session
durably. Approving runs the exact command recorded in the item, provided its name still leads
to the program that was approved, and resumes the session with its result; denying, or
``approvalTimeoutMs`` passing, resumes it with a denial. A command the plain rules allow is
then put to the judge rules in scope (``judge.py``), which may deny it or ask for approval.
Every decision and command result is in the transcript (as the tool result) and in the inbox
audit trail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import posixpath
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sentinel_hooks.background import BackgroundTask
from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.policy.commands import SAFE_PATH, CommandResult, Located, locate, run_command
from sentinel_hooks.callbacks.policy.judge import Judges, overrule
from sentinel_hooks.callbacks.policy.rules import CommandRequest, PolicyDecision, decide
from sentinel_hooks.callbacks.sessions.progress import progress_key
from sentinel_hooks.callbacks.sessions.tools import ActArgs, Paused, ToolBox
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.service import ActionPolicySpec
from sentinel_hooks.core.roles import Who
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.inbox.severity import severity_for
from sentinel_hooks.relay.relay import Relay
from sentinel_hooks.store.audit import AuditAction
from sentinel_hooks.store.base import CheckpointStore, ContractStore, InboxStore
from sentinel_hooks.store.records import Contract, InboxItem
from sentinel_hooks.store.shortcuts import get_checkpoint

if TYPE_CHECKING:
    from sentinel_hooks.callbacks.mcp.calls import McpGate

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 30_000
SWEEP_S = 5.0


class CommandGate:
    """Decides ``run_command`` requests and runs the allowed ones."""

    def __init__(
        self,
        *,
        policy: ActionPolicySpec,
        inbox: Inbox,
        work_dir: Path,
        secrets: Collection[str],
        path: str = SAFE_PATH,
        judges: Judges | None = None,
    ) -> None:
        self._policy = policy
        self._judges = judges
        self._inbox = inbox
        self._work_dir = work_dir
        self._secrets = list(secrets)
        self._path = path

    def judge(
        self, act: ActArgs, *, watcher_id: str, skill_id: str | None, history: list[str]
    ) -> tuple[CommandRequest, Located | None, PolicyDecision]:
        """The request, where its program is, and what the policy decides about it."""
        command = act.command or ""
        located = locate(command, self._path)
        request = CommandRequest(
            command=command,
            args=list(act.args or []),
            watcher_id=watcher_id,
            skill_id=skill_id,
            executable=located.real if located else None,
        )
        return request, located, decide(self._policy, request, history=history)

    async def request(
        self, box: ToolBox, call: ToolCall, act: ActArgs, *, history: list[str]
    ) -> dict[str, Any]:
        started = time.perf_counter()
        request, located, decision = self.judge(
            act, watcher_id=box.contract.watcher_id, skill_id=box.skill_id, history=history
        )
        if decision.decision == "auto" and self._judges:
            proposal = {"action": "run_command", "argv": request.argv, "program": request.executable}
            decision = overrule(decision, await self._judges.review("run_command", request.facts(), proposal))
        decision = replace(decision, elapsed_ms=(time.perf_counter() - started) * 1000)
        timeout_ms = act.timeoutMs or DEFAULT_TIMEOUT_MS
        if decision.decision == "deny":
            return {
                "ok": False,
                "code": None,
                "error": f"denied by policy: {decision.reason}",
                **_said(decision.to_json()),
            }
        if decision.decision == "auto":
            result = await self.run(request.argv, timeout_ms, located=located)
            return {**result, **_said(decision.to_json())}
        runs = ""
        if located is not None and posixpath.basename(located.real) != posixpath.basename(request.command):
            runs = f" (runs {located.real})"
        item = await self._inbox.create(
            "approval",
            severity=severity_for(box.contract.trigger.priority),
            reason=f"run `{' '.join(request.argv)}`{runs}? {decision.reason}",
            watcher_id=box.contract.watcher_id,
            callback_id=box.contract.callback_id,
            session_key=box.contract.session_key,
            detail={
                "argv": request.argv,
                "executable": request.executable,
                "timeoutMs": timeout_ms,
                "toolCallId": call.id,
                "policy": decision.to_json(),
            },
            actor="agent",
        )
        # After the item: a crash in between leaves the contract pending (its fallback still
        # comes), never paused with no approval that could ever resume it.
        await box.relay.approval_requested(box.contract.callback_id)
        raise Paused(item.id, call, request.argv, timeout_ms / 1000, policy=decision.to_json())

    async def run(
        self, argv: list[str], timeout_ms: int, *, located: Located | None = None
    ) -> dict[str, Any]:
        """Run ``argv``: the program ``located`` when given, else ``argv[0]`` looked up now."""
        result = await run_command(
            argv,
            timeout_s=timeout_ms / 1000,
            cwd=self._work_dir,
            secrets=self._secrets,
            path=self._path,
            located=located,
        )
        return result.to_json()

    async def run_approved(self, argv: list[str], timeout_ms: int, executable: str | None) -> dict[str, Any]:
        """Run an approved command, only if its name still leads to the program that was approved."""
        located = locate(argv[0], self._path) if argv else None
        if executable is not None and (located is None or located.real != executable):
            now = located.real if located else "nothing"
            return CommandResult.failed(
                f"`{argv[0]}` was approved as {executable} but now runs {now}; the command did not run"
            ).to_json()
        return await self.run(argv, timeout_ms, located=located)


def _said(decision: dict[str, Any]) -> dict[str, Any]:
    return {"policy": decision}


class ApprovalRoles(ContractStore, CheckpointStore, InboxStore, Protocol):
    """The store roles the resumer calls: the paused callback, its session's progress, and the
    open approvals."""


class Audit(Protocol):
    """Records a change in the audit trail (``ServiceOperations.audit``)."""

    async def __call__(self, who: Who, action: AuditAction, target: str, note: str | None = None) -> None: ...


async def no_audit(who: Who, action: AuditAction, target: str, note: str | None = None) -> None:
    """An ``Audit`` that records nothing (a resumer without an audit trail: tests, tools)."""


EXPIRER = Who("sentinel", via="source")  # an approval nobody decided within approvalTimeoutMs
EXPIRY_NOTE = "approvalTimeoutMs passed"


class ApprovalResumer:
    """Turns approval decisions into tool results and puts the paused session back in its queue.

    ``requeue`` is where a decided session goes: the hook-session queue, or the service's own
    callback sink when one replaces it.
    """

    def __init__(
        self,
        *,
        store: ApprovalRoles,
        clock: Clock,
        inbox: Inbox,
        gate: CommandGate,
        relay: Relay,
        requeue: Callable[[Contract], Awaitable[None]],
        append: Callable[[Contract, dict[str, Any]], Any],
        timeout_ms: int,
        mcp: McpGate | None = None,
        audit: Audit = no_audit,
    ) -> None:
        """``audit`` records each approval this replica expires in the audit trail (SPEC §21)."""
        self._store = store
        self._clock = clock
        self._inbox = inbox
        self._gate = gate
        self._relay = relay
        self._requeue = requeue
        self._append = append
        self._timeout_ms = timeout_ms
        self._mcp = mcp
        self._audit = audit
        self._loop = BackgroundTask()

    async def decided(self, item: InboxItem) -> None:
        """The inbox's ``on_decision`` hook: approved → run, denied/expired → refuse; then resume."""
        if item.kind != "approval" or item.callback_id is None:
            return
        # the agent gets a fresh deadline to report, whatever became of the session
        await self._relay.approval_decided(item.callback_id)
        contract = await self._store.get_contract(item.callback_id)
        progress = await get_checkpoint(self._store, progress_key(item.callback_id)) or {}
        if contract is None or progress.get("status") != "paused" or progress.get("approvalId") != item.id:
            return
        call_id = str(item.detail.get("toolCallId"))
        mcp = item.detail.get("mcp")
        if item.status == "approved" and isinstance(mcp, dict):
            if self._mcp is None:
                result = {"ok": False, "error": "MCP servers are not available in this process"}
            else:
                result = await self._mcp.run_approved(mcp)
            result = {**result, "approval": {"status": "approved", "by": item.actor, "note": item.note}}
        elif item.status == "approved":
            executable = item.detail.get("executable")
            result = await self._gate.run_approved(
                list(item.detail.get("argv", [])),
                int(item.detail.get("timeoutMs", 30000)),
                executable if isinstance(executable, str) else None,
            )
            result = {**result, "approval": {"status": "approved", "by": item.actor, "note": item.note}}
        else:
            why = "the approval timed out" if item.status == "expired" else f"denied by {item.actor}"
            note = f" ({item.note})" if item.note else ""
            what = "the tool was not called" if isinstance(mcp, dict) else "the command did not run"
            result = {
                "ok": False,
                "code": None,
                "error": f"{why}{note}; {what}",
                "approval": {"status": item.status, "by": item.actor, "note": item.note},
            }
        message = {
            "role": "tool",
            "toolCallId": call_id,
            "name": str(item.detail.get("toolName") or "sentinel_act"),
            "content": json.dumps(result, ensure_ascii=False, default=str),
        }
        await self._append(contract, {"kind": "message", "message": message})
        await self._store.put_checkpoint(progress_key(item.callback_id), {"status": "resuming"})
        await self._requeue(contract)

    def start(self) -> None:
        self._loop.start(self._sweep)

    async def stop(self) -> None:
        await self._loop.stop()

    async def _sweep(self) -> None:
        """Expire approvals older than approvalTimeoutMs (the decision hook then resumes with a denial)."""
        while True:
            with contextlib.suppress(Exception):
                await self.expire_overdue()
            await asyncio.sleep(SWEEP_S)

    async def expire_overdue(self) -> int:
        cutoff = self._clock.now() - timedelta(milliseconds=self._timeout_ms)
        expired = 0
        cursor: str | None = None
        while True:
            page = await self._store.list_inbox(status="open", kind="approval", limit=200, cursor=cursor)
            for item in page.items:
                if item.created_at <= cutoff:
                    try:
                        await self._inbox.expire(item.id, actor=EXPIRER.actor, note=EXPIRY_NOTE)
                    except Exception:  # decided meanwhile (or by another replica)
                        continue
                    expired += 1
                    try:
                        await self._audit(EXPIRER, "approval.expire", item.id, EXPIRY_NOTE)
                    except Exception as exc:  # the expiry stands; say what the trail lacks
                        log.warning("approval %s expired; its audit entry was not written: %s", item.id, exc)
            cursor = page.next_cursor
            if not cursor:
                return expired
