"""`sentinel silences …`, `sentinel inbox ack --silence` and `sentinel status` as subprocesses
against `sentinel run` (SQLite), and a silence that survives a kill -9 (SPEC.md §10, §14)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sentinel_hooks.cli.silences import parse_duration
from sentinel_hooks.clock import SystemClock
from sentinel_hooks.errors import SentinelError
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.store import InboxItem, open_store
from tests.cli.conftest import sentinel_command
from tests.service.test_process import Running, free_port, make_project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One `sentinel run` (SQLite store) shared by this module's tests."""
    running = make_project(tmp_path_factory.mktemp("silences-cli"))
    running.start()
    yield running
    assert running.proc is not None
    running.proc.kill()
    running.proc.wait()


def test_add_for_a_watcher_then_list_show_and_expire(service: Running) -> None:
    """add --watcher --for prints the id; list shows it active in a table row; expire ends it."""
    added = service.cli("silences", "add", "--watcher", "toggled", "--for", "2h", "--comment", "deploy db")
    silence_id = added.stdout.split()[0]
    listed = service.cli("silences", "list", "--state", "active")
    row = next((line for line in listed.stdout.splitlines() if silence_id in line), "")
    shown = service.cli_json("silences", "show", silence_id)["silence"]
    expired = service.cli("silences", "expire", silence_id)
    after = service.cli_json("silences", "show", silence_id)["silence"]["state"]
    assert (0, True, "cli", 0, "expired") == (
        added.returncode,
        all(cell in row for cell in ("active", "watcherId eq", "toggled", "deploy db")),
        shown["createdBy"],
        expired.returncode,
        after,
    ), (added.stderr, listed.stdout)


def test_add_for_an_unknown_watcher_warns_on_stderr(service: Running) -> None:
    """A silence of a watcher id that does not exist is made (exit 0, the id on stdout) with a
    warning on stderr naming the id."""
    added = service.cli("silences", "add", "--watcher", "toggeld", "--for", "1h", "--comment", "typo")
    service.cli("silences", "expire", added.stdout.split()[0])  # the module's service is shared
    assert (0, True) == (
        added.returncode,
        added.stderr.startswith("sentinel: warning: matchers.0: no watcher has the id 'toggeld'"),
    ), added.stderr


def test_match_options_with_any_build_the_matchers(service: Running) -> None:
    """--match PATH OP VALUE (VALUE as JSON when it parses) and --any."""
    made = service.cli_json(
        "silences",
        "add",
        "--match",
        "priority",
        "in",
        '["high","critical"]',
        "--match",
        "tags",
        "contains",
        "deploy",
        "--any",
        "--until",
        (datetime.now(UTC) + timedelta(days=1)).isoformat(),
        "--comment",
        "noisy",
        "--actor",
        "ana",
    )["silence"]
    service.cli("silences", "expire", made["id"])
    expected = [
        {"path": "priority", "op": "in", "value": ["high", "critical"]},
        {"path": "tags", "op": "contains", "value": "deploy"},
    ]
    assert (expected, "any", "ana") == (made["matchers"], made["match"], made["createdBy"])


def test_a_silenced_manual_fire_says_so(service: Running) -> None:
    """watchers fire under a silence: the contract is silenced (callbacks show names it)."""
    silence_id = service.cli_json(
        "silences", "add", "--watcher", "delta", "--for", "30m", "--comment", "quiet"
    )["silence"]["id"]
    fired = service.cli_json("watchers", "fire", "delta")
    shown = service.cli_json("callbacks", "show", fired["callbackId"])["callback"]
    service.cli("silences", "expire", silence_id)
    assert ("silenced", silence_id) == (fired["state"], shown["silencedBy"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--watcher", "x", "--for", "2 hours", "--comment", "c"), "is not a duration"),
        (("--watcher", "x", "--comment", "c"), "exactly one of --for"),
        (("--for", "2h", "--comment", "c"), "--watcher ID or --match"),
        (("--match", "watcher", "eq", "x", "--for", "2h", "--comment", "c"), "is not one of watcherId"),
        (("--match", "watcherId", "eqq", "x", "--for", "2h", "--comment", "c"), "did you mean"),
    ],
)
def test_bad_adds_exit_1_with_one_line(service: Running, args: tuple[str, ...], message: str) -> None:
    """A bad duration, path or operator: exit 1, a one-line message, no traceback."""
    done = service.cli("silences", "add", *args)
    assert (1, True, False) == (done.returncode, message in done.stderr, "Traceback" in done.stderr), (
        done.stderr
    )


def test_unknown_silence_exits_1(service: Running) -> None:
    """show and expire of an unknown id exit 1."""
    assert (1, 1) == (
        service.cli("silences", "show", "nope").returncode,
        service.cli("silences", "expire", "nope").returncode,
    )


def create_item(service: Running) -> InboxItem:
    async def go() -> InboxItem:
        store = open_store("sqlite:///state.db", base_dir=service.config.parent)
        await store.open()
        try:
            return await Inbox(store, SystemClock()).create(
                "escalation", severity="warning", reason="db down", watcher_id="toggled", actor="agent"
            )
        finally:
            await store.close()

    return asyncio.run(go())


def test_inbox_ack_with_silence_mutes_the_items_watcher(service: Running) -> None:
    """inbox ack ID --silence 2h acks it and silences its watcher for two hours."""
    item = create_item(service)
    done = service.cli("inbox", "ack", item.id, "--silence", "2h", "--note", "on it")
    silence_id = done.stdout.split("silence ")[1].split()[0] if "silence " in done.stdout else ""
    made = service.cli_json("silences", "show", silence_id)["silence"] if silence_id else {}
    service.cli("silences", "expire", silence_id)
    assert (0, "acked", [{"path": "watcherId", "op": "eq", "value": "toggled"}], "on it") == (
        done.returncode,
        service.cli_json("inbox", "show", item.id)["item"]["status"],
        made.get("matchers"),
        made.get("comment"),
    ), done.stderr


def test_status_shows_active_silences(service: Running) -> None:
    """`sentinel status` prints the active silences count and their rows."""
    silence_id = service.cli_json(
        "silences", "add", "--watcher", "once", "--for", "1d", "--comment", "status-row"
    )["silence"]["id"]
    done = service.cli("status")
    as_json = service.cli_json("status")
    service.cli("silences", "expire", silence_id)
    assert (0, True, True, True) == (
        done.returncode,
        "silences: 1 active" in done.stdout,
        silence_id in done.stdout,
        [silence_id] == [s["id"] for s in as_json["silences"]["items"]],
    ), done.stdout


def test_status_of_an_unreachable_service_exits_3(tmp_path: Path) -> None:
    """Nobody listening: exit 3."""
    (tmp_path / "sentinel.yaml").write_text(f"server: {{host: 127.0.0.1, port: {free_port()}}}\n")
    done = subprocess.run(
        [*sentinel_command(), "status", "-c", str(tmp_path / "sentinel.yaml")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert 3 == done.returncode, done.stderr


@pytest.mark.parametrize(
    ("text", "ms"),
    [("30m", 1_800_000), ("2h", 7_200_000), ("1d", 86_400_000), ("1h30m", 5_400_000), ("90s", 90_000)],
)
def test_durations_read_as_people_write_them(text: str, ms: int) -> None:
    """30m, 2h, 1d, 1h30m, 90s."""
    assert ms == parse_duration(text, "--for")


def test_cli_silence_states_are_the_stores() -> None:
    """`silences list --state` offers every silence state, and nothing else."""
    from sentinel_hooks.cli import silences
    from sentinel_hooks.store.silences import SILENCE_STATES

    assert SILENCE_STATES == silences.SILENCE_STATES


@pytest.mark.parametrize("text", ["2", "h", "2 h", "-1h", "0m", "1y"])
def test_bad_durations_are_refused(text: str) -> None:
    """A number without unit, a unit without number, spaces, negatives, zero, unknown units."""
    with pytest.raises(SentinelError, match="--for"):
        parse_duration(text, "--for")


def test_a_silence_survives_a_kill_9(tmp_path: Path) -> None:
    """SQLite file: a silence made before kill -9 is active after the restart and still mutes."""
    service = make_project(tmp_path)
    service.start()
    try:
        status, made = service.call(
            "POST",
            "/api/v1/silences",
            {
                "matchers": [{"path": "watcherId", "op": "eq", "value": "toggled"}],
                "durationMs": 3_600_000,
                "comment": "c",
            },
        )
        assert 201 == status
        service.kill(signal.SIGKILL)
        service.start()
        shown = service.call("GET", f"/api/v1/silences/{made['silence']['id']}")[1]["silence"]
        fired = service.call("POST", "/api/v1/watchers/toggled/fire", {})[1]
        assert ("active", "silenced") == (shown["state"], fired["state"])
    finally:
        service.kill(signal.SIGKILL)
