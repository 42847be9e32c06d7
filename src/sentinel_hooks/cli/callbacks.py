"""``sentinel callbacks list|show`` over the API."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import click

from sentinel_hooks.cli.output import compact, new_table, print_json, print_table, stdout_console
from sentinel_hooks.cli.watchers import client, remote_options

# store.records.ContractState, spelled out: importing the store would load every backend
# (tests/cli check that the two agree)
STATES = (
    "pending",
    "notifying",
    "awaiting_approval",
    "fulfilled",
    "fallback_sent",
    "expired",
    "deduped",
    "silenced",
)


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
    table = new_table(columns, ids=("callbackId", "watcher", "created", "deadline"))
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
    console.print("deliveries:")
    for delivery in body["deliveries"]:
        error = f" — {delivery['lastError']}" if delivery.get("lastError") else ""
        attempts = f"{delivery['attempts']} attempt(s)"
        console.print(f"  {delivery['target']} {delivery['kind']}: {delivery['state']} ({attempts}){error}")
    console.print("transcript:")
    for entry in body["transcript"]:
        console.print("  " + _entry_line(entry["entry"]), markup=False)  # model text is not markup
    console.print("envelope:")
    console.print_json(json.dumps(body["envelope"]))


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
            return f"tool {message.get('name')} → {compact(message.get('content'), 160)}"
        return f"{role}: {compact(message.get('content'), 160)}"
    if kind == "model":
        return f"model {entry.get('model')} (entry {entry.get('entry')}, via {entry.get('via')})"
    if kind == "policy":
        return policy_lines(entry)
    if kind == "status" and entry.get("status") == "circuitBreaker":
        return (
            f"stopped by the circuit breaker after {entry.get('denials')} denials in a row "
            "(escalated: the agent kept proposing denied actions)"
        )
    return compact(entry, 200)


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
    return "\n".join(lines)


def _cut(text: object, limit: int) -> str:
    """Text shortened to ``limit`` characters (a reason is read, not parsed: no JSON quotes)."""
    shown = str(text) if text is not None else ""
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
