"""A dry-run hook session for replay and evaluation (SPEC §22).

``dry_run_deps`` is the one seam: it builds the ``SessionDeps`` of a session whose parts that reach
the world are stand-ins (``dryrun.DryRunCommands`` and ``dryrun.DryRunMcp`` for actions,
``CapturingRelay`` and ``CapturingInbox`` for notifies and escalations), so the session itself
checks no flag. ``replay`` runs one envelope through it in a throwaway in-memory store and returns
what the session did, in the shape ``sentinel replay`` and ``sentinel eval`` print.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sentinel_hooks.callbacks.backends import create_backend
from sentinel_hooks.callbacks.backends.base import ModelBackend
from sentinel_hooks.callbacks.mcp.calls import McpGate
from sentinel_hooks.callbacks.mcp.client import McpServers
from sentinel_hooks.callbacks.policy.approvals import CommandGate
from sentinel_hooks.callbacks.policy.judge import Judges
from sentinel_hooks.callbacks.sessions.dryrun import DryRunCommands, DryRunMcp
from sentinel_hooks.callbacks.sessions.session import SessionDeps, SessionRoles, SessionRunner
from sentinel_hooks.clock import SystemClock
from sentinel_hooks.config.loader import LoadedConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.usage import fire_key
from sentinel_hooks.delivery.targets.base import Message
from sentinel_hooks.relay.relay import NotifyOutcome
from sentinel_hooks.store.backends import open_store
from sentinel_hooks.store.records import Contract, Trigger


@dataclass
class CapturingRelay:
    """A ``Relay`` stand-in: keeps each notify (it is never delivered) and accepts it as sent."""

    notifies: list[dict[str, Any]] = field(default_factory=list)

    async def notify(self, contract: Contract, message: Message, targets: list[str]) -> NotifyOutcome:
        self.notifies.append({"text": message.text, "targets": list(targets), "kind": message.kind})
        return NotifyOutcome(accepted=True, state="fulfilled", delivered=list(targets))

    async def fallback_now(self, callback_id: str, reason: str) -> None:
        self.notifies.append({"fallback": reason})


@dataclass
class CapturingInbox:
    """An ``Inbox`` stand-in: keeps each escalation (nobody is told) and answers as the inbox would."""

    store: SessionRoles
    escalations: list[dict[str, Any]] = field(default_factory=list)

    async def create(self, kind: str, *, severity: str, reason: str, **_: Any) -> Any:
        from types import SimpleNamespace

        self.escalations.append({"kind": kind, "severity": severity, "reason": reason})
        return SimpleNamespace(id=f"dry-run-{len(self.escalations)}")


@dataclass
class DryRun:
    """The stand-ins of one dry-run session, read back for its report."""

    relay: CapturingRelay
    inbox: CapturingInbox
    commands: DryRunCommands
    mcp: DryRunMcp | None


def dry_run_deps(
    config: LoadedConfig,
    store: SessionRoles,
    *,
    watcher: AnyWatcher | None,
    backends: dict[str, ModelBackend],
    work_dir: Path,
    mcp: McpServers | None,
) -> tuple[SessionDeps, DryRun]:
    """The session's dependencies with every part that reaches the world replaced (SPEC §22)."""
    service = config.service
    relay = CapturingRelay()
    inbox = CapturingInbox(store)
    judges = Judges(service.action_policy.judge_rules, backends)
    gate = CommandGate(
        policy=service.action_policy,
        inbox=inbox,  # type: ignore[arg-type]
        work_dir=work_dir,
        secrets=config.redactor.secrets,
        judges=judges,
    )
    commands = DryRunCommands(gate)
    dry_mcp = None
    if mcp is not None:
        read_only = frozenset(name for name, spec in service.mcp_servers.items() if spec.read_only)
        real = McpGate(
            servers=mcp,
            policy=service.action_policy,
            inbox=inbox,  # type: ignore[arg-type]
            redactor=config.redactor,
            judges=judges,
        )
        dry_mcp = DryRunMcp(real, service.action_policy, read_only)
    deps = SessionDeps(
        store=store,
        clock=SystemClock(),
        service=service,
        relay=relay,  # type: ignore[arg-type]
        inbox=inbox,  # type: ignore[arg-type]
        gate=commands,
        backends=backends,
        watcher=lambda _id: watcher,
        skill=lambda skill_id: config.skills.get(skill_id),
        redactor=config.redactor,
        judges=judges,
        mcp=dry_mcp,
    )
    return deps, DryRun(relay, inbox, commands, dry_mcp)


def with_model(watcher: AnyWatcher | None, model: str | None) -> AnyWatcher | None:
    """``watcher`` with its session's model replaced by ``model`` (``--model``)."""
    if watcher is None or model is None:
        return watcher
    return watcher.model_copy(update={"fire": watcher.fire.model_copy(update={"model": model})})


@contextlib.asynccontextmanager
async def _scratch(config: LoadedConfig) -> AsyncIterator[tuple[SessionRoles, Path, McpServers | None]]:
    with tempfile.TemporaryDirectory(prefix="sentinel-replay-") as tmp:
        store = open_store("memory://", base_dir=Path(tmp))
        await store.open()
        clock = SystemClock()
        mcp = None
        if config.service.mcp_servers:
            mcp = McpServers(
                config.service.mcp_servers, base_dir=config.base_dir, redactor=config.redactor, clock=clock
            )
            mcp.start()
        try:
            yield store, Path(tmp), mcp
        finally:
            if mcp is not None:
                await mcp.stop()
            await store.close()


async def replay(
    config: LoadedConfig,
    envelope: Envelope,
    *,
    model: str | None = None,
    goal: str | None = None,
) -> dict[str, Any]:
    """Run ``envelope`` through a fresh dry-run session; what it did (messages, tool calls with
    their policy decisions, escalations, tokens, cost, seconds)."""
    if goal is not None:
        envelope = envelope.model_copy(
            update={"mode": envelope.mode.model_copy(update={"operator_goal": goal})}
        )
    loaded = config.watcher(envelope.watcher.id)
    watcher = with_model(loaded.spec if loaded else None, model)
    backends = {name: create_backend(name, spec) for name, spec in config.service.models.items()}
    started = time.perf_counter()
    async with _scratch(config) as (store, work_dir, mcp):
        deps, dry = dry_run_deps(
            config, store, watcher=watcher, backends=backends, work_dir=work_dir, mcp=mcp
        )
        contract = _contract(envelope, deps.clock.now())
        await store.accept_contract(contract, envelope)
        try:
            status = await SessionRunner(deps).run(contract, envelope)
        finally:
            for backend in backends.values():
                with contextlib.suppress(Exception):
                    await backend.close()
        transcript = await store.get_transcript(contract.session_key, limit=10_000)
        usage = (await store.get_usage([fire_key(contract.callback_id)])).get(fire_key(contract.callback_id))
    return {
        "status": status,
        "outcome": outcome_of(dry.relay.notifies, dry.inbox.escalations),
        "messages": [n["text"] for n in dry.relay.notifies if "text" in n],
        "escalations": dry.inbox.escalations,
        "toolCalls": tool_calls([e.entry for e in transcript], dry),
        "usage": usage.to_json() if usage is not None else None,
        "seconds": round(time.perf_counter() - started, 3),
    }


def outcome_of(notifies: list[dict[str, Any]], escalations: list[dict[str, Any]]) -> str:
    """``notify``, ``escalate`` or ``silent``: what the agent did with the fire."""
    if any("text" in n for n in notifies):
        return "notify"
    return "escalate" if escalations else "silent"


def tool_calls(entries: list[dict[str, Any]], dry: DryRun | None = None) -> list[dict[str, Any]]:
    """Each tool call of a transcript with its name, arguments and (dry run) policy decision."""
    judged: dict[str, dict[str, Any]] = {}
    if dry is not None:
        judged = {j["toolCallId"]: j for j in dry.commands.judged}
        judged.update({j["toolCallId"]: j for j in (dry.mcp.judged if dry.mcp else [])})
    results: dict[str, str] = {}
    calls: list[dict[str, Any]] = []
    for entry in entries:
        message = entry.get("message")
        if entry.get("kind") != "message" or not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            results[str(message.get("toolCallId"))] = str(message.get("content") or "")
        for call in message.get("toolCalls") or []:
            calls.append({"id": call.get("id"), "name": call.get("name"), "arguments": call.get("arguments")})
    for call in calls:
        found = judged.get(str(call["id"]))
        if found is not None:
            call["policy"] = found["policy"]
            call["executed"] = found.get("executed", False)
        call["result"] = results.get(str(call["id"]), "")[:500]
    return calls


def _contract(envelope: Envelope, now: Any) -> Contract:
    return Contract(
        callback_id=envelope.callback_id,
        watcher_id=envelope.watcher.id,
        dedupe_key=f"replay:{envelope.callback_id}",
        session_key=f"replay:{envelope.callback_id}",
        state="pending",
        trigger=Trigger(kind=envelope.trigger.kind, priority=envelope.trigger.priority, matched_at=now),
        created_at=now,
        deadline=now + timedelta(hours=1),
        targets=[],
    )
