"""The commands of ``sentinel`` (SPEC.md §10) that work without a running service.

Loading this module (and every command module it registers) imports click and little else:
``sentinel --help`` must answer at once. The config models, pydantic, rich, Jinja2 and the
watcher machinery are imported inside the commands that use them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sentinel_hooks.cli.exits import EXIT_INVALID, EXIT_OK
from sentinel_hooks.cli.output import compact, new_table, print_json, print_table, stdout_console
from sentinel_hooks.config.location import config_path
from sentinel_hooks.errors import ConfigError, ConfigIssue, SentinelError

if TYPE_CHECKING:
    from sentinel_hooks.cli.watcher_arg import ResolvedWatcher
    from sentinel_hooks.config.watcher import HeartbeatWatcher
    from sentinel_hooks.watchers.dryrun import DryRun

CONFIG_HELP = "sentinel.yaml (default: $SENTINEL_CONFIG, else ./sentinel.yaml)"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sentinel-hooks", prog_name="sentinel")
def app() -> None:
    """Sentinel: watch the outside world and wake an AI agent only when something matters."""


def config_option(function: Any) -> Any:
    return click.option("--config", "-c", "config", default=None, metavar="FILE", help=CONFIG_HELP)(function)


def json_flag(function: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="print JSON instead of text")(function)


@app.command()
@click.argument("directory", type=click.Path(path_type=Path), default=Path("."))
@click.option("--force", is_flag=True, help="overwrite existing files")
@click.option(
    "--slack", is_flag=True, help="also deliver to Slack (incoming webhook URL from $SLACK_WEBHOOK_URL)"
)
def init(directory: Path, force: bool, slack: bool) -> None:
    """Write a working example project (config, watchers, a skill) into DIRECTORY."""
    from sentinel_hooks.cli.project import write_example

    written = write_example(directory, force=force, slack=slack)
    console = stdout_console()
    for path in written:
        console.print(f"wrote {path}")
    config = directory / "sentinel.yaml"
    console.print(f"\nnext: sentinel validate -c {config}   then: sentinel run -c {config}")


@app.command()
@config_option
@json_flag
def validate(config: str | None, as_json: bool) -> int:
    """Check config, watchers, skills, templates and regexes; print file:line: message per error."""
    from sentinel_hooks.config.loader import load_config
    from sentinel_hooks.config.watcher import KEEPING

    path = config_path(config, os.environ)
    checking = KEEPING.set(False)  # checked and written to the cache, not kept: not compacted
    try:
        loaded = load_config(path, compiled=True)
    except ConfigError as exc:
        if not as_json:
            raise
        print_json({"ok": False, "config": str(path.absolute()), "errors": [_issue(i) for i in exc.issues]})
        return EXIT_INVALID
    finally:
        KEEPING.reset(checking)
    summary = {
        "ok": True,
        "errors": [],
        "config": str(loaded.path),
        "watchers": len(loaded.watchers),
        "skills": len(loaded.skills),
        "targets": len(loaded.service.targets),
        "models": len(loaded.service.models),
    }
    if as_json:
        print_json(summary)
        return EXIT_OK
    stdout_console().print(
        f"ok: {loaded.path} — {summary['watchers']} watcher(s), {summary['skills']} skill(s), "
        f"{summary['targets']} target(s), {summary['models']} model(s)"
    )
    return EXIT_OK


def _issue(issue: ConfigIssue) -> dict[str, Any]:
    """One error of ``validate --json``: ``key`` is null when the error is not about one key."""
    return {"file": issue.file, "line": issue.line, "key": issue.key or None, "message": issue.message}


@app.command()
@click.option("--envelope", is_flag=True, help="print the callback envelope's schema instead")
def schema(envelope: bool) -> None:
    """Print the JSON Schema of watcher files (for editors)."""
    if envelope:
        from sentinel_hooks.core.envelope import envelope_json_schema

        print_json(envelope_json_schema())
        return
    from pydantic import TypeAdapter

    from sentinel_hooks.config.watcher import WatcherSpec

    watcher_schema = TypeAdapter(WatcherSpec).json_schema(by_alias=True)
    defs = watcher_schema.pop("$defs", {})
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Sentinel watcher file",
        "description": "One watcher, or a list of watchers under `watchers:`.",
        "oneOf": [
            {"$ref": "#/$defs/Watcher"},
            {
                "type": "object",
                "properties": {"watchers": {"type": "array", "items": {"$ref": "#/$defs/Watcher"}}},
                "required": ["watchers"],
                "additionalProperties": False,
            },
        ],
        "$defs": {**defs, "Watcher": watcher_schema},
    }
    print_json(document)


def _json_argument(text: str | None, option: str) -> Any:
    """``--payload``/``--previous``: inline JSON, or ``@FILE``."""
    from sentinel_hooks.core.paths import MISSING

    if text is None:
        return MISSING
    source = text
    if text.startswith("@"):
        try:
            source = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise SentinelError(f"{option}: cannot read {text[1:]!r}: {exc.strerror or exc}") from exc
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise SentinelError(
            f"{option}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc


@app.command("test")
@click.argument("watcher")
@config_option
@click.option("--payload", default=None, metavar="JSON|@FILE", help="sample observation")
@click.option("--previous", default=None, metavar="JSON|@FILE", help="the observation before it")
@json_flag
def test_watcher(
    watcher: str, config: str | None, payload: str | None, previous: str | None, as_json: bool
) -> int:
    """Dry run: evaluate one watcher against a sample payload; nothing is sent."""
    from sentinel_hooks.heap import collection_paused

    try:
        with collection_paused():  # imports and one watcher's load: long-lived objects, no garbage
            _test_watcher(watcher, config, payload, previous, as_json)
    except SentinelError as exc:
        if not as_json:
            raise
        print_json(_test_error(exc))
        return EXIT_INVALID
    return EXIT_OK


def _test_error(exc: SentinelError) -> dict[str, Any]:
    """``test --json`` of an invalid watcher, config or payload: the result's keys (nothing
    matched or fired), ``error`` in one line, and ``errors`` as ``validate --json`` lists them."""
    issues = exc.issues if isinstance(exc, ConfigError) else [ConfigIssue("", None, "", str(exc))]
    errors = [{**_issue(issue), "file": issue.file or None} for issue in issues]
    return {
        "matched": False,
        "fires": False,
        "conditions": [],
        "envelope": None,
        "error": "; ".join(str(issue) if issue.file else issue.message for issue in issues),
        "errors": errors,
    }


def _test_watcher(
    watcher: str, config: str | None, payload: str | None, previous: str | None, as_json: bool
) -> None:
    from sentinel_hooks.cli.watcher_arg import resolve_watcher
    from sentinel_hooks.clock import SystemClock
    from sentinel_hooks.config.watcher import HeartbeatWatcher, WebhookWatcher
    from sentinel_hooks.core.paths import MISSING
    from sentinel_hooks.watchers.dryrun import dry_run

    sample = _json_argument(payload, "--payload")
    before = _json_argument(previous, "--previous")
    target = resolve_watcher(watcher, config)
    if isinstance(target.spec, HeartbeatWatcher):
        _test_heartbeat(target, target.spec, as_json)
        return
    if isinstance(target.spec, WebhookWatcher) and target.spec.format == "alertmanager":
        _test_alerts(target, sample, before, as_json)
        return
    result = dry_run(
        target.spec,
        target.service,
        payload={} if sample is MISSING else sample,
        previous=before,
        now=SystemClock().now(),
        base_dir=target.base_dir,
        redactor=target.redactor,
    )
    if as_json:
        print_json(result.to_json())
        return
    _print_dry_run(target.spec.id, result, payload_given=sample is not MISSING)


def _test_heartbeat(target: ResolvedWatcher, spec: HeartbeatWatcher, as_json: bool) -> None:
    """``sentinel test`` of a heartbeat: when pings are due and where they go (key masked)."""
    from sentinel_hooks.clock import SystemClock
    from sentinel_hooks.watchers.strategies.heartbeat import explain

    server = target.service.server
    base = server.public_url or f"http://{server.host}:{server.port}"
    found = explain(spec, now=SystemClock().now(), base_url=base)
    if as_json:
        print_json(
            {
                "matched": False,
                "fires": False,
                "conditions": [],
                "envelope": None,
                "error": None,
                "heartbeat": found,
            }
        )
        return
    console = stdout_console()
    console.print(f"{spec.id} is a heartbeat: it fires when pings stop coming (SPEC §23)")
    for line in found["lines"]:
        console.print(line, markup=False, highlight=False)


def _test_alerts(target: ResolvedWatcher, sample: Any, before: Any, as_json: bool) -> None:
    """``sentinel test`` of a ``format: alertmanager`` watcher: the sample is a notification,
    dry-run alert by alert as the service splits it. The JSON's top level is the first alert's
    result (the usual sample holds one), ``alerts`` each one's."""
    from sentinel_hooks.clock import SystemClock
    from sentinel_hooks.core.alertmanager import AlertPayloadError
    from sentinel_hooks.core.paths import MISSING
    from sentinel_hooks.watchers.dryrun import DryRun, dry_run_alerts

    if before is not MISSING:
        raise SentinelError(
            "--previous does not apply to format: alertmanager: each alert fires once, when it first "
            "arrives firing"
        )
    if sample is MISSING:
        raise SentinelError("--payload: give an Alertmanager webhook body (format: alertmanager)")
    try:
        runs = dry_run_alerts(
            target.spec,
            target.service,
            body=sample,
            now=SystemClock().now(),
            base_dir=target.base_dir,
            redactor=target.redactor,
        )
    except AlertPayloadError as exc:
        raise SentinelError(f"--payload: {exc}") from None
    if as_json:
        first = runs[0].result if runs else DryRun(False, False, [], None, None)
        print_json({**first.to_json(), "alerts": [run.to_json() for run in runs]})
        return
    console = stdout_console()
    if not runs:
        console.print("the notification holds no alerts: nothing fires")
    for number, run in enumerate(runs, start=1):
        console.print(f"alert {number} of {len(runs)}: {run.name or run.fingerprint} ({run.status})")
        if run.status == "resolved":
            console.print("fires: no — resolved: ends the fire of this alert, if it had one (notifyResolved)")
            continue
        _print_dry_run(target.spec.id, run.result, payload_given=True)


def _print_dry_run(watcher_id: str, result: DryRun, *, payload_given: bool) -> None:
    console = stdout_console()
    if not payload_given:
        console.print("(no --payload given: evaluating against {})")
    if result.conditions:
        columns = ("path", "op", "value", "actual", "result")
        table = new_table(
            columns, ids=("path", "op"), title=f"conditions of {watcher_id}", title_justify="left"
        )
        for row in result.conditions:
            table.add_row(
                row["path"],
                row["op"],
                compact(row["value"]),
                compact(row["actual"]),
                "[green]true[/green]" if row["result"] else "[red]false[/red]",
            )
        print_table(table, console)
    else:
        console.print(f"{watcher_id} has no conditions: every observation matches")
    console.print(f"matched: {'yes' if result.matched else 'no'}")
    if result.error is not None:
        console.print(f"fires: no — template error at fire time: {result.error}")
        return
    console.print(f"fires: {'yes (' + str(result.kind) + ')' if result.fires else 'no'}")
    if result.message is not None:
        console.print(f"message: {result.message}")
    if result.envelope is not None:
        console.print("envelope:")
        console.print_json(json.dumps(result.envelope, ensure_ascii=False))


def _register_service_commands() -> None:
    from sentinel_hooks.cli.audit import audit
    from sentinel_hooks.cli.callbacks import callbacks
    from sentinel_hooks.cli.eval import eval_group
    from sentinel_hooks.cli.importer import import_group
    from sentinel_hooks.cli.inbox import approvals, inbox
    from sentinel_hooks.cli.mcp import mcp_command
    from sentinel_hooks.cli.replay import replay_command
    from sentinel_hooks.cli.report import report
    from sentinel_hooks.cli.silences import silences, status
    from sentinel_hooks.cli.watchers import run, watchers

    app.add_command(run)
    app.add_command(callbacks)
    app.add_command(watchers)
    app.add_command(inbox)
    app.add_command(approvals)
    app.add_command(import_group)
    app.add_command(silences)
    app.add_command(status)
    app.add_command(mcp_command)
    app.add_command(report)
    app.add_command(replay_command)
    app.add_command(eval_group)
    app.add_command(audit)


_register_service_commands()
