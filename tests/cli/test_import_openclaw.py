"""`sentinel import openclaw`, run as a real subprocess into a real project, then `validate`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Runner
from tests.config.test_openclaw_import import AUCTION, ETH_PRICE

HOSTS = ("api.coingecko.com", "eth-mainnet.g.alchemy.com", "status.example.com")

STATUS_WATCH = {
    "id": "status-watch",
    "skillId": "skills.ops",
    "enabled": True,
    "strategy": "http-poll",
    "endpoint": "https://status.example.com/api/health",
    "intervalMs": 10000,
    "match": "all",
    "conditions": [{"path": "status", "op": "eq", "value": "degraded"}],
    "fire": {
        "webhookPath": "/hooks/agent",
        "eventName": "service_degraded",
        "notificationPayloadMode": "none",
        "payloadTemplate": {"event": "${event.name}", "status": "${payload.status}"},
    },
    "retry": {"maxRetries": 5, "baseMs": 250, "maxMs": 5000},
}


def project(sentinel: Runner, tmp_path: Path) -> Path:
    """`sentinel init demo` with the hosts of the examples allowed."""
    assert 0 == sentinel("init", "demo").code
    config = tmp_path / "demo" / "sentinel.yaml"
    text = config.read_text(encoding="utf-8")
    listed = "".join(f"  - {host}\n" for host in HOSTS)
    config.write_text(text.replace("allowedHosts:\n", "allowedHosts:\n" + listed, 1), encoding="utf-8")
    return config


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def test_import_list_then_validate(sentinel: Runner, tmp_path: Path) -> None:
    """A list of upstream watchers lands in the project's watchersDir and `validate` accepts it."""
    config = project(sentinel, tmp_path)
    source = write_json(tmp_path / "watchers.json", [ETH_PRICE, STATUS_WATCH])
    result = sentinel("import", "openclaw", str(source), "-c", str(config))
    assert (0, "") == (result.code, result.err)
    assert (tmp_path / "demo/watchers/eth-price-watch.yaml").is_file()
    assert (tmp_path / "demo/watchers/status-watch.yaml").is_file()
    checked = sentinel("validate", "-c", str(config))
    assert (0, "") == (checked.code, checked.err)
    assert "4 watcher(s)" in checked.out


def test_import_state_file_then_validate(sentinel: Runner, tmp_path: Path) -> None:
    """The plugin's state file (watchers, runtime, updatedAt) imports into --out; validate passes."""
    config = project(sentinel, tmp_path)
    state = {"watchers": [ETH_PRICE, AUCTION], "runtime": {}, "updatedAt": "2026-03-04T15:00:00.000Z"}
    source = write_json(tmp_path / "sentinel-state.json", state)
    result = sentinel("import", "openclaw", str(source), "--out", "demo/watchers", "--json")
    assert 0 == result.code, result.err
    body = result.json()
    assert ["eth-price-watch", "assembly-autobid"] == [w["id"] for w in body["watchers"]]
    assert [True, True] == [w["imported"] for w in body["watchers"]]
    assert ["demo/watchers/eth-price-watch.yaml", "demo/watchers/assembly-autobid.yaml"] == (body["written"])
    checked = sentinel("validate", "-c", str(config), "--json")
    assert 0 == checked.code, checked.out
    assert 4 == checked.json()["watchers"]


def test_unmappable_fields_are_reported(sentinel: Runner, tmp_path: Path) -> None:
    """deadlineTemplate, delivery targets and a foreign webhookPath are listed, per watcher."""
    project(sentinel, tmp_path)
    source = write_json(tmp_path / "w.json", [ETH_PRICE, STATUS_WATCH])
    result = sentinel("import", "openclaw", str(source), "-c", "demo/sentinel.yaml")
    assert 0 == result.code, result.err
    lines = result.out.splitlines()
    assert "wrote demo/watchers/eth-price-watch.yaml" == lines[0]
    assert any(line.startswith("  not carried over: fire.deadlineTemplate: ") for line in lines)
    assert any(
        line.startswith("  not carried over: deliveryTargets[0]: telegram → 5613673222") for line in lines
    )
    assert any(line.startswith("  not carried over: fire.webhookPath: '/hooks/agent'") for line in lines)
    written = (tmp_path / "demo/watchers/eth-price-watch.yaml").read_text(encoding="utf-8")
    assert "#   - fire.deadlineTemplate: Sentinel has no per-fire deadline" in written


def test_hosts_to_allow_are_named(sentinel: Runner, tmp_path: Path) -> None:
    """Without the host in allowedHosts validate would fail: the report says which to add."""
    sentinel("init", "demo")
    source = write_json(tmp_path / "w.json", STATUS_WATCH)
    result = sentinel("import", "openclaw", str(source), "-c", "demo/sentinel.yaml")
    assert 0 == result.code, result.err
    assert "next: add to allowedHosts in demo/sentinel.yaml: status.example.com" in result.out


def test_not_json_exits_1_with_one_line(sentinel: Runner, tmp_path: Path) -> None:
    """A YAML file is not openclaw JSON: exit 1, one line on stderr, nothing written."""
    (tmp_path / "w.yaml").write_text("id: x\nstrategy: http-poll\n", encoding="utf-8")
    result = sentinel("import", "openclaw", "w.yaml")
    assert 1 == result.code
    assert 1 == len(result.err.splitlines())
    assert result.err.startswith("sentinel: error: w.yaml is not JSON (")
    assert not (tmp_path / "watchers").exists()


def test_other_json_exits_1(sentinel: Runner, tmp_path: Path) -> None:
    """JSON that is not openclaw-sentinel's is refused with what was expected."""
    write_json(tmp_path / "a.json", {"groups": [{"name": "x"}]})
    result = sentinel("import", "openclaw", "a.json")
    assert 1 == result.code
    assert "a.json is not openclaw-sentinel JSON (its keys: groups); expected" in result.err
    assert "Traceback" not in result.err


def test_missing_file_exits_1(sentinel: Runner) -> None:
    """A FILE that does not exist: exit 1, one line."""
    result = sentinel("import", "openclaw", "nope.json")
    assert (1, "sentinel: error: nope.json: file not found\n") == (result.code, result.err)


def test_without_config_writes_to_watchers(sentinel: Runner, tmp_path: Path) -> None:
    """No sentinel.yaml and no --out: the files go to ./watchers."""
    write_json(tmp_path / "w.json", {"action": "create", "watcher": STATUS_WATCH})
    result = sentinel("import", "openclaw", "w.json")
    assert 0 == result.code, result.err
    assert (tmp_path / "watchers" / "status-watch.yaml").is_file()


def test_existing_file_is_not_overwritten_without_force(sentinel: Runner, tmp_path: Path) -> None:
    """A second import refuses (exit 1, nothing written); --force overwrites."""
    source = write_json(tmp_path / "w.json", [STATUS_WATCH, ETH_PRICE])
    assert 0 == sentinel("import", "openclaw", str(source)).code
    target = tmp_path / "watchers" / "status-watch.yaml"
    target.write_text("# mine\n", encoding="utf-8")
    refused = sentinel("import", "openclaw", str(source))
    assert 1 == refused.code
    assert "already exist(s); nothing written: pass --force" in refused.err
    assert "# mine\n" == target.read_text(encoding="utf-8")
    assert 0 == sentinel("import", "openclaw", str(source), "--force").code
    assert target.read_text(encoding="utf-8").startswith("# Imported by `sentinel import openclaw`")


def test_nothing_importable_exits_1(sentinel: Runner, tmp_path: Path) -> None:
    """When no watcher can be carried over, nothing is written and the reason is given."""
    write_json(tmp_path / "w.json", {**STATUS_WATCH, "strategy": "grpc"})
    result = sentinel("import", "openclaw", "w.json")
    assert 1 == result.code
    assert (
        "no watcher could be imported (status-watch: strategy: not imported: 'grpc' is not one of"
        in result.err
    )
    assert not (tmp_path / "watchers").exists()


def test_skill_the_project_has_is_kept(sentinel: Runner, tmp_path: Path) -> None:
    """A skillId whose skills/<id>/SKILL.md exists in the project carries over; validate passes."""
    config = project(sentinel, tmp_path)
    source = write_json(tmp_path / "w.json", {**STATUS_WATCH, "skillId": "oncall-triage"})
    result = sentinel("import", "openclaw", str(source), "-c", str(config), "--json")
    assert 0 == result.code, result.err
    assert "skillId" not in {note["path"] for note in result.json()["watchers"][0]["notes"]}
    assert "skillId: oncall-triage\n" in (tmp_path / "demo/watchers/status-watch.yaml").read_text(
        encoding="utf-8"
    )
    assert 0 == sentinel("validate", "-c", str(config)).code


HOSTILE = {
    **STATUS_WATCH,
    "headers": {"X-Token": "${env:SENTINEL_API_TOKEN}", "X-Note": "a\rtimeoutMs: 1"},
    "conditions": [{"path": "status", "op": "eq", "value": "degraded\u2028enabled: false"}],
    "fire": {
        **STATUS_WATCH["fire"],
        "operatorGoal": "g" * 30_000_000,
        "payloadTemplate": {"status": "${payload.status}", "home": "at ${env:HOME}\r\nstrategy: sse"},
    },
}


def test_hostile_file_imports_as_text_and_validates(sentinel: Runner, tmp_path: Path) -> None:
    """Env references, line breaks YAML reads (CR, U+2028), a newline in the file's name and a
    30 MB goal: what is written reads back as text, `validate` accepts it, and no secret is read."""
    config = project(sentinel, tmp_path)
    source = write_json(tmp_path / "w\nid: evil.json", HOSTILE)
    result = sentinel("import", "openclaw", str(source), "-c", str(config))
    assert 0 == result.code, result.err
    assert "  not carried over: headers.X-Token: holds '${env:'" in result.out
    assert (
        "  not carried over: fire.operatorGoal: 30000000 characters, over maxOperatorGoalChars" in result.out
    )
    written = tmp_path / "demo/watchers/status-watch.yaml"
    checked = sentinel(
        "validate", "-c", str(config), "--json", env={"SENTINEL_API_TOKEN": "s3cret-token-0123456789"}
    )
    assert (0, True) == (checked.code, checked.json()["ok"]), checked.out
    text = written.read_text(encoding="utf-8")
    assert not [line for line in text.splitlines() if "${env:" in line and not line.startswith("#")]
    assert "# Imported by `sentinel import openclaw` from w\\nid: evil.json (" in text
    from sentinel_hooks.config.yamlfile import parse_yaml

    data = parse_yaml(text, display="w.yaml").data
    assert {"X-Note": "a\rtimeoutMs: 1"} == data["headers"]
    assert "degraded\u2028enabled: false" == data["conditions"][0]["value"]
    assert (10000, 15000) == (data["intervalMs"], data["timeoutMs"])  # the header did not set it


def test_json_report_of_a_lone_surrogate_is_json(sentinel: Runner, tmp_path: Path) -> None:
    """A lone surrogate spelt in the input reaches the --json report as a JSON escape, not a crash."""
    source = tmp_path / "w.json"
    source.write_text(json.dumps({**STATUS_WATCH, "metadata": {"k": "\ud800"}}), encoding="utf-8")
    result = sentinel("import", "openclaw", str(source), "--json")
    assert (0, "") == (result.code, result.err)
    notes = result.json()["watchers"][0]["notes"]
    assert ["tags[0]"] == [n["path"] for n in notes if n["reason"].startswith("not valid Unicode")]
