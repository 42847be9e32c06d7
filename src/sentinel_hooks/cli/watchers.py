"""``sentinel run`` and ``sentinel watchers …`` (the commands that need the service)."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from sentinel_hooks.cli.client import Client
from sentinel_hooks.cli.output import compact, new_table, print_json, print_table, stdout_console
from sentinel_hooks.config.location import config_path
from sentinel_hooks.errors import SentinelError


def remote_options(function: Any) -> Any:
    """--url, --token, --actor, -c and --json, accepted after the subcommand."""
    for option in (
        click.option("--json", "as_json", is_flag=True, help="print the API's JSON"),
        click.option("--actor", default=None, help="who is acting (recorded in audit trails)"),
        click.option(
            "--token", default=None, help="API token (default: $SENTINEL_API_TOKEN, else the config)"
        ),
        click.option("--url", default=None, help="service URL (default: from the config's server)"),
        click.option("--config", "-c", "config", default=None, metavar="FILE", help="sentinel.yaml"),
    ):
        function = option(function)
    return function


def client(url: str | None, token: str | None, config: str | None, actor: str | None) -> Client:
    return Client.from_options(url=url, token=token, config=config, actor=actor)


@click.command()
@click.option("--config", "-c", "config", default=None, metavar="FILE", help="sentinel.yaml")
def run(config: str | None) -> int:
    """Run the service (watchers, API) until SIGTERM/SIGINT; SIGHUP reloads watcher files."""
    import asyncio

    from sentinel_hooks.heap import collection_paused

    with collection_paused():  # the service's modules are long-lived objects: no collection walks them
        from sentinel_hooks.cli.run import serve

    return asyncio.run(serve(config_path(config, os.environ)))


@click.group()
def watchers() -> None:
    """List, inspect, enable, disable and fire watchers of the running service."""


@watchers.command("list")
@remote_options
def list_watchers(
    config: str | None, url: str | None, token: str | None, actor: str | None, as_json: bool
) -> None:
    """List watchers with their status."""
    api = client(url, token, config, actor)
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = api.call("GET", "/api/v1/watchers?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
        items.extend(page["items"])
        cursor = page.get("nextCursor")
        if not cursor:
            break
    if as_json:
        print_json({"items": items, "nextCursor": None})
        return
    columns = ("id", "strategy", "state", "firing", "fires", "last check", "next check", "last error")
    table = new_table(
        columns,
        ids=columns[:-1],
        drop=("next check", "last check", "fires", "strategy", "firing", "last error"),
    )
    for item in items:
        status = item["status"]
        table.add_row(
            item["id"],
            item["strategy"],
            status["state"],
            "yes" if status["firing"] else "",
            str(status["fires"]),
            status["lastCheckAt"] or "",
            status["nextCheckAt"] or status.get("nextDueAt") or "",  # a heartbeat's next ping
            status["lastError"] or "",
        )
    if items:
        print_table(table)
    else:
        stdout_console().print("no watchers")


@watchers.command("show")
@click.argument("watcher_id")
@remote_options
def show(
    watcher_id: str, config: str | None, url: str | None, token: str | None, actor: str | None, as_json: bool
) -> None:
    """Show one watcher's definition and status."""
    body = client(url, token, config, actor).call("GET", f"/api/v1/watchers/{_quote(watcher_id)}")
    if as_json:
        print_json(body)
        return
    console = stdout_console()
    for key, value in body["status"].items():
        console.print(f"{key}: {compact(value, 200)}")
    console.print("definition:")
    console.print_json(json.dumps(body["watcher"]))


def _set_enabled(watcher_id: str, enabled: bool, options: dict[str, Any]) -> None:
    as_json = options.pop("as_json")
    body = client(**options).call("PATCH", f"/api/v1/watchers/{_quote(watcher_id)}", {"enabled": enabled})
    if as_json:
        print_json(body)
    else:
        stdout_console().print(f"{watcher_id}: {body['status']['state']}")


@watchers.command("enable")
@click.argument("watcher_id")
@remote_options
def enable(watcher_id: str, **options: Any) -> None:
    """Enable a watcher (kept across restarts)."""
    _set_enabled(watcher_id, True, options)


@watchers.command("disable")
@click.argument("watcher_id")
@remote_options
def disable(watcher_id: str, **options: Any) -> None:
    """Disable a watcher (kept across restarts)."""
    _set_enabled(watcher_id, False, options)


@watchers.command("fire")
@click.argument("watcher_id")
@click.option("--payload", default=None, metavar="JSON", help="payload of the manual fire")
@remote_options
def fire(watcher_id: str, payload: str | None, **options: Any) -> None:
    """Fire a watcher by hand and print the callbackId.

    A manual fire skips conditions, cooldown and fireOnce; the dedupe window applies.
    """
    as_json = options.pop("as_json")
    body: dict[str, Any] = {}
    if payload is not None:
        try:
            body["payload"] = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise SentinelError(f"--payload: not valid JSON ({exc.msg} at column {exc.colno})") from exc
    answer = client(**options).call("POST", f"/api/v1/watchers/{_quote(watcher_id)}/fire", body)
    if as_json:
        print_json(answer)
    elif answer["state"] == "deduped":
        stdout_console().print(
            f"{answer['callbackId']} (deduped: the same event fired inside the dedupe window)"
        )
    else:
        stdout_console().print(answer["callbackId"])


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")
