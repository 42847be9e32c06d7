"""``sentinel audit``: the audit trail of a running service (SPEC §21), newest first."""

from __future__ import annotations

from urllib.parse import urlencode

import click

from sentinel_hooks.cli.output import new_table, print_json, print_table
from sentinel_hooks.cli.watchers import client


@click.command("audit")
@click.option("--since", default="24h", show_default=True, help="the window: 90m, 24h, 7d, 2w …")
@click.option("--actor", "only_actor", default=None, metavar="NAME", help="only changes NAME made")
@click.option("--limit", default=100, show_default=True, help="at most this many changes (1 to 500)")
@click.option("--json", "as_json", is_flag=True, help="print the API's JSON")
@click.option("--token", default=None, help="API token (default: $SENTINEL_API_TOKEN, else the config)")
@click.option("--url", default=None, help="service URL (default: from the config's server)")
@click.option("--config", "-c", "config", default=None, metavar="FILE", help="sentinel.yaml")
def audit(
    since: str,
    only_actor: str | None,
    limit: int,
    as_json: bool,
    token: str | None,
    url: str | None,
    config: str | None,
) -> None:
    """Every change of the window: who (and who they said they were), through which face, what."""
    query = {"since": since, "limit": str(limit), **({"actor": only_actor} if only_actor else {})}
    body = client(url, token, config, None).call("GET", f"/api/v1/audit?{urlencode(query)}")
    if as_json:
        print_json(body)
        return
    table = new_table(
        ["at", "actor", "claimed", "via", "action", "target", "note"], ids=["target"], drop=["note"]
    )
    for e in body["items"]:
        table.add_row(
            e["at"], e["actor"], e["claimedActor"] or "", e["via"], e["action"], e["target"], e["note"] or ""
        )
    print_table(table)
