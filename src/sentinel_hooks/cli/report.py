"""``sentinel report``: the noise report of a running service (SPEC §22), as the API computes it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import click

from sentinel_hooks.cli.output import new_table, print_json, print_table, stdout_console
from sentinel_hooks.cli.watchers import client, remote_options


def seconds(p: dict[str, Any]) -> str:
    """``12.0 / 48.5 s`` (p50 / p90), ``-`` when nothing was measured."""
    if p.get("p50") is None:
        return "-"
    return f"{p['p50']:g} / {p['p90']:g} s"


def figures_lines(f: dict[str, Any]) -> list[str]:
    usage, fb = f["usage"], f["feedback"]
    return [
        f"fires {f['fires']}: pages {f['pages']} (agent {f['pagesByAgent']}, fallback {f['fallbacks']}), "
        f"deduped {f['deduped']}, silenced {f['silenced']}, grouped {f['grouped']}, "
        f"resolved before the page {f['resolvedBeforePage']}",
        f"follow-ups {f['followUps']}, escalation steps sent {f['escalationSteps']}",
        f"time to page p50/p90: {seconds(f['timeToPageS'])}; to ack: {seconds(f['timeToAckS'])}; "
        f"to resolve: {seconds(f['timeToResolveS'])}",
        f"tokens {usage['inputTokens']} in + {usage['outputTokens']} out, ${usage['costUsd']:.4f}; "
        f"feedback {fb['useful']} 👍 {fb['notUseful']} 👎",
    ]


@click.command("report")
@click.option("--since", default="7d", show_default=True, help="the window: 90m, 24h, 7d, 2w …")
@remote_options
def report(
    since: str, config: str | None, url: str | None, token: str | None, actor: str | None, as_json: bool
) -> None:
    """What the fires of the window did: pages, fallbacks, time to page/ack/resolve, cost, feedback."""
    body = client(url, token, config, actor).call("GET", f"/api/v1/report?since={quote(since, safe='')}")
    if as_json:
        print_json(body)
        return
    console = stdout_console()
    console.print(f"report from {body['since']} to {body['until']}", markup=False)
    console.print("total:")
    for line in figures_lines(body["total"]):
        console.print("  " + line, markup=False)
    table = new_table(
        [
            "watcher",
            "fires",
            "pages",
            "agent",
            "fallback",
            "deduped",
            "silenced",
            "grouped",
            "to page p50/p90",
            "cost",
        ],
        ids=["watcher"],
        drop=["grouped", "silenced", "deduped", "to page p50/p90"],
        title="per watcher",
    )
    for watcher, f in body["watchers"].items():
        table.add_row(
            watcher,
            str(f["fires"]),
            str(f["pages"]),
            str(f["pagesByAgent"]),
            str(f["fallbacks"]),
            str(f["deduped"]),
            str(f["silenced"]),
            str(f["grouped"]),
            seconds(f["timeToPageS"]),
            f"${f['usage']['costUsd']:.4f}",
        )
    print_table(table, console)
    noisy = ", ".join(f"{n['watcherId']} ({n['fires']})" for n in body["noisiest"]) or "none"
    console.print(f"noisiest: {noisy}", markup=False)
    flapping = ", ".join(f"{w['watcherId']} ({w['cycles']} cycles on {w['day']})" for w in body["flapping"])
    console.print(f"flapping: {flapping or 'none'}", markup=False)
