"""``sentinel replay CALLBACK_ID``: a stored fire through a fresh dry-run session (SPEC §22).

The callback is read from the running service's API (``client``: unreachable → exit 3, unknown
id → exit 1); the session runs here, in ``callbacks/sessions/replay.py``'s dry run, with the
project's config (``-c``): nothing is delivered, no command runs, only ``readOnly`` MCP servers
are called.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from sentinel_hooks.cli.output import compact, new_table, print_json, print_table, stdout_console
from sentinel_hooks.cli.watchers import client
from sentinel_hooks.config.location import config_path
from sentinel_hooks.errors import SentinelError


def read_goal(goal: str | None) -> str | None:
    """``--goal``: the text, or a file's contents for ``@FILE``."""
    if goal is None or not goal.startswith("@"):
        return goal
    path = Path(goal[1:])
    try:
        return path.read_text()
    except OSError as exc:
        raise SentinelError(f"--goal {goal}: cannot read {path}: {exc.strerror}") from None


def original_of(body: dict[str, Any]) -> dict[str, Any]:
    """What the stored callback's session did, in the replay's shape."""
    from sentinel_hooks.callbacks.sessions.replay import tool_calls

    entries = [e["entry"] for e in body.get("transcript") or []]
    calls = tool_calls(entries)
    messages = []
    for call in calls:
        arguments = call["arguments"]
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError:
                continue
        if (
            call["name"] == "sentinel_act"
            and isinstance(arguments, dict)
            and arguments.get("action") == "notify"
        ):
            messages.append(str(arguments.get("message") or arguments.get("text") or ""))
    escalated = any(c["name"] == "sentinel_escalate" for c in calls)
    return {
        "state": (body.get("callback") or {}).get("state"),
        "outcome": "notify" if messages else "escalate" if escalated else "silent",
        "messages": messages,
        "toolCalls": calls,
        "usage": body.get("usage"),
        "deliveries": len(body.get("deliveries") or []),
    }


@click.command("replay")
@click.argument("callback_id")
@click.option("--config", "-c", "config", default=None, metavar="FILE", help="sentinel.yaml")
@click.option("--model", default=None, help="run the session with this model (a name under models)")
@click.option("--goal", default=None, metavar="TEXT|@FILE", help="replace the operatorGoal")
@click.option("--url", default=None, help="service URL (default: from the config's server)")
@click.option("--token", default=None, help="API token (default: $SENTINEL_API_TOKEN, else the config)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON document")
def replay_command(
    callback_id: str,
    config: str | None,
    model: str | None,
    goal: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Dry-run a stored callback again: nothing delivered, no command run, only readOnly MCP tools."""
    import asyncio

    from sentinel_hooks.callbacks.sessions.replay import replay
    from sentinel_hooks.config.loader import load_config
    from sentinel_hooks.core.envelope import Envelope

    body = client(url, token, config, None).call("GET", f"/api/v1/callbacks/{quote(callback_id, safe='')}")
    if not body.get("envelope"):
        raise SentinelError(f"callback {callback_id!r} has no stored envelope to replay")
    loaded = load_config(config_path(config, os.environ))
    if model is not None and model not in loaded.service.models:
        known = ", ".join(loaded.service.models) or "none"
        raise SentinelError(f"--model {model!r} is not one of the config's models ({known})")
    envelope = Envelope.model_validate(body["envelope"])
    replayed = asyncio.run(replay(loaded, envelope, model=model, goal=read_goal(goal)))
    result = {"callbackId": callback_id, "original": original_of(body), "replay": replayed}
    if as_json:
        print_json(result)
        return
    show(result)


def show(result: dict[str, Any]) -> None:
    """The original outcome beside the replay's."""
    original, replayed = result["original"], result["replay"]
    table = new_table(("", "original", "replay"))
    usage_o, usage_r = original.get("usage") or {}, replayed.get("usage") or {}
    rows = [
        ("outcome", original["outcome"], replayed["outcome"]),
        ("messages", "\n".join(original["messages"]) or "-", "\n".join(replayed["messages"]) or "-"),
        ("tool calls", _calls(original["toolCalls"]), _calls(replayed["toolCalls"])),
        ("tokens", _tokens(usage_o), _tokens(usage_r)),
        ("cost", _cost(usage_o), _cost(usage_r)),
        ("seconds", "-", str(replayed["seconds"])),
    ]
    for row in rows:
        table.add_row(*row)
    stdout_console().print(f"replay of {result['callbackId']} (dry run: nothing delivered, no command run)")
    print_table(table)


def _calls(calls: list[dict[str, Any]]) -> str:
    lines = []
    for call in calls:
        line = f"{call['name']} {compact(call['arguments'], 50)}"
        if "policy" in call:
            line += f" → {call['policy'].get('decision')}{' (ran)' if call.get('executed') else ''}"
        lines.append(line)
    return "\n".join(lines) or "-"


def _tokens(usage: dict[str, Any]) -> str:
    total = sum(v for k, v in usage.items() if "token" in k.lower() and isinstance(v, int))
    return str(total) if usage else "-"


def _cost(usage: dict[str, Any]) -> str:
    cost = usage.get("costUsd")
    return f"${cost:.4f}" if isinstance(cost, (int, float)) else "-"
