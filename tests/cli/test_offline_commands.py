"""init, validate, test and schema, run as real subprocesses."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Runner


def test_init_then_validate(sentinel: Runner, tmp_path: Path) -> None:
    """`sentinel init demo` writes a project that `validate` accepts."""
    assert 0 == sentinel("init", "demo").code
    result = sentinel("validate", "-c", "demo/sentinel.yaml")
    assert (0, "") == (result.code, result.err)
    assert "2 watcher(s)" in result.out


def test_init_refuses_to_overwrite(sentinel: Runner) -> None:
    """A second init into the same directory exits 1 and says how to force it."""
    sentinel("init", "demo")
    result = sentinel("init", "demo")
    assert 1 == result.code
    assert "--force" in result.err


def test_validate_reports_each_error_on_its_own_line(sentinel: Runner, tmp_path: Path) -> None:
    """validate exits 1 and prints file:line: key: message per error, no traceback."""
    sentinel("init", "demo")
    watcher = tmp_path / "demo" / "watchers" / "bad.yaml"
    watcher.write_text("id: bad\nstrategy: webhook\nmatchh: all\nfire: {priority: urgent}\n")
    result = sentinel("validate", "-c", "demo/sentinel.yaml")
    assert 1 == result.code
    lines = result.err.strip().splitlines()
    assert [
        "demo/watchers/bad.yaml:3: matchh: unknown key 'matchh' (did you mean 'match'?)",
        "demo/watchers/bad.yaml:4: fire.priority: 'urgent' is not one of low, normal, high, critical",
    ] == lines
    assert "Traceback" not in result.err


def test_validate_uses_sentinel_config_env(sentinel: Runner) -> None:
    """Without -c, $SENTINEL_CONFIG names the config."""
    sentinel("init", "demo")
    assert 0 == sentinel("validate", env={"SENTINEL_CONFIG": "demo/sentinel.yaml"}).code


def test_validate_missing_config(sentinel: Runner) -> None:
    """No sentinel.yaml: exit 1 with a hint to run init."""
    result = sentinel("validate")
    assert 1 == result.code
    assert "sentinel init" in result.err


def test_usage_error_exits_2(sentinel: Runner) -> None:
    """An unknown option is a usage error (exit 2)."""
    assert 2 == sentinel("validate", "--bogus").code


def test_dry_run_json_shape(sentinel: Runner) -> None:
    """`sentinel test --json` prints exactly the SPEC §10 keys; a match fires with an envelope."""
    sentinel("init", "demo")
    result = sentinel(
        "test", "self-health", "-c", "demo/sentinel.yaml", "--payload", '{"status": "ok"}', "--json"
    )
    assert 0 == result.code, result.err
    body = result.json()
    assert ["matched", "fires", "conditions", "envelope", "error"] == list(body)
    assert (True, True, None) == (body["matched"], body["fires"], body["error"])
    assert [{"path": "status", "op": "eq", "value": "ok", "actual": "ok", "result": True}] == body[
        "conditions"
    ]
    envelope = body["envelope"]
    assert "sentinel.callback" == envelope["type"]
    assert {"status": "ok", "checkedAt": envelope["trigger"]["matchedAt"]} == envelope["context"]
    assert "On-call policy" in envelope["operatorGoalRuntimeContext"]


def test_dry_run_edge_does_not_refire(sentinel: Runner) -> None:
    """With --previous already matching, an edge-triggered watcher does not fire again."""
    sentinel("init", "demo")
    result = sentinel(
        "test",
        "self-health",
        "-c",
        "demo/sentinel.yaml",
        "--payload",
        '{"status": "ok"}',
        "--previous",
        '{"status": "ok"}',
        "--json",
    )
    body = result.json()
    assert (0, True, False, None) == (result.code, body["matched"], body["fires"], body["envelope"])


def test_dry_run_no_match(sentinel: Runner) -> None:
    """A payload that does not match: exit 0, fires false."""
    sentinel("init", "demo")
    result = sentinel(
        "test",
        "self-health",
        "-c",
        "demo/sentinel.yaml",
        "--payload",
        '{"status": "down"}',
        "--json",
    )
    body = result.json()
    assert (0, False, False) == (result.code, body["matched"], body["fires"])
    assert "down" == body["conditions"][0]["actual"]


def test_dry_run_human_output(sentinel: Runner) -> None:
    """Without --json, the evaluation is printed for people."""
    sentinel("init", "demo")
    result = sentinel("test", "self-health", "-c", "demo/sentinel.yaml", "--payload", '{"status": "ok"}')
    assert 0 == result.code
    assert "fires: yes (match)" in result.out
    assert "Sentinel is up: /healthz answered ok" in result.out


def test_dry_run_payload_from_file(sentinel: Runner, tmp_path: Path) -> None:
    """--payload @FILE reads the sample from a file."""
    sentinel("init", "demo")
    (tmp_path / "sample.json").write_text('{"status": "ok"}')
    result = sentinel(
        "test", "self-health", "-c", "demo/sentinel.yaml", "--payload", "@sample.json", "--json"
    )
    assert result.json()["fires"] is True


def test_dry_run_invalid_payload_exits_1(sentinel: Runner) -> None:
    """A payload that is not JSON is invalid input: exit 1 with one clear line."""
    sentinel("init", "demo")
    result = sentinel("test", "self-health", "-c", "demo/sentinel.yaml", "--payload", "{nope")
    assert 1 == result.code
    assert result.err.startswith("sentinel: error: --payload: not valid JSON")


def test_dry_run_unknown_watcher_exits_1(sentinel: Runner) -> None:
    """An unknown watcher id lists the known ones."""
    sentinel("init", "demo")
    result = sentinel("test", "nope", "-c", "demo/sentinel.yaml")
    assert 1 == result.code
    assert "self-health" in result.err


def test_dry_run_json_of_an_invalid_watcher_is_the_error_document(sentinel: Runner, tmp_path: Path) -> None:
    """`test --json` of an invalid watcher prints its errors as JSON (as `validate --json`), exit 1."""
    (tmp_path / "w.yaml").write_text(
        "id: w\nstrategy: webhook\nconditions: [{path: n, op: gte, value: 1}]\nmatchh: all\n"
    )
    result = sentinel("test", "w.yaml", "--payload", '{"n": 1}', "--json")
    assert (1, "") == (result.code, result.err)
    body = result.json()
    assert (False, False, None) == (body["matched"], body["fires"], body["envelope"])
    assert [("w.yaml", 4, "matchh")] == [(e["file"], e["line"], e["key"]) for e in body["errors"]]
    assert body["error"].startswith("w.yaml:4: matchh: unknown key 'matchh'")


def test_dry_run_json_of_a_bad_payload_or_id_is_an_error_document(sentinel: Runner) -> None:
    """A payload that is not JSON and an unknown id: one error each, as JSON on stdout, exit 1."""
    sentinel("init", "demo")
    for args in (("self-health", "--payload", "{nope"), ("nope",)):
        result = sentinel("test", *args, "-c", "demo/sentinel.yaml", "--json")
        assert (1, "") == (result.code, result.err), args
        errors = result.json()["errors"]
        assert [(None, None)] == [(e["file"], e["line"]) for e in errors]
        assert result.json()["error"] == errors[0]["message"]


def test_dry_run_watcher_file_without_config(sentinel: Runner, tmp_path: Path) -> None:
    """A watcher file can be tried on its own, with no project around it."""
    (tmp_path / "w.yaml").write_text("id: w\nstrategy: webhook\nconditions: [{path: n, op: gt, value: 10}]\n")
    result = sentinel("test", "w.yaml", "--payload", '{"n": 11}', "--json")
    assert (0, True) == (result.code, result.json()["fires"]), result.err


def test_dry_run_template_error_at_fire_time(sentinel: Runner, tmp_path: Path) -> None:
    """A placeholder that does not resolve: exit 0, error set, envelope null."""
    (tmp_path / "w.yaml").write_text(
        "id: w\nstrategy: webhook\nfire: {payloadTemplate: {p: '${payload.price}'}}\n"
    )
    result = sentinel("test", "w.yaml", "--payload", '{"n": 1}', "--json")
    body = result.json()
    assert (0, None) == (result.code, body["envelope"])
    assert "payload.price" in body["error"]


ALERTMANAGER_WATCHER = """\
id: am
strategy: webhook
format: alertmanager
auth: none
conditions: [{path: labels.severity, op: eq, value: critical}]
"""

NOTIFICATION = """\
{"receiver": "sentinel", "status": "firing", "groupKey": "{}:{}", "externalURL": "http://am",
 "alerts": [
  {"status": "firing", "labels": {"alertname": "DiskFull", "severity": "critical"},
   "startsAt": "2026-11-25T01:00:00Z", "fingerprint": "aaa"},
  {"status": "firing", "labels": {"alertname": "SlowDisk", "severity": "warning"},
   "startsAt": "2026-11-25T01:00:00Z", "fingerprint": "bbb"},
  {"status": "resolved", "labels": {"alertname": "CpuHot", "severity": "critical"},
   "startsAt": "2026-11-25T00:00:00Z", "endsAt": "2026-11-25T00:30:00Z", "fingerprint": "ccc"}]}
"""


def test_dry_run_splits_an_alertmanager_notification_into_its_alerts(
    sentinel: Runner, tmp_path: Path
) -> None:
    """format: alertmanager: each alert is dry-run as the service handles it; the top level is the
    first alert's result, ``alerts`` each one's."""
    (tmp_path / "am.yaml").write_text(ALERTMANAGER_WATCHER)
    (tmp_path / "n.json").write_text(NOTIFICATION)
    result = sentinel("test", "am.yaml", "--payload", "@n.json", "--json")
    assert 0 == result.code, result.err
    body = result.json()
    alerts = body.pop("alerts")
    assert [("DiskFull", "firing", True), ("SlowDisk", "firing", False), ("CpuHot", "resolved", False)] == [
        (a["alertname"], a["status"], a["fires"]) for a in alerts
    ]
    assert {k: v for k, v in alerts[0].items() if k not in ("alertname", "status", "fingerprint")} == body
    assert "DiskFull" == body["envelope"]["payload"]["labels"]["alertname"]
    shown = sentinel("test", "am.yaml", "--payload", "@n.json")
    assert "alert 3 of 3: CpuHot (resolved)" in shown.out
    assert "fires: yes (match)" in shown.out


def test_dry_run_of_an_alertmanager_watcher_refuses_other_bodies(sentinel: Runner, tmp_path: Path) -> None:
    """A body that is not a notification is exit 1 with what is wrong, as the service's 400 says;
    --previous does not apply (each alert fires once, when it first arrives firing)."""
    (tmp_path / "am.yaml").write_text(ALERTMANAGER_WATCHER)
    wrong = sentinel("test", "am.yaml", "--payload", '{"status": "firing"}')
    assert 1 == wrong.code
    assert "not an Alertmanager webhook body: alerts: must be a list" in wrong.err
    assert "Traceback" not in wrong.err
    previous = sentinel("test", "am.yaml", "--payload", '{"alerts": []}', "--previous", "{}")
    assert (1, True) == (previous.code, "--previous does not apply" in previous.err)


def test_dry_run_invalid_watcher_exits_1(sentinel: Runner, tmp_path: Path) -> None:
    """An invalid watcher file: exit 1 with file:line: key: message."""
    (tmp_path / "w.yaml").write_text("id: w\nstrategy: webhook\nconditions: [{path: n, op: gt}]\n")
    result = sentinel("test", "w.yaml", "--payload", "{}")
    assert 1 == result.code
    assert result.err.startswith("w.yaml:3: conditions[0]")


def test_schema_is_json_schema(sentinel: Runner) -> None:
    """`sentinel schema` prints a JSON Schema covering every strategy."""
    result = sentinel("schema")
    assert 0 == result.code
    schema = result.json()
    assert "https://json-schema.org/draft/2020-12/schema" == schema["$schema"]
    strategies = {
        d["properties"]["strategy"]["const"]
        for d in schema["$defs"].values()
        if "strategy" in d.get("properties", {})
    }
    expected = {"http-poll", "http-long-poll", "sse", "websocket", "redis-pubsub", "redis-stream"}
    assert expected | {"webhook", "command", "evm-call", "heartbeat"} == strategies


def test_schema_envelope(sentinel: Runner) -> None:
    """`sentinel schema --envelope` prints the callback envelope's JSON Schema."""
    result = sentinel("schema", "--envelope")
    assert 0 == result.code
    assert "callbackId" in result.json()["properties"]


def test_init_with_slack_adds_the_target(sentinel: Runner, tmp_path: Path) -> None:
    """`sentinel init --slack` switches the Slack target on, reading the URL from $SLACK_WEBHOOK_URL."""
    assert 0 == sentinel("init", "demo", "--slack").code
    config = (tmp_path / "demo" / "sentinel.yaml").read_text()
    assert '  oncall: {type: slack, webhookUrl: "${env:SLACK_WEBHOOK_URL}"}' in config
    env = {"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/abc"}
    assert 0 == sentinel("validate", "-c", "demo/sentinel.yaml", env=env).code
    missing = sentinel("validate", "-c", "demo/sentinel.yaml")
    assert 1 == missing.code
    assert "SLACK_WEBHOOK_URL is not set" in missing.err
