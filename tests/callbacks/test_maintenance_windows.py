"""Maintenance windows (SPEC.md §14): when a window is active, what it mutes, and its config errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sentinel_hooks.callbacks.intake.silences import Silences, window_span
from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.maintenance import MaintenanceWindow
from sentinel_hooks.core.silences import Matcher
from sentinel_hooks.errors import ConfigError
from sentinel_hooks.store.sqlite import SqliteStore
from tests.service import conftest
from tests.service.conftest import Starter
from tests.service.test_api import call

NIGHTLY = MaintenanceWindow.model_validate(
    {
        "name": "nightly-deploy",
        "schedule": "0 2 * * SAT",
        "timezone": "Europe/Berlin",
        "durationMs": 7_200_000,
        "matchers": [{"path": "tags", "op": "contains", "value": "deploy"}],
    }
)
start_service = conftest.start_service
SATURDAY = datetime(2026, 1, 3, tzinfo=UTC)  # winter: Berlin is UTC+1, so 02:00 there is 01:00 UTC


@pytest.mark.parametrize(
    ("at", "active"),
    [
        (SATURDAY.replace(hour=0, minute=59, second=59), False),
        (SATURDAY.replace(hour=1), True),
        (SATURDAY.replace(hour=2, minute=59, second=59), True),
        (SATURDAY.replace(hour=3), False),
        (SATURDAY + timedelta(days=1, hours=1, minutes=30), False),
    ],
)
def test_a_window_is_active_from_its_occurrence_for_its_duration(at: datetime, active: bool) -> None:
    """02:00 Berlin on Saturday for two hours: 01:00 to 03:00 UTC in winter, start included."""
    assert active == (window_span(NIGHTLY, at) is not None)


def test_a_window_follows_daylight_saving_time() -> None:
    """In summer (UTC+2) the same window starts at 00:00 UTC."""
    summer = datetime(2026, 7, 4, 0, 30, tzinfo=UTC)
    span = window_span(NIGHTLY, summer)
    assert datetime(2026, 7, 4, 0, 0, tzinfo=UTC) == (span.starts_at if span else None)


async def test_silences_match_a_window_by_name_only_while_it_is_active() -> None:
    """Facts the window's matchers match are muted with its name during the window, not after."""
    store = SqliteStore.in_memory()
    await store.open()
    try:
        clock = FakeClock(SATURDAY.replace(hour=1, minute=30))
        silences = Silences(store, clock, [NIGHTLY])
        facts = {"watcherId": "api", "tags": ["deploy"], "payload": {}}
        during = await silences.match(facts)
        other = await silences.match({**facts, "tags": ["db"]})
        clock.advance(2 * 3600)
        after = await silences.match(facts)
        assert ("nightly-deploy", None, None) == (during, other, after)
    finally:
        await store.close()


async def test_a_silence_wins_over_a_window() -> None:
    """When both match, the silence's id names the mute."""
    store = SqliteStore.in_memory()
    await store.open()
    try:
        clock = FakeClock(SATURDAY.replace(hour=1, minute=30))
        silences = Silences(store, clock, [NIGHTLY])
        made = await silences.create(
            [Matcher(path="watcherId", op="eq", value="api")],
            match="all",
            starts_at=None,
            ends_at=clock.now() + timedelta(hours=1),
            comment="c",
            created_by="t",
        )
        assert made.id == await silences.match({"watcherId": "api", "tags": ["deploy"]})
    finally:
        await store.close()


async def test_a_fire_in_a_window_is_silenced_with_its_name(start_service: Starter) -> None:
    """A window active all the time: a manual fire is silenced by its name; status says so."""
    extra = (
        "maintenanceWindows:\n"
        "  - {name: always, schedule: '* * * * *', durationMs: 120000,\n"
        "     matchers: [{path: watcherId, op: eq, value: hook}]}\n"
    )
    service = await start_service(
        watchers={"hook.yaml": "id: hook\nstrategy: webhook\ndeliveryTargets: [console]\n"}, extra=extra
    )
    _, fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={})
    _, shown = await call(service, "GET", f"/api/v1/callbacks/{fired['callbackId']}")
    _, watcher = await call(service, "GET", "/api/v1/watchers/hook")
    _, status = await call(service, "GET", "/api/v1/status")
    assert ("silenced", "always", "always", ["always"]) == (
        fired["state"],
        shown["callback"]["silencedBy"],
        watcher["status"]["silencedBy"],
        [w["name"] for w in status["silences"]["windows"]],
    )


def test_window_names_must_be_unique(tmp_path: Path) -> None:
    """Two windows with one name: a load error at the key, with file and line."""
    window = (
        "{name: w, schedule: '0 2 * * *', durationMs: 1000, matchers: [{path: watcherId, op: eq, value: x}]}"
    )
    (tmp_path / "sentinel.yaml").write_text(f"maintenanceWindows:\n  - {window}\n  - {window}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "sentinel.yaml", environ={})
    assert ["maintenanceWindows: maintenance window name 'w' is used twice"] == [
        f"{i.key}: {i.message}" for i in caught.value.issues
    ]


@pytest.mark.parametrize(
    ("entry", "key", "message"),
    [
        ("schedule: '0 2 * *'", "maintenanceWindows[0].schedule", "has 4 fields"),
        ("timezone: Mars/Olympus", "maintenanceWindows[0].timezone", "unknown timezone"),
        ("durationMs: 0", "maintenanceWindows[0].durationMs", ""),
        (
            "matchers: [{path: watcher, op: eq, value: x}]",
            "maintenanceWindows[0].matchers[0].path",
            "payload.<path>",
        ),
        (
            "matchers: [{path: watcherId, op: eqq, value: x}]",
            "maintenanceWindows[0].matchers[0].op",
            "did you mean",
        ),
        ("matchers: [{path: payload.a, op: changed}]", "maintenanceWindows[0].matchers[0].op", "previous"),
    ],
)
def test_bad_windows_are_load_errors_at_their_key(tmp_path: Path, entry: str, key: str, message: str) -> None:
    """Bad cron, timezone, duration, matcher path or operator: file:line: key: message."""
    fields = {
        "name": "name: w",
        "schedule": "schedule: '0 2 * * *'",
        "timezone": "timezone: UTC",
        "durationMs": "durationMs: 1000",
        "matchers": "matchers: [{path: watcherId, op: eq, value: x}]",
    }
    fields[entry.split(":")[0]] = entry
    body = "\n".join(f"    {line}" for line in fields.values())
    (tmp_path / "sentinel.yaml").write_text(f"maintenanceWindows:\n  -\n{body}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "sentinel.yaml", environ={})
    issues = caught.value.issues
    assert [(key, True, True)] == [(i.key, message in i.message, i.line is not None) for i in issues]
