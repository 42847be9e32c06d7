"""The action policy: rule order, the default, the request's facts and the loop guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.policy import rules as policy_module
from sentinel_hooks.callbacks.policy.rules import CommandRequest, McpRequest, PolicyDecision, decide
from sentinel_hooks.config.service import ActionPolicySpec
from tests.test_architecture import imported_roots


def make_policy(*rules: dict[str, Any], **keys: Any) -> ActionPolicySpec:
    """An actionPolicy from camelCase keys, as sentinel.yaml writes it."""
    return ActionPolicySpec.model_validate({"rules": list(rules), **keys})


def rule(rule_id: str, decision: str, *conditions: dict[str, Any], **keys: Any) -> dict[str, Any]:
    return {"id": rule_id, "decision": decision, "conditions": list(conditions), **keys}


def request(
    command: str, *args: str, watcher_id: str = "disk", skill_id: str | None = None
) -> CommandRequest:
    return CommandRequest(command, list(args), watcher_id, skill_id)


def decided(
    policy: ActionPolicySpec, req: CommandRequest, history: list[str] | None = None
) -> tuple[str, Any]:
    """(decision, rule id) of ``req``."""
    outcome = decide(policy, req, history=history or [])
    return outcome.decision, outcome.rule_id


def test_facts_name_every_policy_path() -> None:
    """facts() gives action, command (argv joined), argv0, args, watcherId and skillId."""
    expected = {
        "action": "run_command",
        "command": "/bin/rm -rf /tmp/x",
        "argv0": "rm",
        "args": ["-rf", "/tmp/x"],
        "watcherId": "disk",
        "skillId": "ops",
    }
    assert expected == request("/bin/rm", "-rf", "/tmp/x", skill_id="ops").facts()


def test_mcp_facts_name_action_tool_and_arguments() -> None:
    """An MCP call's facts: action mcp, tool server.tool, arguments (arguments.<path> resolves in them)."""
    req = McpRequest("logs.search", {"service": "api", "filter": {"level": "error"}}, "disk", "ops")
    expected = {
        "action": "mcp",
        "tool": "logs.search",
        "arguments": {"service": "api", "filter": {"level": "error"}},
        "watcherId": "disk",
        "skillId": "ops",
    }
    assert expected == req.facts()


def test_rules_match_mcp_calls_by_tool_and_argument_paths() -> None:
    """arguments.<path> reaches into nested arguments; command rules never match an MCP call."""
    policy = ActionPolicySpec.model_validate(
        {
            "default": "auto",
            "rules": [
                {
                    "id": "no-rm",
                    "decision": "deny",
                    "conditions": [{"path": "argv0", "op": "eq", "value": "rm"}],
                },
                {
                    "id": "no-errors-wipe",
                    "priority": 5,
                    "decision": "needs_approval",
                    "conditions": [
                        {"path": "tool", "op": "eq", "value": "logs.delete"},
                        {"path": "arguments.filter.level", "op": "eq", "value": "error"},
                    ],
                },
            ],
        }
    )
    wipe = McpRequest("logs.delete", {"filter": {"level": "error"}}, "disk")
    keep = McpRequest("logs.delete", {"filter": {"level": "debug"}}, "disk")
    assert ("needs_approval", "no-errors-wipe") == _decided(policy, wipe)
    assert ("auto", None) == _decided(policy, keep)


def test_the_loop_guard_counts_the_same_mcp_call() -> None:
    policy = ActionPolicySpec.model_validate({"default": "auto", "loopGuard": 3})
    call = McpRequest("logs.search", {"q": "x"}, "disk")
    assert "auto" == decide(policy, call, history=[call.summary]).decision
    refused = decide(policy, call, history=[call.summary, call.summary])
    assert ("deny", "loop-guard") == (refused.decision, refused.rule_id)


def _decided(policy: ActionPolicySpec, req: McpRequest) -> tuple[str, str | None]:
    decision = decide(policy, req, history=[])
    return decision.decision, decision.rule_id


def test_argv0_names_the_real_program_and_command_what_was_given() -> None:
    """With the located program known, argv0 is its basename; command stays the argv as given."""
    req = CommandRequest("ls", ["-l"], "disk", executable="/usr/bin/rm")
    assert ("rm", "ls -l") == (req.facts()["argv0"], req.facts()["command"])


def test_argv_is_the_command_then_its_args() -> None:
    """argv is what the executor runs: the executable as given, then the arguments."""
    assert ["df", "-h"] == request("df", "-h").argv


@pytest.mark.parametrize("command", ["rm", "/bin/rm", "/usr/local/bin/rm"])
def test_argv0_rule_matches_the_basename(command: str) -> None:
    """A rule on argv0 ``rm`` catches ``rm`` and ``/bin/rm`` alike."""
    policy = make_policy(rule("no-rm", "deny", {"path": "argv0", "op": "eq", "value": "rm"}), default="auto")
    assert ("deny", "no-rm") == decided(policy, request(command, "-rf", "/"))


def test_higher_priority_rule_decides_whatever_the_file_order() -> None:
    """Rules are tried by descending priority, not in file order."""
    policy = make_policy(
        rule("low", "auto", priority=1),
        rule("high", "deny", priority=10),
    )
    assert ("deny", "high") == decided(policy, request("uptime"))


def test_equal_priorities_keep_the_file_order() -> None:
    """On a priority tie the rule written first wins."""
    policy = make_policy(rule("first", "needs_approval", priority=5), rule("second", "auto", priority=5))
    assert ("needs_approval", "first") == decided(policy, request("uptime"))


def test_a_rule_that_does_not_match_is_skipped() -> None:
    """A higher-priority rule whose conditions fail leaves the decision to the next one."""
    policy = make_policy(
        rule("kill", "deny", {"path": "argv0", "op": "eq", "value": "kill"}, priority=100),
        rule("all", "auto"),
    )
    assert ("auto", "all") == decided(policy, request("uptime"))


@pytest.mark.parametrize("default", ["auto", "needs_approval", "deny"])
def test_no_matching_rule_leaves_the_default(default: str) -> None:
    """With no matching rule, actionPolicy.default decides and no rule id is given."""
    policy = make_policy(
        rule("kill", "deny", {"path": "argv0", "op": "eq", "value": "kill"}), default=default
    )
    assert (default, None) == decided(policy, request("uptime"))


def test_default_is_needs_approval_when_unset() -> None:
    """An empty actionPolicy asks a person for every command."""
    assert ("needs_approval", None) == decided(make_policy(), request("uptime"))


def test_args_contains_matches_one_argument() -> None:
    """``args contains`` tests membership of one whole argument."""
    policy = make_policy(
        rule("force", "deny", {"path": "args", "op": "contains", "value": "--force"}), default="auto"
    )
    assert [("deny", "force"), ("auto", None)] == [
        decided(policy, request("git", "push", "--force")),
        decided(policy, request("git", "push", "--force-with-lease")),
    ]


def test_matches_searches_the_whole_command_line() -> None:
    """``matches`` on command sees the executable and the arguments joined by spaces."""
    policy = make_policy(
        rule("restart", "auto", {"path": "command", "op": "matches", "value": r"^systemctl restart nginx$"}),
        default="deny",
    )
    assert [("auto", "restart"), ("deny", None)] == [
        decided(policy, request("systemctl", "restart", "nginx")),
        decided(policy, request("systemctl", "stop", "nginx")),
    ]


def test_match_any_needs_one_condition() -> None:
    """A rule with ``match: any`` matches when one of its conditions does."""
    policy = make_policy(
        rule(
            "readers",
            "auto",
            {"path": "argv0", "op": "eq", "value": "df"},
            {"path": "argv0", "op": "eq", "value": "uptime"},
            match="any",
        ),
        default="deny",
    )
    assert ("auto", "readers") == decided(policy, request("uptime"))


def test_match_all_needs_every_condition() -> None:
    """A rule with the default ``match: all`` fails when one condition does."""
    policy = make_policy(
        rule(
            "df-human",
            "auto",
            {"path": "argv0", "op": "eq", "value": "df"},
            {"path": "args", "op": "contains", "value": "-h"},
        ),
        default="deny",
    )
    assert [("auto", "df-human"), ("deny", None)] == [
        decided(policy, request("df", "-h")),
        decided(policy, request("df", "-i")),
    ]


def test_nested_groups_combine() -> None:
    """Nested any/all groups work in rules as in watchers."""
    policy = make_policy(
        rule(
            "ops-readers",
            "auto",
            {"path": "watcherId", "op": "eq", "value": "disk"},
            {
                "any": [
                    {"path": "argv0", "op": "eq", "value": "df"},
                    {"path": "argv0", "op": "eq", "value": "du"},
                ]
            },
        ),
        default="deny",
    )
    assert [("auto", "ops-readers"), ("deny", None)] == [
        decided(policy, request("du", "-sh", "/var")),
        decided(policy, request("du", "-sh", "/var", watcher_id="eth")),
    ]


def test_watcher_id_rule_applies_to_its_watcher_only() -> None:
    """A rule on watcherId decides for that watcher's callbacks only."""
    policy = make_policy(rule("disk-auto", "auto", {"path": "watcherId", "op": "eq", "value": "disk"}))
    assert [("auto", "disk-auto"), ("needs_approval", None)] == [
        decided(policy, request("df", watcher_id="disk")),
        decided(policy, request("df", watcher_id="eth")),
    ]


def test_skill_id_rule_needs_the_skill() -> None:
    """A rule on skillId matches the skill, and a watcher without a skill never equals it."""
    policy = make_policy(rule("ops-skill", "auto", {"path": "skillId", "op": "eq", "value": "ops"}))
    assert [("auto", "ops-skill"), ("needs_approval", None)] == [
        decided(policy, request("df", skill_id="ops")),
        decided(policy, request("df", skill_id=None)),
    ]


def test_loop_guard_refuses_the_third_identical_request_in_a_row() -> None:
    """With the default loopGuard 3, two identical commands before this one trip the guard."""
    policy = make_policy(rule("all", "auto"))
    outcome = decide(policy, request("df", "-h"), history=["df -h", "df -h"])
    expected = PolicyDecision(
        decision="deny",
        rule_id="loop-guard",
        reason=(
            "Refused `df -h`: it would be request 3 of the same command in a row in this callback "
            "(the loop guard allows 2). Try something different or report what you found."
        ),
    )
    assert expected == outcome


def test_loop_guard_lets_the_second_identical_request_through() -> None:
    """One identical command before this one is not yet a loop."""
    policy = make_policy(rule("all", "auto"))
    assert ("auto", "all") == decided(policy, request("df", "-h"), ["df -h"])


def test_loop_guard_does_not_trip_when_commands_are_interleaved() -> None:
    """Only consecutive repeats count: after ``a a b``, ``a`` passes; after ``a b a a``, it is refused."""
    policy = make_policy(rule("all", "auto"))
    assert [("auto", "all"), ("deny", "loop-guard")] == [
        decided(policy, request("df"), ["df", "df", "uptime"]),
        decided(policy, request("df"), ["df", "uptime", "df", "df"]),
    ]


def test_loop_guard_compares_whole_command_lines() -> None:
    """The same program with different arguments is a different command."""
    policy = make_policy(rule("all", "auto"))
    assert ("auto", "all") == decided(policy, request("df", "-h"), ["df -i", "df -i"])


def test_loop_guard_follows_the_configured_count() -> None:
    """loopGuard 5 allows four identical requests in a row and refuses the fifth."""
    policy = make_policy(rule("all", "auto"), loopGuard=5)
    assert [("auto", "all"), ("deny", "loop-guard")] == [
        decided(policy, request("df"), ["df"] * 3),
        decided(policy, request("df"), ["df"] * 4),
    ]


def test_loop_guard_wins_over_an_allowing_rule() -> None:
    """The guard is checked before the rules: even an ``auto`` rule cannot repeat forever."""
    policy = make_policy(rule("df", "auto", {"path": "argv0", "op": "eq", "value": "df"}, priority=1000))
    assert ("deny", "loop-guard") == decided(policy, request("df"), ["df", "df"])


def test_rule_reason_names_the_rule_and_the_command() -> None:
    """The reason of a rule decision is a sentence with the rule, its priority and the command."""
    policy = make_policy(rule("no-rm", "deny", {"path": "argv0", "op": "eq", "value": "rm"}, priority=7))
    expected = "Rule 'no-rm' (priority 7) matched `rm -rf /`: it is denied."
    assert expected == decide(policy, request("rm", "-rf", "/"), history=[]).reason


def test_default_reason_says_no_rule_matched() -> None:
    """The reason of a default decision says so."""
    expected = "No rule matched `uptime`; the policy default applies: it needs a person's approval."
    assert expected == decide(make_policy(), request("uptime"), history=[]).reason


def test_decision_json_for_the_audit_trail() -> None:
    """to_json gives decision, ruleId and reason."""
    outcome = PolicyDecision(decision="auto", rule_id="r", reason="why")
    assert {"decision": "auto", "ruleId": "r", "reason": "why"} == outcome.to_json()


def test_policy_module_is_pure() -> None:
    """The policy imports no network, database, process or event-loop library."""
    path = Path(policy_module.__file__)
    io_roots = {"aiohttp", "redis", "sqlite3", "subprocess", "asyncio", "socket", "apscheduler"}
    assert set() == imported_roots(path) & io_roots
