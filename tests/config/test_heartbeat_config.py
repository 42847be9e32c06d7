"""Heartbeat watcher keys of SPEC.md §23: pingKey, periodMs or schedule (+ timezone), graceMs,
maxRunMs; each mistake is an error at its file and line."""

from __future__ import annotations

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.watcher import HeartbeatWatcher
from sentinel_hooks.errors import ConfigError, ConfigIssue
from tests.conftest import BASE_CONFIG, Writer

KEY = "k" * 24
BEAT = """\
id: backup
strategy: heartbeat
deliveryTargets: [oncall]
pingKey: "${env:BACKUP_PING_KEY}"
"""


def issues(project: Writer, extra: str, key: str = KEY) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(project(BASE_CONFIG, watchers__b_yaml=BEAT + extra), environ={"BACKUP_PING_KEY": key})
    return caught.value.issues


def test_a_period_heartbeat_loads_with_the_key_secret(project: Writer) -> None:
    loaded = load_config(
        project(BASE_CONFIG, watchers__b_yaml=BEAT + "periodMs: 60000\ngraceMs: 5000\n"),
        environ={"BACKUP_PING_KEY": KEY},
    )
    spec = loaded.watchers[0].spec
    assert isinstance(spec, HeartbeatWatcher)
    assert (KEY, 60000, 5000, None, True) == (
        spec.ping_key.get_secret_value(),
        spec.period_ms,
        spec.grace_ms,
        spec.max_run_ms,
        spec.notifies_resolved,
    )
    assert KEY not in repr(spec)


@pytest.mark.parametrize(
    ("extra", "key", "words", "line"),
    [
        ("periodMs: 60000\n", "short-key", "fewer than 16 characters", 4),
        ("periodMs: 60000\nschedule: '0 3 * * *'\n", KEY, "both given", 1),
        ("graceMs: 1000\n", KEY, "neither given", 1),
        ("schedule: '0 3 * * *'\ntimezone: Mars/Olympus\n", KEY, "unknown timezone", 6),
        ("schedule: '0 61 * * *'\n", KEY, "schedule", 5),
    ],
)
def test_mistakes_are_errors_at_their_line(
    project: Writer, extra: str, key: str, words: str, line: int
) -> None:
    found = issues(project, extra, key)
    assert len(found) == 1, found
    assert words in found[0].message
    assert found[0].line == line
    assert found[0].file.endswith("b.yaml")
    assert "short-key" not in str(found[0])
