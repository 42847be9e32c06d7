"""``sentinel silences …`` and ``sentinel status`` (SPEC.md §10, §14): through the service's API.

Durations are written as people say them: ``90s``, ``30m``, ``2h``, ``1d``, ``1h30m``
(``parse_duration``). ``--match PATH OP VALUE`` takes VALUE as JSON when it parses (``42``,
``true``, ``["a","b"]``), else as text, so ``--match priority eq high`` needs no quotes.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urlencode

import click

from sentinel_hooks.cli.callbacks import usage_total
from sentinel_hooks.cli.client import operator_client
from sentinel_hooks.cli.output import (
    compact,
    new_table,
    print_error,
    print_json,
    print_table,
    show_answer,
    stdout_console,
)
from sentinel_hooks.cli.watchers import remote_options
from sentinel_hooks.errors import SentinelError

# store.silences.SILENCE_STATES, spelled out: importing the store would load every backend
# (tests/service/test_silences_cli.py checks that the two agree)
SILENCE_STATES = ("active", "pending", "expired")
_DURATION = re.compile(r"(?:(\d+)(ms|s|m|h|d|w))+")
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(text: str, option: str) -> int:
    """Milliseconds in ``text`` (``30m``, ``2h``, ``1d``, ``1h30m``); SentinelError otherwise."""
    cleaned = text.strip().lower()
    if not _DURATION.fullmatch(cleaned):
        raise SentinelError(f"{option}: {text!r} is not a duration; write e.g. 30m, 2h, 1d or 1h30m")
    total = sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(cleaned))
    if total < 1:
        raise SentinelError(f"{option}: {text!r} is no time at all; write e.g. 30m, 2h or 1d")
    return total


def matcher_text(matchers: list[dict[str, Any]], match: str) -> str:
    """``watcherId eq "eth" and priority in ["high"]`` (``or`` for match: any)."""
    joiner = " and " if match == "all" else " or "
    parts = [
        f"{m['path']} {m['op']}" + ("" if m.get("value") is None else f" {compact(m['value'], 60)}")
        for m in matchers
    ]
    return joiner.join(parts)


def silences_table(items: list[dict[str, Any]], *, title: str | None = None) -> Any:
    from rich import box

    columns = ("id", "state", "matchers", "starts", "ends", "by", "comment")
    table = new_table(
        columns,
        ids=("id", "state", "starts", "ends"),
        drop=("starts", "by", "state", "ends", "comment"),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title=title,
    )
    for s in items:
        table.add_row(
            s["id"],
            s["state"],
            matcher_text(s["matchers"], s["match"]),
            s["startsAt"],
            s["endsAt"],
            s["createdBy"],
            s["comment"],
        )
    return table


@click.group()
def silences() -> None:
    """Mute matching fires for a while: list, show, add, expire."""


@silences.command("list")
@click.option("--state", type=click.Choice(SILENCE_STATES), default=None, help="only this state")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True, help="silences per page")
@click.option("--cursor", default=None, help="the nextCursor of the previous page")
@remote_options
def list_silences(state: str | None, limit: int, cursor: str | None, **options: Any) -> None:
    """List silences, newest first."""
    as_json = options.pop("as_json")
    query = {
        "limit": str(limit),
        **({"state": state} if state else {}),
        **({"cursor": cursor} if cursor else {}),
    }
    body = operator_client(options).call("GET", "/api/v1/silences?" + urlencode(query))
    if as_json:
        print_json(body)
        return
    if not body["items"]:
        stdout_console().print("no silences" if state is None else f"no {state} silences")
        return
    print_table(silences_table(body["items"]))
    if body["nextCursor"]:
        stdout_console().print(f"more: --cursor {body['nextCursor']}")


def _print_silence(silence: dict[str, Any]) -> None:
    console = stdout_console()
    for key in ("id", "state", "match", "startsAt", "endsAt", "createdBy", "createdAt", "comment"):
        console.print(f"{key}: {silence[key]}")
    console.print(f"matchers: {matcher_text(silence['matchers'], silence['match'])}")


@silences.command("show")
@click.argument("silence_id")
@remote_options
def show(silence_id: str, **options: Any) -> None:
    """Show one silence."""
    as_json = options.pop("as_json")
    body = operator_client(options).call("GET", f"/api/v1/silences/{quote(silence_id, safe='')}")
    show_answer(body, as_json=as_json, show=lambda b: _print_silence(b["silence"]))


def _expired(answer: dict[str, Any]) -> None:
    stdout_console().print(f"{answer['silence']['id']}: expired")


def _added(silence: dict[str, Any]) -> str:
    return f"{silence['id']} ({silence['state']} until {silence['endsAt']})"


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@silences.command("add")
@click.option(
    "--watcher", "watcher_ids", multiple=True, metavar="ID", help="silence this watcher (repeatable)"
)
@click.option(
    "--match",
    "matches",
    nargs=3,
    multiple=True,
    metavar="PATH OP VALUE",
    help="a matcher, e.g. --match tags contains deploy (repeatable)",
)
@click.option("--any", "any_", is_flag=True, help="mute fires any matcher matches (default: all must)")
@click.option("--for", "for_", default=None, metavar="DURATION", help="how long, e.g. 30m, 2h, 1d")
@click.option("--until", default=None, metavar="ISO", help="when it ends, e.g. 2026-01-01T06:00:00Z")
@click.option("--starts", default=None, metavar="ISO", help="when it starts (default: now)")
@click.option("--comment", required=True, help="why (shown to everyone)")
@remote_options
def add(
    watcher_ids: tuple[str, ...],
    matches: tuple[tuple[str, str, str], ...],
    any_: bool,
    for_: str | None,
    until: str | None,
    starts: str | None,
    comment: str,
    **options: Any,
) -> None:
    """Add a silence and print its id."""
    as_json = options.pop("as_json")
    matchers: list[dict[str, Any]] = [
        {"path": path, "op": op, "value": _value(value)} for path, op, value in matches
    ]
    if len(watcher_ids) == 1:
        matchers.append({"path": "watcherId", "op": "eq", "value": watcher_ids[0]})
    elif watcher_ids:
        matchers.append({"path": "watcherId", "op": "in", "value": list(watcher_ids)})
    if not matchers:
        raise SentinelError("say what to silence: --watcher ID or --match PATH OP VALUE")
    if (for_ is None) == (until is None):
        raise SentinelError("say how long: exactly one of --for DURATION and --until ISO")
    body: dict[str, Any] = {"matchers": matchers, "match": "any" if any_ else "all", "comment": comment}
    if for_ is not None:
        body["durationMs"] = parse_duration(for_, "--for")
    else:
        body["endsAt"] = until
    if starts is not None:
        body["startsAt"] = starts
    answer = operator_client(options).call("POST", "/api/v1/silences", body)
    show_answer(answer, as_json=as_json, show=lambda a: stdout_console().print(_added(a["silence"])))
    for warning in answer.get("warnings", []):
        print_error(f"sentinel: warning: {warning}", prefix=False)


@silences.command("expire")
@click.argument("silence_id")
@remote_options
def expire(silence_id: str, **options: Any) -> None:
    """End a silence now."""
    as_json = options.pop("as_json")
    answer = operator_client(options).call("DELETE", f"/api/v1/silences/{quote(silence_id, safe='')}")
    show_answer(answer, as_json=as_json, show=_expired)


@click.command()
@remote_options
def status(**options: Any) -> None:
    """The service at a glance: store, watchers, open contracts, inbox, active silences."""
    as_json = options.pop("as_json")
    body = operator_client(options).call("GET", "/api/v1/status")
    if as_json:
        print_json(body)
        return
    console = stdout_console()
    store, w, c, inbox = body["store"], body["watchers"], body["contracts"], body["inbox"]
    console.print(f"store: {store['type']} ({'ok' if store['ok'] else 'NOT TAKING WRITES'})")
    console.print(
        f"watchers: {w['total']} — {w['ok']} ok, {w['failing']} failing, "
        f"{w['disabled']} disabled, {w['stopped']} stopped"
    )
    console.print(
        f"contracts: {c['pending']} pending, {c['notifying']} notifying, "
        f"{c['awaitingApproval']} awaiting approval"
    )
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(inbox["byKind"].items()))
    console.print(
        f"inbox: {inbox['open']}{'+' if inbox['more'] else ''} open" + (f" ({kinds})" if kinds else "")
    )
    muted = body["silences"]
    windows = ", ".join(f"{w['name']} until {w['endsAt']}" for w in muted["windows"])
    console.print(
        f"silences: {muted['active']} active" + (f"; maintenance windows: {windows}" if windows else "")
    )
    if muted["items"]:
        print_table(silences_table(muted["items"]), console)
    for name, server in (body.get("mcpServers") or {}).items():
        why = f": {server['error']}" if server.get("error") else ""
        console.print(
            f"mcp server {name} ({server['transport']}): {server['state']}, {server['tools']} tool(s){why}"
        )
    for beat in body.get("heartbeats") or []:
        console.print(heartbeat_line(beat), markup=False)
    for line in usage_lines(body.get("usage")):
        console.print(line, markup=False)


def heartbeat_line(beat: dict[str, Any]) -> str:
    """One heartbeat watcher in ``sentinel status``: its last ping, its next due time, overdue."""
    last = f"{beat['lastPingAt']} ({beat['lastPingKind']})" if beat["lastPingAt"] else "never"
    due = beat["nextDueAt"] or "not yet known"
    return f"heartbeat {beat['id']}: last ping {last}, next due {due}" + (
        ", OVERDUE" if beat["overdue"] else ", on time"
    )


def usage_lines(usage: dict[str, Any] | None) -> list[str]:
    """Today's model usage (SPEC §20): one line per model entry, the service's day and each
    watcher's day against their budgets."""
    if not usage:
        return []
    lines = [f"model usage today ({usage['day']} UTC):"]
    lines += [f"  {name}: {usage_total(used)}" for name, used in usage["models"].items()]
    lines.append(f"  service: {usage_total(usage['service'])}{_against(usage['service']['perDay'])}")
    lines += [
        f"  watcher {wid}: {usage_total(used)}{_against(used['perDay'])}"
        for wid, used in usage["watchers"].items()
    ]
    return lines


def _against(limit: dict[str, Any]) -> str:
    """`` of budgets 1000000 tokens, $5`` (nothing when no day limit is set)."""
    parts = [f"{limit['tokens']} tokens" if limit.get("tokens") is not None else ""]
    parts.append(f"${limit['usd']:g}" if limit.get("usd") is not None else "")
    shown = ", ".join(p for p in parts if p)
    return f" of a day budget of {shown}" if shown else " (no day budget)"
