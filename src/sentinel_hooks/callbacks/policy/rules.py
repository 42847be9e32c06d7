"""The action policy (SPEC §5.4): whether an agent's action runs, waits for a human, or is refused.

An action is a ``run_command`` (``CommandRequest``) or a call of an MCP tool (``McpRequest``, §17).

A pure function of the configured ``actionPolicy``, the request and the commands already asked for
in the same callback. Rules are ordinary conditions (``core/conditions.py``) evaluated against
the request's facts — ``action``, ``command``, ``argv0``, ``args``, ``tool``, ``arguments``, ``watcherId``,
``skillId`` — so every operator
of §4 works here with the same semantics. The session records each decision's ``reason`` in the
transcript and the audit trail, so reasons are sentences a person reads.

``command`` is what the agent wrote (argv joined with spaces); ``argv0`` is the basename of the
program that would really run, found by the caller (``commands.locate``: the fixed PATH, then
every symlink resolved), so a link named ``ls`` that points at ``rm`` is ``rm``. Conditions are
syntactic: they match strings and lists, never what a program does with its arguments.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sentinel_hooks.config.service import ActionPolicySpec, Decision, PolicyRule
from sentinel_hooks.core.checks import evaluate

__all__ = [
    "LOOP_GUARD_RULE",
    "ActionRequest",
    "CommandRequest",
    "McpRequest",
    "PolicyDecision",
    "decide",
    "mcp_summary",
]

LOOP_GUARD_RULE = "loop-guard"
"""The ``rule_id`` of a refusal by the loop guard (no configured rule can use it: ids are names)."""


@dataclass(frozen=True)
class CommandRequest:
    """A ``run_command`` the agent asked for, bound to the watcher (and skill) of its callback.

    ``executable`` is the real path of the program ``command`` names, symlinks resolved (None
    when it names none: then ``argv0`` is the basename of ``command`` itself).
    """

    command: str
    args: list[str]
    watcher_id: str
    skill_id: str | None = None
    executable: str | None = None

    @property
    def argv(self) -> list[str]:
        """The executable as given followed by its arguments."""
        return [self.command, *self.args]

    @property
    def summary(self) -> str:
        """The action in one line (reasons, the loop guard): the argv joined with spaces."""
        return " ".join(self.argv)

    def facts(self) -> dict[str, Any]:
        """The values policy conditions test, keyed by their paths (``POLICY_PATHS``)."""
        return {
            "action": "run_command",
            "command": " ".join(self.argv),
            "argv0": posixpath.basename(self.executable or self.command),
            "args": list(self.args),
            "watcherId": self.watcher_id,
            "skillId": self.skill_id,
        }


def mcp_summary(tool: str, arguments: dict[str, Any]) -> str:
    """An MCP call in one line: ``server.tool`` and its arguments as compact, sorted JSON."""
    return f"{tool} {json.dumps(arguments, sort_keys=True, separators=(',', ':'), default=str)}"


@dataclass(frozen=True)
class McpRequest:
    """A call of an MCP tool the agent asked for (SPEC §17); ``tool`` is ``server.tool``."""

    tool: str
    arguments: dict[str, Any]
    watcher_id: str
    skill_id: str | None = None

    @property
    def summary(self) -> str:
        """The call in one line (reasons, the loop guard)."""
        return mcp_summary(self.tool, self.arguments)

    def facts(self) -> dict[str, Any]:
        """The values policy conditions test: ``arguments.<path>`` resolves into ``arguments``."""
        return {
            "action": "mcp",
            "tool": self.tool,
            "arguments": self.arguments,
            "watcherId": self.watcher_id,
            "skillId": self.skill_id,
        }


ActionRequest = CommandRequest | McpRequest


@dataclass(frozen=True)
class PolicyDecision:
    """What the policy decided, which rule decided it (None: the default), and why, in words."""

    decision: Decision
    rule_id: str | None
    reason: str
    verdicts: tuple[dict[str, Any], ...] = ()  # the judge rules' answers (``judge.Verdict.to_json``)
    elapsed_ms: float | None = None  # plain rules and judges together, when measured

    def to_json(self) -> dict[str, Any]:
        """The decision as recorded in transcripts and the audit trail (verdicts when judges were asked)."""
        found: dict[str, Any] = {"decision": self.decision, "ruleId": self.rule_id, "reason": self.reason}
        if self.verdicts:
            found["verdicts"] = list(self.verdicts)
        if self.elapsed_ms is not None:
            found["elapsedMs"] = round(self.elapsed_ms, 1)
        return found


def decide(policy: ActionPolicySpec, request: ActionRequest, *, history: Sequence[str]) -> PolicyDecision:
    """Decide ``request`` under ``policy``.

    ``history`` holds the ``summary`` of the actions already run or requested in this
    callback, oldest first. The loop guard is checked first: when the last ``loopGuard - 1``
    entries all equal this command, this is its ``loopGuard``-th request in a row and it is
    denied. Otherwise the enabled plain rules are tried by ``priority``, highest first (equal
    priorities in file order; judge rules are ``judge.py``'s); the first whose conditions
    match (combined with its ``match``) decides, and when none matches ``policy.default`` does.
    """
    facts = request.facts()
    command = request.summary
    repeats = _trailing_repeats(history, command)
    if repeats >= policy.loop_guard - 1:
        return PolicyDecision(
            decision="deny",
            rule_id=LOOP_GUARD_RULE,
            reason=(
                f"Refused `{command}`: it would be request {repeats + 1} of the same command in a row "
                f"in this callback (the loop guard allows {policy.loop_guard - 1}). "
                "Try something different or report what you found."
            ),
        )
    for rule in _by_priority(policy.plain_rules):
        if evaluate(rule.conditions, rule.match, facts).matched:
            return PolicyDecision(
                decision=rule.decision,
                rule_id=rule.id,
                reason=(
                    f"Rule {rule.id!r} (priority {rule.priority}) matched `{command}`: "
                    f"{_said(rule.decision)}."
                ),
            )
    return PolicyDecision(
        decision=policy.default,
        rule_id=None,
        reason=f"No rule matched `{command}`; the policy default applies: {_said(policy.default)}.",
    )


def _by_priority(rules: Sequence[PolicyRule]) -> list[PolicyRule]:
    """Rules by descending priority; ``sorted`` is stable, so ties keep their file order."""
    return sorted(rules, key=lambda rule: -rule.priority)


def _trailing_repeats(history: Sequence[str], command: str) -> int:
    """How many entries at the end of ``history`` are ``command``, consecutively."""
    count = 0
    for previous in reversed(history):
        if previous != command:
            break
        count += 1
    return count


def _said(decision: Decision) -> str:
    """A decision in words."""
    if decision == "auto":
        return "it runs without approval"
    if decision == "needs_approval":
        return "it needs a person's approval"
    return "it is denied"
