"""``sentinel validate`` and ``sentinel test`` of heartbeat watchers, as real subprocesses."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Runner

KEY = "0123456789abcdef-secret"
CONFIG = """\
store: sqlite:///state.db
allowedHosts: ["127.0.0.1"]
targets:
  team: {type: webhook, url: "http://127.0.0.1:9/x"}
"""
WATCHER = """\
id: nightly-backup
strategy: heartbeat
pingKey: "${env:BACKUP_PING_KEY}"
schedule: "0 3 * * *"
timezone: Europe/Paris
graceMs: 3600000
maxRunMs: 600000
deliveryTargets: [team]
"""


def project(tmp_path: Path, watcher: str = WATCHER) -> None:
    (tmp_path / "sentinel.yaml").write_text(CONFIG)
    (tmp_path / "watchers").mkdir(exist_ok=True)
    (tmp_path / "watchers" / "b.yaml").write_text(watcher)


def test_test_explains_when_the_next_ping_is_due(sentinel: Runner, tmp_path: Path) -> None:
    project(tmp_path)
    result = sentinel("test", "nightly-backup", env={"BACKUP_PING_KEY": KEY, "COLUMNS": "250"})
    assert (0, "") == (result.code, result.err)
    assert "due on '0 3 * * *' (Europe/Paris), 1h late at most" in result.out
    assert "http://127.0.0.1:8765/hooks/ping/***/start" in result.out
    assert "a run is overdue 10m later" in result.out
    assert KEY not in result.out
    found = sentinel("test", "nightly-backup", "--json", env={"BACKUP_PING_KEY": KEY}).json()["heartbeat"]
    assert found["nextDueAt"].endswith(("T02:00:00.000Z", "T01:00:00.000Z"))  # 3 am in Paris
    assert found["pingUrl"] == "http://127.0.0.1:8765/hooks/ping/***"


def test_validate_names_each_mistake_at_its_line(sentinel: Runner, tmp_path: Path) -> None:
    project(tmp_path, WATCHER.replace("maxRunMs: 600000\n", "periodMs: 1000\n").replace("Paris", "Nowhere"))
    result = sentinel("validate", env={"BACKUP_PING_KEY": "tiny-key"})
    assert 1 == result.code
    lines = result.err.strip().splitlines()
    assert any(line.startswith("watchers/b.yaml:3: pingKey: has fewer than 16") for line in lines), lines
    assert any(line.startswith("watchers/b.yaml:5: timezone: unknown timezone") for line in lines), lines
    assert "tiny-key" not in result.err
    assert "Traceback" not in result.err


def test_validate_refuses_two_heartbeats_with_one_ping_key(sentinel: Runner, tmp_path: Path) -> None:
    """Two heartbeat watchers with the same pingKey: one error at the second, naming both
    watchers and where the first is, never the key."""
    project(tmp_path)
    (tmp_path / "watchers" / "c.yaml").write_text(WATCHER.replace("nightly-backup", "weekly-report"))
    result = sentinel("validate", env={"BACKUP_PING_KEY": KEY})
    assert 1 == result.code
    [line] = result.err.strip().splitlines()
    assert line.startswith("watchers/c.yaml:1: pingKey: heartbeat watchers 'weekly-report' and "), line
    assert "'nightly-backup' (at watchers/b.yaml:1) have the same pingKey" in line
    assert KEY not in result.err + result.out
