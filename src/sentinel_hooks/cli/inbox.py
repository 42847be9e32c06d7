"""``sentinel inbox …`` and ``sentinel approvals …``: work the running service's inbox (SPEC.md §10).

Every command goes through the HTTP API, so what it does is recorded like any other operator's
action: the actor is ``--actor`` when given, else ``cli``. ``--json`` prints the API's body.
An unknown id (404) and a refused move (409) exit with code 1 and the service's message.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

import click

from sentinel_hooks.cli.client import operator_client
from sentinel_hooks.cli.output import (
    LazyChoice,
    new_table,
    print_json,
    print_table,
    show_answer,
    stdout_console,
)
from sentinel_hooks.cli.watchers import remote_options

ITEM_FIELDS = (
    "id",
    "kind",
    "status",
    "severity",
    "reason",
    "watcherId",
    "callbackId",
    "sessionKey",
    "createdAt",
    "updatedAt",
    "actor",
    "note",
)


def _moved(answer: dict[str, Any]) -> None:
    stdout_console().print(f"{answer['item']['id']}: {answer['item']['status']}")


def age(created_at: str, now: datetime) -> str:
    """How long ago an ISO instant was, in its largest whole unit (``45s``, ``12m``, ``3h``, ``2d``)."""
    seconds = max(0, int((now - datetime.fromisoformat(created_at)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def escalation_line(chain: dict[str, Any]) -> str:
    """Where an item's escalation chain is: ``chain, step 1 sent, step 2 at …``."""
    reached = "no step sent yet" if chain.get("step") is None else f"step {chain['step']} sent"
    nxt = f", step {chain['nextStep']} at {chain['nextAt']}" if chain.get("nextAt") else ""
    return f"{chain.get('policy') or 'policy'}, {reached}{nxt}"


def _list(options: dict[str, Any], query: dict[str, str], *, empty: str) -> None:
    as_json = options.pop("as_json")
    body = operator_client(options).call("GET", "/api/v1/inbox?" + urlencode(query))
    if as_json:
        print_json(body)
        return
    if not body["items"]:
        stdout_console().print(empty)
        return
    from rich import box

    from sentinel_hooks.clock import SystemClock

    now = SystemClock().now()
    columns = ("id", "kind", "status", "severity", "watcher", "age", "reason")
    # ids are copied into other commands: never wrap them (nor the short enum cells)
    table = new_table(
        columns,
        ids=columns[:-1],
        drop=("age", "severity", "kind", "watcher"),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    for item in body["items"]:
        table.add_row(
            item["id"],
            item["kind"],
            item["status"],
            item["severity"],
            item["watcherId"] or "",
            age(item["createdAt"], now),
            item["reason"],
        )
    print_table(table)
    if body["nextCursor"]:
        stdout_console().print(f"more: --cursor {body['nextCursor']}")


def _move(item_id: str, path: str, note: str | None, options: dict[str, Any]) -> None:
    as_json = options.pop("as_json")
    body = {} if note is None else {"note": note}
    answer = operator_client(options).call("POST", path.format(id=quote(item_id, safe="")), body)
    show_answer(answer, as_json=as_json, show=_moved)


def _paging(function: Any) -> Any:
    function = click.option("--cursor", default=None, help="the nextCursor of the previous page")(function)
    return click.option(
        "--limit", type=click.IntRange(1, 500), default=50, show_default=True, help="items per page"
    )(function)


def _note(function: Any) -> Any:
    return click.option("--note", default=None, metavar="TEXT", help="recorded with the change")(function)


@click.group()
def inbox() -> None:
    """Escalations and failed deliveries waiting for a person: list, show, ack, resolve."""


@inbox.command("list")
@click.option(
    "--status",
    type=LazyChoice("sentinel_hooks.inbox.transitions", "INBOX_STATUSES"),
    default=None,
    help="only this status",
)
@click.option(
    "--kind",
    type=LazyChoice("sentinel_hooks.inbox.transitions", "INBOX_KINDS"),
    default=None,
    help="only this kind",
)
@_paging
@remote_options
def list_items(status: str | None, kind: str | None, limit: int, cursor: str | None, **options: Any) -> None:
    """List inbox items, newest first."""
    query = {"limit": str(limit)}
    query.update({k: v for k, v in (("status", status), ("kind", kind), ("cursor", cursor)) if v})
    _list(options, query, empty="the inbox is empty" if not (status or kind) else "no matching items")


@inbox.command("show")
@click.argument("item_id")
@remote_options
def show(item_id: str, **options: Any) -> None:
    """Show one item, its detail and its history (who changed what, when)."""
    as_json = options.pop("as_json")
    body = operator_client(options).call("GET", f"/api/v1/inbox/{quote(item_id, safe='')}")
    if as_json:
        print_json(body)
        return
    console = stdout_console()
    item = body["item"]
    for field in ITEM_FIELDS:
        if item.get(field) is not None:
            console.print(f"{field}: {item[field]}")
    chain = item.get("escalation")
    if chain:
        console.print(f"escalation: {escalation_line(chain)}")
    console.print("detail:")
    console.print_json(json.dumps(item["detail"], ensure_ascii=False))
    table = new_table(
        ("at", "actor", "from", "to", "note"),
        ids=("at", "from", "to"),
        drop=("from", "actor"),
        title="history",
        title_justify="left",
    )
    for entry in body["history"]:
        table.add_row(entry["at"], entry["actor"], entry["from"] or "", entry["to"], entry["note"] or "")
    print_table(table, console)


@inbox.command("ack")
@click.argument("item_id")
@_note
@click.option("--silence", default=None, metavar="DURATION", help="also silence the item's watcher, e.g. 2h")
@remote_options
def ack(item_id: str, note: str | None, silence: str | None, **options: Any) -> None:
    """Acknowledge an open item (someone is on it); --silence 2h also mutes its watcher."""
    if silence is None:
        _move(item_id, "/api/v1/inbox/{id}/ack", note, options)
        return
    from sentinel_hooks.cli.silences import parse_duration

    as_json = options.pop("as_json")
    body: dict[str, Any] = {"silenceForMs": parse_duration(silence, "--silence")}
    if note is not None:
        body["note"] = note
    answer = operator_client(options).call("POST", f"/api/v1/inbox/{quote(item_id, safe='')}/ack", body)
    if as_json:
        print_json(answer)
        return
    made = answer["silence"]
    stdout_console().print(
        f"{answer['item']['id']}: {answer['item']['status']}; silence {made['id']} until {made['endsAt']}"
    )


@inbox.command("resolve")
@click.argument("item_id")
@_note
@remote_options
def resolve(item_id: str, note: str | None, **options: Any) -> None:
    """Resolve an open or acked item."""
    _move(item_id, "/api/v1/inbox/{id}/resolve", note, options)


@click.group()
def approvals() -> None:
    """Commands an agent asked to run: list the open ones, approve or deny them."""


@approvals.command("list")
@_paging
@remote_options
def list_approvals(limit: int, cursor: str | None, **options: Any) -> None:
    """List approvals waiting for a decision, newest first."""
    query = {"kind": "approval", "status": "open", "limit": str(limit)}
    if cursor:
        query["cursor"] = cursor
    _list(options, query, empty="no approvals waiting")


@approvals.command("approve")
@click.argument("item_id")
@_note
@remote_options
def approve(item_id: str, note: str | None, **options: Any) -> None:
    """Approve an open approval (ID is its inbox item id): the command runs."""
    _move(item_id, "/api/v1/approvals/{id}/approve", note, options)


@approvals.command("deny")
@click.argument("item_id")
@_note
@remote_options
def deny(item_id: str, note: str | None, **options: Any) -> None:
    """Deny an open approval: the agent is told the command was refused."""
    _move(item_id, "/api/v1/approvals/{id}/deny", note, options)
