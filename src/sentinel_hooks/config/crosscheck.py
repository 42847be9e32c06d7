"""Checks that need the service configuration: limits, allowed hosts, named targets/models/skills.

Each check returns ``(key path, message)`` pairs; the loader turns them into
``file:line: key: message`` issues using the file's line map.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sentinel_hooks.config.apprise_urls import parse_apprise_url
from sentinel_hooks.config.hints import did_you_mean
from sentinel_hooks.config.hosts import host_allowed, url_host
from sentinel_hooks.config.linemap import Loc
from sentinel_hooks.config.mcp import UrlMcpServer, pattern_server
from sentinel_hooks.config.service import LOOPBACK_HOSTS, JudgeRule, ScriptedModel, ServiceConfig
from sentinel_hooks.config.targets import AppriseTargetSpec, PagerDutyTargetSpec, SlackTargetSpec
from sentinel_hooks.config.watcher import AnyWatcher, Scheduled, WebhookWatcher
from sentinel_hooks.core.conditions import count_conditions

Problem = tuple[Loc, str]


def host_problem(url: str, allowed: list[str]) -> str | None:
    """Why ``url`` may not be reached under ``allowedHosts``, or None when it may."""
    host = url_host(url)
    if host is None:
        return f"{url!r} has no host"
    return host_refusal(host, allowed)


def host_refusal(host: str, allowed: list[str]) -> str | None:
    """Why ``host`` may not be reached under ``allowedHosts``, or None when it may."""
    if host_allowed(host, allowed):
        return None
    listed = ", ".join(allowed) if allowed else "nothing (the list is empty)"
    return (
        f"host {host!r} is not in allowedHosts (it allows {listed}); "
        f"add {host!r} to allowedHosts in sentinel.yaml"
    )


def resolve_under(base_dir: Path, relative: str) -> Path | None:
    """``relative`` resolved inside ``base_dir`` (symlinks followed), or None if it escapes."""
    base = base_dir.resolve()
    candidate = (base / relative).resolve()
    if candidate == base or base in candidate.parents:
        return candidate
    return None


def check_watcher(
    watcher: AnyWatcher,
    raw: Mapping[str, Any],
    *,
    config: ServiceConfig,
    skills: Mapping[str, object],
    base_dir: Path,
) -> list[Problem]:
    """Everything about ``watcher`` that depends on sentinel.yaml and the project files."""
    problems: list[Problem] = []
    limits = config.limits
    interval = watcher.interval_ms if isinstance(watcher, Scheduled) else None
    if interval is not None and interval < limits.min_interval_ms:
        problems.append(
            (
                ("intervalMs",),
                f"{interval} is below limits.minIntervalMs "
                f"({limits.min_interval_ms}); poll less often or lower the limit",
            )
        )
    url_key = "redisUrl" if "redisUrl" in raw else "endpoint"
    for url in watcher.endpoint_urls():
        reason = host_problem(url, config.allowed_hosts)
        if reason is not None:
            problems.append(((url_key,), reason))
    goal = watcher.fire.operator_goal
    if len(goal) > config.max_operator_goal_chars:
        problems.append(
            (
                (("fire", "operatorGoal")),
                f"operatorGoal has {len(goal)} characters; the limit "
                f"is maxOperatorGoalChars ({config.max_operator_goal_chars})",
            )
        )
    leaves = count_conditions(watcher.conditions)
    if leaves > limits.max_conditions_per_watcher:
        problems.append(
            (
                ("conditions",),
                f"{leaves} conditions; the limit is "
                f"limits.maxConditionsPerWatcher ({limits.max_conditions_per_watcher})",
            )
        )
    targets = list(config.targets)
    for index, name in enumerate(watcher.delivery_targets):
        if name not in config.targets:
            problems.append((("deliveryTargets", index), _unknown("target", name, targets)))
    policy = watcher.escalation_policy
    if policy is not None and policy not in config.escalation_policies:
        problems.append((("escalationPolicy",), _unknown_policy(policy, config)))
    if watcher.fire.model is not None and watcher.fire.model not in config.models:
        problems.append((("fire", "model"), _unknown("model", watcher.fire.model, list(config.models))))
    if watcher.skill_id is not None and watcher.skill_id not in skills:
        problems.append(
            (
                ("skillId",),
                f"skill {watcher.skill_id!r} not found: expected "
                f"{config.skills_dir}/{watcher.skill_id}/SKILL.md{did_you_mean(watcher.skill_id, skills)}",
            )
        )
    for index, pattern in enumerate(watcher.fire.tools):
        server = pattern_server(pattern)
        if server not in config.mcp_servers:
            known = list(config.mcp_servers)
            listed = ", ".join(known) if known else "none (add one under mcpServers: in sentinel.yaml)"
            problems.append(
                (
                    ("fire", "tools", index),
                    f"unknown MCP server {server!r}{did_you_mean(server, known)}; known servers: {listed}",
                )
            )
    goal_file = watcher.fire.operator_goal_file
    if goal_file is not None:
        problems.extend(_goal_file_problems(goal_file, base_dir))
    if isinstance(watcher, WebhookWatcher):
        problems.extend(_ingest_auth_problems(watcher, config))
    return problems


def _ingest_auth_problems(watcher: WebhookWatcher, config: ServiceConfig) -> list[Problem]:
    """A webhook watcher that says nothing about authentication is fine on loopback only: off it,
    anyone who reaches the port could push events (SPEC.md §16)."""
    if watcher.authenticated or watcher.auth == "none" or config.server.host in LOOPBACK_HOSTS:
        return []
    return [
        (
            ("auth",),
            f"the service listens on {config.server.host!r}, not loopback only, so pushes to this "
            "webhook watcher must prove themselves: add secret (HMAC), auth: {bearerToken: "
            "${env:…}} or auth: {basic: {username, password}}, or write `auth: none` to accept "
            "unauthenticated pushes",
        )
    ]


def _goal_file_problems(goal_file: str, base_dir: Path) -> list[Problem]:
    loc: Loc = ("fire", "operatorGoalFile")
    resolved = resolve_under(base_dir, goal_file)
    if resolved is None:
        return [
            (
                loc,
                f"{goal_file!r} lies outside the project directory {str(base_dir)!r}; "
                "operatorGoalFile must be inside it",
            )
        ]
    if not resolved.is_file():
        return [(loc, f"file {goal_file!r} not found (relative to {str(base_dir)!r})")]
    return []


def check_service(config: ServiceConfig) -> list[Problem]:
    """Cross-references inside sentinel.yaml itself."""
    problems: list[Problem] = []
    if config.default_hook_model is not None and config.default_hook_model not in config.models:
        problems.append(
            (
                ("defaultHookModel",),
                _unknown("model", config.default_hook_model, list(config.models)),
            )
        )
    for index, name in enumerate(config.escalation_targets):
        if name not in config.targets:
            problems.append((("escalationTargets", index), _unknown("target", name, list(config.targets))))
    problems.extend(_policy_problems(config))
    problems.extend(_judge_model_problems(config))
    for name, server in config.mcp_servers.items():
        if isinstance(server, UrlMcpServer):
            reason = host_problem(server.url, config.allowed_hosts)
            if reason is not None:
                problems.append((("mcpServers", name, "url"), reason))
    for name, target in config.targets.items():
        if isinstance(target, AppriseTargetSpec):
            problems.extend(_apprise_host_problems(name, target, config.allowed_hosts))
            continue
        if isinstance(target, SlackTargetSpec):
            key = "webhookUrl" if target.webhook_url is not None else "apiBase"
        elif isinstance(target, PagerDutyTargetSpec):
            key = "apiBase"
        else:
            key = "url"
        for url in target.urls():
            reason = host_problem(url, config.allowed_hosts)
            if reason is not None:
                problems.append((("targets", name, key), reason))
    return problems


def _apprise_host_problems(name: str, target: AppriseTargetSpec, allowed: list[str]) -> list[Problem]:
    """Each Apprise URL's reached hosts (``config.apprise_urls``) against allowedHosts; the message
    names the notifier and Apprise's privacy form of the URL, never the URL as written."""
    problems: list[Problem] = []
    for index, url in enumerate(target.apprise_urls()):
        parsed = parse_apprise_url(url)  # the spec's validator accepted it
        for host in parsed.hosts:
            reason = host_refusal(host, allowed)
            if reason is not None:
                loc: Loc = ("targets", name, "urls", index)
                problems.append((loc, f"{parsed.notifier} ({parsed.shown}): {reason}"))
    return problems


def _policy_problems(config: ServiceConfig) -> list[Problem]:
    """Escalation policies name configured targets; defaultEscalationPolicy names a policy."""
    problems: list[Problem] = []
    default = config.default_escalation_policy
    if default is not None and default not in config.escalation_policies:
        problems.append((("defaultEscalationPolicy",), _unknown_policy(default, config)))
    known = list(config.targets)
    for name, policy in config.escalation_policies.items():
        for index, step in enumerate(policy.steps):
            for position, target in enumerate(step.targets):
                if target not in config.targets:
                    loc = ("escalationPolicies", name, "steps", index, "targets", position)
                    problems.append((loc, _unknown("target", target, known)))
    return problems


def _judge_model_problems(config: ServiceConfig) -> list[Problem]:
    """A judge rule's ``model`` names an entry of ``models`` that is a real model (not scripted)."""
    problems: list[Problem] = []
    for index, rule in enumerate(config.action_policy.rules):
        if not isinstance(rule, JudgeRule):
            continue
        loc: Loc = ("actionPolicy", "rules", index, "model")
        spec = config.models.get(rule.model)
        if spec is None:
            problems.append((loc, _unknown("model", rule.model, list(config.models))))
        elif isinstance(spec, ScriptedModel):
            problems.append(
                (loc, f"model {rule.model!r} is scripted and cannot judge; name an openai or anthropic model")
            )
    return problems


def _unknown_policy(name: str, config: ServiceConfig) -> str:
    known = list(config.escalation_policies)
    if not known:
        return (
            f"unknown escalation policy {name!r}; none are configured "
            "(add one under escalationPolicies: in sentinel.yaml)"
        )
    return (
        f"unknown escalation policy {name!r}{did_you_mean(name, known)}; known policies: {', '.join(known)}"
    )


def _unknown(kind: str, name: str, known: list[str]) -> str:
    listed = ", ".join(known) if known else f"none are configured (add one under {kind}s: in sentinel.yaml)"
    return f"unknown {kind} {name!r}{did_you_mean(name, known)}; known {kind}s: {listed}"
