"""`sentinel validate --json` prints {"ok", "errors"} on stdout whether or not the project is valid."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Runner


def test_valid_project_prints_ok_and_no_errors(sentinel: Runner) -> None:
    """A valid project: exit 0, `ok` true, an empty error list, and the counts."""
    sentinel("init", "demo")
    result = sentinel("validate", "-c", "demo/sentinel.yaml", "--json")
    body = result.json()
    assert (0, True, [], 2) == (result.code, body["ok"], body["errors"], body["watchers"])


def test_invalid_project_prints_every_error_as_json(sentinel: Runner, tmp_path: Path) -> None:
    """An invalid project: exit 1, `ok` false, each error with file, line, key and message."""
    sentinel("init", "demo")
    (tmp_path / "demo" / "watchers" / "bad.yaml").write_text(
        "id: bad\nstrategy: webhook\nenabled: 'no'\nfire: {priority: urgent}\n"
    )
    result = sentinel("validate", "-c", "demo/sentinel.yaml", "--json")
    assert (1, "") == (result.code, result.err)
    assert {
        "ok": False,
        "errors": [
            {
                "file": "demo/watchers/bad.yaml",
                "line": 3,
                "key": "enabled",
                "message": "expected true or false, got the text 'no'",
            },
            {
                "file": "demo/watchers/bad.yaml",
                "line": 4,
                "key": "fire.priority",
                "message": "'urgent' is not one of low, normal, high, critical",
            },
        ],
    } == {k: v for k, v in result.json().items() if k in ("ok", "errors")}


def test_yaml_error_without_a_key_has_a_null_key(sentinel: Runner, tmp_path: Path) -> None:
    """A syntax error is not about one key: `key` is null, `line` is the line."""
    sentinel("init", "demo")
    (tmp_path / "demo" / "sentinel.yaml").write_text("store: sqlite:///s.db\n  port: 1\n")
    result = sentinel("validate", "-c", "demo/sentinel.yaml", "--json")
    [error] = result.json()["errors"]
    assert (1, "demo/sentinel.yaml", 2, None) == (result.code, error["file"], error["line"], error["key"])
    assert "check the indentation of line 2" in error["message"]


def test_missing_config_is_reported_as_json(sentinel: Runner) -> None:
    """No sentinel.yaml: exit 1 and one error without a line."""
    result = sentinel("validate", "--json")
    [error] = result.json()["errors"]
    assert (1, False, "sentinel.yaml", None) == (
        result.code,
        result.json()["ok"],
        error["file"],
        error["line"],
    )


def test_repeat_after_ms_below_a_minute_is_an_error_at_its_line(sentinel: Runner, tmp_path: Path) -> None:
    """`repeatAfterMs: 1` would page four times a second: validate names the file, line and floor."""
    sentinel("init", "demo")
    config = tmp_path / "demo" / "sentinel.yaml"
    lines = config.read_text().splitlines()
    lines += [
        "escalationPolicies:",
        "  nag:",
        "    steps: [{afterMs: 0, targets: [console]}]",
        "    repeatAfterMs: 1",
    ]
    config.write_text("\n".join(lines) + "\n")
    result = sentinel("validate", "-c", "demo/sentinel.yaml", "--json")
    [error] = result.json()["errors"]
    assert (1, "demo/sentinel.yaml", len(lines), "escalationPolicies.nag.repeatAfterMs") == (
        result.code,
        error["file"],
        error["line"],
        error["key"],
    )
    assert error["message"].startswith("repeatAfterMs 1 is below the floor of 60000 (one minute)")
