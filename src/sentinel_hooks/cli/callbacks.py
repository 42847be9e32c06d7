"""``sentinel callbacks list|show`` over the API."""

from __future__ import annotations

import json
from typing import Any, get_args
from urllib.parse import quote, urlencode

import click

from sentinel_hooks.cli.output import compact, new_table, print_json, print_table, stdout_console
from sentinel_hooks.cli.watchers import client, remote_options
from sentinel_hooks.core.contract_states import ContractState

STATES: tuple[str, ...] = get_args(ContractState)


@click.group()
def callbacks() -> None:
    """Callbacks and their response contracts (newest first)."""


@callbacks.command("list")
@click.option("--watcher", "watcher_id", default=None, help="only this watcher's callbacks")
@click.option("--state", type=click.Choice(STATES), default=None, help="only contracts in this state")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@remote_options
def list_callbacks(
    watcher_id: str | None,
    state: str | None,
    limit: int,
    config: str | None,
    url: str | None,
    token: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """List callbacks with their contract state."""
    query = {k: v for k, v in {"watcherId": watcher_id, "state": state, "limit": str(limit)}.items() if v}
    body = client(url, token, config, actor).call("GET", "/api/v1/callbacks?" + urlencode(query))
    if as_json:
        print_json(body)
        return
    columns = ("callbackId", "watcher", "kind", "priority", "state", "created", "deadline")
    table = new_table(columns, ids=columns, drop=("deadline", "kind", "created", "priority", "watcher"))
    for item in body["items"]:
        trigger = item["trigger"]
        table.add_row(
            item["callbackId"],
            item["watcherId"],
            trigger["kind"],
            trigger["priority"],
            item["state"],
            item["createdAt"],
            item["deadline"],
        )
    if body["items"]:
        print_table(table)
    else:
        stdout_console().print("no callbacks")


@callbacks.command("show")
@click.argument("callback_id")
@remote_options
def show(
    callback_id: str, config: str | None, url: str | None, token: str | None, actor: str | None, as_json: bool
) -> None:
    """Show a callback: its contract, envelope, deliveries and session transcript."""
    body = client(url, token, config, actor).call("GET", f"/api/v1/callbacks/{quote(callback_id, safe='')}")
    if as_json:
        print_json(body)
        return
    console = stdout_console()
    contract = body["callback"]
    console.print(_headline(contract, body.get("envelope")), markup=False)
    for key in (
        "callbackId",
        "watcherId",
        "state",
        "sessionKey",
        "createdAt",
        "deadline",
        "settledAt",
        "targets",
    ):
        console.print(f"{key}: {compact(contract.get(key), 200)}")
    if contract.get("silencedBy"):
        console.print(f"silencedBy: {contract['silencedBy']}")
    if contract.get("groupId"):  # SPEC §19: a member names its group
        console.print(f"groupId: {contract['groupId']} (this fire joined that group; its page speaks for it)")
    for line in group_lines(contract.get("group")):
        console.print(line, markup=False)
    if contract.get("traceId"):  # SPEC §22: the fire's trace, with telemetry.otlpEndpoint
        console.print(f"traceId: {contract['traceId']}")
    conditions = body.get("conditions")
    if conditions:
        match = ((body.get("envelope") or {}).get("watcher") or {}).get("match", "all")
        console.print(f"conditions (match {match}):")
        for condition in conditions:
            console.print("  " + _condition_line(condition), markup=False)
    console.print("deliveries:")
    for delivery in body["deliveries"]:
        error = f" — {delivery['lastError']}" if delivery.get("lastError") else ""
        attempts = f"{delivery['attempts']} attempt(s)"
        console.print(f"  {delivery['target']} {delivery['kind']}: {delivery['state']} ({attempts}){error}")
    console.print("transcript:")
    for entry in body["transcript"]:
        console.print("  " + _entry_line(entry["entry"]), markup=False)  # model text is not markup
        if isinstance(entry["entry"].get("usage"), dict):
            console.print("    " + usage_line(entry["entry"]["usage"]), markup=False)
    if body.get("usage"):
        console.print(f"usage: {usage_total(body['usage'])}")
    if body.get("feedback"):
        for line in feedback_lines(body["feedback"]):
            console.print(line, markup=False)  # notes are people's text, not markup
    console.print("envelope:")
    console.print_json(json.dumps(body["envelope"]))


GROUP_MEMBERS_SHOWN = 20


def group_lines(group: Any) -> list[str]:
    """A group's contract (SPEC §19): its key, ``by`` values, fires and members (the first 20)."""
    if not isinstance(group, dict):
        return []
    members = [str(m) for m in group.get("members") or []]
    by = ", ".join(f"{path}={compact(value, 60)}" for path, value in group.get("by") or [])
    lines = [f"group: {group.get('key')} ({group.get('fires')} fires, grouped by {by})", "members:"]
    lines += [f"  {member}" for member in members[:GROUP_MEMBERS_SHOWN]]
    if len(members) > GROUP_MEMBERS_SHOWN:
        lines.append(f"  … and {len(members) - GROUP_MEMBERS_SHOWN} more (--json lists them all)")
    return lines


def _entry_line(entry: dict[str, Any]) -> str:
    kind = entry.get("kind")
    if kind == "message":
        message = entry["message"]
        role = message.get("role")
        if role == "assistant" and message.get("toolCalls"):
            calls = ", ".join(
                f"{c['name']}({compact(c.get('arguments'), 120)})" for c in message["toolCalls"]
            )
            return f"assistant → {calls}"
        if role == "tool":
            line = f"tool {message.get('name')} → {compact(message.get('content'), 160)}"
            return line + _approval_of(message.get("content"))
        return f"{role}: {compact(message.get('content'), 160)}"
    if kind == "model":
        return f"model {entry.get('model')} (entry {entry.get('entry')}, via {entry.get('via')})"
    if kind == "policy":
        return policy_lines(entry)
    if kind == "compaction":
        what = "cut" if entry.get("cut") else "summary"
        return f"compaction ({what} of entries {entry.get('replaces')})"
    if kind == "status" and entry.get("text"):
        return str(entry["text"])
    if kind == "status" and entry.get("status") == "circuitBreaker":
        return (
            f"stopped by the circuit breaker after {entry.get('denials')} denials in a row "
            "(escalated: the agent kept proposing denied actions)"
        )
    return compact(entry, 200)


def _headline(contract: dict[str, Any], envelope: dict[str, Any] | None) -> str:
    """What happened, in one line: the fire, when, and how it ended."""
    trigger = contract.get("trigger") or {}
    event = ((envelope or {}).get("watcher") or {}).get("eventName") or contract.get("watcherId")
    ended = f" at {contract['settledAt']}" if contract.get("settledAt") else ""
    return (
        f"{event} fired on {contract.get('watcherId')} ({trigger.get('kind')}, {trigger.get('priority')}) "
        f"at {contract.get('createdAt')} → {contract.get('state')}{ended}"
    )


def _condition_line(condition: dict[str, Any]) -> str:
    """``✓ price lt 2000 — actual 1999.5``: one leaf condition as it stood at the fire."""
    mark = "✓" if condition.get("result") else "✗"
    unary = condition.get("op") in ("exists", "absent", "changed")
    value = "" if unary else " " + compact(condition.get("value"), 60)
    actual = "missing" if condition.get("missing") else compact(condition.get("actual"), 120)
    return f"{mark} {condition.get('path')} {condition.get('op')}{value} — actual {actual}"


def _approval_of(content: object) -> str:
    """`` (approval approved by alice: "ok")`` when a tool result says who decided its approval."""
    try:
        result = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return ""
    approval = result.get("approval") if isinstance(result, dict) else None
    if not isinstance(approval, dict):
        return ""
    note = f": {_cut(approval.get('note'), 80)!r}" if approval.get("note") else ""
    return f" (approval {approval.get('status')} by {approval.get('by')}{note})"


def policy_lines(entry: dict[str, Any]) -> str:
    """A policy decision as people read it: the decision, the deciding rule and why, then one
    line per judge verdict (rule, outcome, confidence, model, time, reason)."""
    rule = entry.get("ruleId") or "default"
    took = f" in {entry['elapsedMs']:g} ms" if isinstance(entry.get("elapsedMs"), int | float) else ""
    lines = [
        f"policy {entry.get('tool')}: {str(entry.get('decision')).upper()} by {rule}{took} — "
        f"{_cut(entry.get('reason'), 200)}"
    ]
    for verdict in entry.get("verdicts") or []:
        confidence = verdict.get("confidence")
        sure = f" confidence {confidence:g}" if isinstance(confidence, int | float) else ""
        lines.append(
            f"    judge {verdict.get('ruleId')}: {verdict.get('outcome')}{sure} → {verdict.get('decision')} "
            f"(model {verdict.get('model')}, {verdict.get('elapsedMs')} ms) — "
            f"{_cut(verdict.get('reason'), 160)}"
        )
        if isinstance(verdict.get("usage"), dict):
            lines.append("      " + usage_line(verdict["usage"]))
    return "\n".join(lines)


def feedback_lines(feedback: dict[str, Any]) -> list[str]:
    """``feedback: 2 👍 1 👎`` then one line per person (their latest), with their note."""
    counts = feedback.get("counts") or {}
    lines = [f"feedback: {counts.get('useful', 0)} 👍 {counts.get('notUseful', 0)} 👎"]
    for item in feedback.get("items") or []:
        note = f" — {_cut(item['note'], 200)}" if item.get("note") else ""
        lines.append(
            f"  {'👍' if item.get('useful') else '👎'} {item.get('person')} at {item.get('at')}{note}"
        )
    return lines


def usage_total(usage: dict[str, Any]) -> str:
    """``1250 in + 310 out tokens, $0.0028``: what model calls used together."""
    tokens = f"{usage.get('inputTokens', 0)} in + {usage.get('outputTokens', 0)} out tokens"
    return f"{tokens}, ${usage.get('costUsd', 0):.4f}"


def usage_line(usage: dict[str, Any]) -> str:
    """One model call: ``usage (turn, claude): 1200 in + 80 out tokens, $0.0016, 843 ms``."""
    estimated = " (estimated)" if usage.get("estimated") else ""
    return (
        f"usage ({usage.get('call')}, {usage.get('entry')}): {usage_total(usage)}{estimated}, "
        f"{usage.get('elapsedMs')} ms"
    )


def _cut(text: object, limit: int) -> str:
    """Text shortened to ``limit`` characters (a reason is read, not parsed: no JSON quotes)."""
    shown = str(text) if text is not None else ""
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
