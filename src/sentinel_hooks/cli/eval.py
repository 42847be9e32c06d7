"""``sentinel eval CASES.yaml`` and ``sentinel eval record CALLBACK_ID`` (SPEC §22).

Each case runs in ``replay``'s dry run, for each ``--model`` (default: the watcher's model)
``--repeat`` times; a table (or ``--json``, or ``--junit FILE``) shows pass rates, tokens, cost and
seconds; exit 1 when any run failed an expectation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from sentinel_hooks.cli.exits import EXIT_INVALID, EXIT_OK
from sentinel_hooks.cli.output import new_table, print_json, print_table, stdout_console
from sentinel_hooks.cli.watchers import client
from sentinel_hooks.config.location import config_path
from sentinel_hooks.errors import SentinelError


class EvalGroup(click.Group):
    """``eval CASES.yaml`` runs cases; ``eval record`` is the one subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("eval", cls=EvalGroup)
def eval_group() -> None:
    """Run evaluation cases in a dry run (`eval CASES.yaml`), or print one (`eval record ID`)."""


@eval_group.command("run", hidden=True)
@click.argument("cases_file", type=click.Path(path_type=Path))
@click.option("--config", "-c", "config", default=None, metavar="FILE", help="sentinel.yaml")
@click.option("--model", "models", multiple=True, help="run with this model (repeatable)")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print one JSON document")
@click.option("--junit", type=click.Path(path_type=Path), default=None, help="write JUnit XML here")
@click.option("--url", default=None, help="service URL (for callbackId cases)")
@click.option("--token", default=None, help="API token (for callbackId cases)")
def run_cases(
    cases_file: Path,
    config: str | None,
    models: tuple[str, ...],
    repeat: int,
    as_json: bool,
    junit: Path | None,
    url: str | None,
    token: str | None,
) -> int:
    """Run CASES_FILE's cases; exit 1 when any expectation failed."""
    import asyncio

    from sentinel_hooks.callbacks.sessions.evaluation import load_cases
    from sentinel_hooks.config.loader import load_config

    cases = load_cases(cases_file)
    loaded = load_config(config_path(config, os.environ))
    for model in models:
        if model not in loaded.service.models:
            raise SentinelError(f"--model {model!r} is not one of the config's models")

    def fetch(callback_id: str) -> Any:
        return client(url, token, config, None).call(
            "GET", f"/api/v1/callbacks/{quote(callback_id, safe='')}"
        )

    rows = asyncio.run(_run(cases, loaded, cases_file, fetch, list(models) or [None], repeat))
    failed = any(r["passed"] < r["runs"] for r in rows)
    if junit is not None:
        junit.write_text(junit_xml(rows))
    if as_json:
        print_json({"ok": not failed, "results": rows})
    else:
        table = new_table(("case", "model", "pass", "tokens", "cost", "seconds", "failures"))
        for r in rows:
            table.add_row(
                r["case"],
                r["model"],
                f"{r['passed']}/{r['runs']}",
                str(r["tokens"]),
                f"${r['costUsd']:.4f}",
                f"{r['seconds']:.1f}",
                "; ".join(r["failures"]) or "-",
            )
        print_table(table)
    return EXIT_INVALID if failed else EXIT_OK


async def _run(
    cases: list[Any], loaded: Any, cases_file: Path, fetch: Any, models: list[str | None], repeat: int
) -> list[dict[str, Any]]:
    from sentinel_hooks.callbacks.sessions.evaluation import case_envelope, check, cost_of, tokens_of
    from sentinel_hooks.callbacks.sessions.replay import replay
    from sentinel_hooks.callbacks.sessions.session import choose_model

    rows = []
    for case in cases:
        envelope = case_envelope(case, loaded, cases_file, fetch, _builder(loaded))
        for model in models:
            row: dict[str, Any] = {
                "case": case.name,
                "model": model or _default_model(loaded, envelope.watcher.id, choose_model),
                "runs": repeat,
                "passed": 0,
                "tokens": 0,
                "costUsd": 0.0,
                "seconds": 0.0,
                "failures": [],
            }
            for _ in range(repeat):
                replayed = await replay(loaded, envelope, model=model)
                failures = await check(case.expect, replayed, loaded)
                row["passed"] += not failures
                row["tokens"] += tokens_of(replayed["usage"])
                row["costUsd"] += cost_of(replayed["usage"])
                row["seconds"] += replayed["seconds"]
                row["failures"] += [f for f in failures if f not in row["failures"]]
            rows.append(row)
    return rows


def _builder(loaded: Any) -> Any:
    """A payload case's envelope, built for its watcher as a fire builds it."""
    from datetime import UTC, datetime

    from sentinel_hooks.watchers.builder import Firing, build_envelope

    def build(watcher: Any, payload: Any) -> Any:
        firing = Firing(kind="match", payload=payload, at=datetime.now(UTC))
        return build_envelope(watcher, loaded.service, firing, redactor=loaded.redactor)

    return build


def _default_model(loaded: Any, watcher_id: str, choose: Any) -> str:
    found = loaded.watcher(watcher_id)
    name, _why = choose(found.spec if found else None, loaded.service)
    return str(name or "scripted")


def junit_xml(rows: list[dict[str, Any]]) -> str:
    """JUnit XML: one testsuite, one testcase per case and model, a failure when any run failed."""
    from xml.etree import ElementTree as ET

    failures = sum(r["passed"] < r["runs"] for r in rows)
    suite = ET.Element(
        "testsuite",
        name="sentinel-eval",
        tests=str(len(rows)),
        failures=str(failures),
        time=f"{sum(r['seconds'] for r in rows):.3f}",
    )
    for r in rows:
        case = ET.SubElement(
            suite, "testcase", classname=str(r["model"]), name=r["case"], time=f"{r['seconds']:.3f}"
        )
        if r["passed"] < r["runs"]:
            failure = ET.SubElement(case, "failure", message=f"passed {r['passed']}/{r['runs']}")
            failure.text = "\n".join(r["failures"])
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


@eval_group.command("record")
@click.argument("callback_id")
@click.option("--name", default=None, help="the case's name (default: watcher-callbackId)")
@click.option("--config", "-c", "config", default=None, metavar="FILE", help="sentinel.yaml")
@click.option("--url", default=None, help="service URL (default: from the config's server)")
@click.option("--token", default=None, help="API token (default: $SENTINEL_API_TOKEN, else the config)")
def record(
    callback_id: str, name: str | None, config: str | None, url: str | None, token: str | None
) -> None:
    """Print a case for a stored callback, its actual outcome as the expectation."""
    from ruamel.yaml import YAML

    from sentinel_hooks.cli.replay import original_of

    body = client(url, token, config, None).call("GET", f"/api/v1/callbacks/{quote(callback_id, safe='')}")
    original = original_of(body)
    watcher = body["callback"]["watcherId"]
    expect: dict[str, Any] = {"outcome": original["outcome"]}
    if original["messages"]:
        expect["messageContains"] = [original["messages"][0][:60]]
    from sentinel_hooks.callbacks.sessions.evaluation import tool_name

    expect["toolsCalled"] = sorted({tool_name(c) for c in original["toolCalls"]})
    case = {"name": name or f"{watcher}-{callback_id}", "watcher": watcher, "callbackId": callback_id}
    case["expect"] = expect
    import io

    out = io.StringIO()
    YAML().dump({"cases": [json.loads(json.dumps(case))]}, out)
    stdout_console().out(out.getvalue().removeprefix("cases:\n"), end="", highlight=False)
