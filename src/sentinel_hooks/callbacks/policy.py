"""The action policy (SPEC §5.4): whether an agent's ``run_command`` runs, waits for a human, or is refused.

A pure function of the configured ``actionPolicy``, the request and the commands already asked for
in the same callback. Rules are ordinary conditions (``core/conditions.py``) evaluated against
the request's facts — ``command``, ``argv0``, ``args``, ``watcherId``, ``skillId`` — so every operator
of §4 works here with the same semantics. The session records each decision's ``reason`` in the
transcript and the audit trail, so reasons are sentences a person reads.

``command`` is what the agent wrote (argv joined with spaces); ``argv0`` is the basename of the
program that would really run, found by the caller (``commands.locate``: the fixed PATH, then
every symlink resolved), so a link named ``ls`` that points at ``rm`` is ``rm``. Conditions are
syntactic: they match strings and lists, never what a program does with its arguments.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sentinel_hooks.config.service import ActionPolicySpec, PolicyRule
from sentinel_hooks.core.conditions import evaluate

__all__ = ["LOOP_GUARD_RULE", "CommandRequest", "Decision", "PolicyDecision", "decide"]

Decision = Literal["auto", "needs_approval", "deny"]

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

    def facts(self) -> dict[str, Any]:
        """The values policy conditions test, keyed by their paths (``POLICY_PATHS``)."""
        return {
            "command": " ".join(self.argv),
            "argv0": posixpath.basename(self.executable or self.command),
            "args": list(self.args),
            "watcherId": self.watcher_id,
            "skillId": self.skill_id,
        }


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


def decide(policy: ActionPolicySpec, request: CommandRequest, *, history: Sequence[str]) -> PolicyDecision:
    """Decide ``request`` under ``policy``.

    ``history`` holds the ``command`` facts of the commands already run or requested in this
    callback, oldest first. The loop guard is checked first: when the last ``loopGuard - 1``
    entries all equal this command, this is its ``loopGuard``-th request in a row and it is
    denied. Otherwise the enabled plain rules are tried by ``priority``, highest first (equal
    priorities in file order; judge rules are ``judge.py``'s); the first whose conditions
    match (combined with its ``match``) decides, and when none matches ``policy.default`` does.
    """
    facts = request.facts()
    command = facts["command"]
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
