"""Tables never wrap or cut ids: `sentinel … list` as subprocesses against a running `sentinel run`."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import sentinel_command
from tests.service.test_process import Running, free_port
from tests.support import wait_until

pytestmark = pytest.mark.slow

IDS = (
    "eth-below-2000-on-mainnet-price-feed-watcher",
    "btc-above-90000-on-the-coinbase-spot-market",
    "short",
)
PROJECT = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
hookResponseDedupeWindowMs: 0
allowedHosts: [127.0.0.1]
targets: {{console: {{type: console}}}}
"""
FAILING_ID = "queue-cron-on-the-nightly-billing-host"
FAILING = (
    f"  - {{{{id: {FAILING_ID}, strategy: http-poll, endpoint: 'http://127.0.0.1:{{port}}/x', "
    "intervalMs: 1000, deliveryTargets: [console]}}\n"
)
SILENCE = {
    "matchers": [
        {"path": "watcherId", "op": "eq", "value": "queue-cron"},
        {"path": "payload.region", "op": "in", "value": ["eu-west-1", "us-east-2"]},
    ],
    "durationMs": 3_600_000,
    "comment": "nightly billing migration: the queue backs up on purpose, pages would only be noise",
}
BOX = "\u2500"  # the box-drawing characters are U+2500 to U+257F
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """One `sentinel run` with long watcher ids, each fired once."""
    root: Path = tmp_path_factory.mktemp("tables")
    port = free_port()
    (root / "sentinel.yaml").write_text(PROJECT.format(port=port))
    (root / "watchers").mkdir()
    (root / "watchers" / "w.yaml").write_text(
        "watchers:\n"
        + "".join(f"  - {{id: {i}, strategy: webhook, deliveryTargets: [console]}}\n" for i in IDS)
        + FAILING.format(port=free_port())
    )
    running = Running(root / "sentinel.yaml", port)
    try:
        running.start()
        for watcher_id in IDS:
            assert 202 == running.call("POST", f"/api/v1/watchers/{watcher_id}/fire", {"payload": {}})[0]
        created = running.call("POST", "/api/v1/silences", SILENCE)
        assert 201 == created[0], created
        wait_until(lambda: running.status(FAILING_ID)["lastError"], what="the watcher's first error")
        yield running
    finally:
        if running.proc is not None:
            running.proc.kill()
            running.proc.wait()


def piped(service: Running, *args: str) -> list[str]:
    """The stdout lines of `sentinel ARGS -c CONFIG`, stdout a pipe, $COLUMNS narrow."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    done = subprocess.run(
        [*sentinel_command(), *args, "-c", str(service.config)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**env, "COLUMNS": "60"},
    )
    assert 0 == done.returncode, done.stderr
    return done.stdout.splitlines()


def on_a_terminal(service: Running, *args: str, columns: int) -> list[str]:
    """The lines `sentinel ARGS` writes to a terminal `columns` wide (colours stripped)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*sentinel_command(), *args, "-c", str(service.config)],
            stdout=follower,
            stderr=subprocess.DEVNULL,
            env={**env, "COLUMNS": str(columns), "TERM": "xterm"},
        )
        os.close(follower)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closes when the process exits
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert 0 == proc.wait(timeout=30)
    finally:
        os.close(leader)
    text = ANSI.sub("", b"".join(chunks).decode("utf-8"))
    return text.replace("\r\n", "\n").splitlines()


def test_piped_watchers_list_has_one_row_per_line(service: Running) -> None:
    """`watchers list | grep ID` finds the watcher's whole row: id, strategy and state on one line."""
    lines = piped(service, "watchers", "list")
    rows = {i: [line for line in lines if re.search(rf"\b{re.escape(i)}\b", line)] for i in IDS}
    assert dict.fromkeys(IDS, 1) == {i: len(found) for i, found in rows.items()}, lines
    assert all("webhook" in found[0] and "ok" in found[0] for found in rows.values()), lines


def test_piped_callbacks_list_keeps_each_callback_id_on_its_row(service: Running) -> None:
    """`callbacks list | grep ID` finds the callbackId whole, with its watcher and state."""
    body = service.call("GET", "/api/v1/callbacks?limit=50")[1]
    lines = piped(service, "callbacks", "list")
    for item in body["items"]:
        row = [line for line in lines if item["callbackId"] in line]
        assert 1 == len(row), lines
        assert item["watcherId"] in row[0]
        assert item["state"] in row[0]


def test_narrow_terminal_does_not_cut_ids(service: Running) -> None:
    """On a 40-column terminal the ids are still whole, each on one line."""
    lines = on_a_terminal(service, "watchers", "list", columns=40)
    assert all(any(i in line for line in lines) for i in IDS), "\n".join(lines)
    body = service.call("GET", "/api/v1/callbacks?limit=50")[1]
    lines = on_a_terminal(service, "callbacks", "list", columns=40)
    assert all(any(c["callbackId"] in line for line in lines) for c in body["items"]), "\n".join(lines)


def tokens(lines: list[str]) -> set[str]:
    """The words of a table's lines (box-drawing characters are not words)."""
    return {
        token for line in lines for token in line.split() if any(not BOX <= ch <= "\u257f" for ch in token)
    }


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("command", [("watchers", "list"), ("callbacks", "list"), ("silences", "list")])
def test_terminal_tables_fit_and_split_no_word(
    service: Running, command: tuple[str, ...], columns: int
) -> None:
    """At 80 and 120 columns every line fits the terminal and no word is split: each word on the
    terminal is a whole word of the piped table (text wraps between words, and less important
    columns are left out, with a line saying which)."""
    lines = on_a_terminal(service, *command, columns=columns)
    assert [] == [line for line in lines if len(line) > columns], "\n".join(lines)
    whole = tokens(piped(service, *command))
    hint = next((i for i, line in enumerate(lines) if line.startswith("(left out to fit: ")), len(lines))
    shown = tokens(lines[:hint])
    assert set() == shown - whole, "\n".join(lines)
