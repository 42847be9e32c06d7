"""`sentinel run` as a real process: the example fires offline, SIGKILL loses nothing, SIGTERM is clean."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import sentinel_command
from tests.support import wait_until

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Running:
    """A `sentinel run` subprocess and a tiny client for its API."""

    request_timeout_s = 5.0

    def __init__(self, config: Path, port: int) -> None:
        self.config = config
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = config.parent / "service.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*sentinel_command(), "run", "-c", str(self.config)], stdout=log, stderr=log, env=env
            )
        wait_until(self.ready, what=f"the service to answer (log: {self.log})")

    def ready(self) -> bool:
        try:
            return 200 == self.call("GET", "/readyz")[0]
        except OSError:
            assert self.proc is not None
            assert self.proc.poll() is None, self.log.read_text()
            return False

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.request_timeout_s) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def status(self, watcher_id: str) -> dict[str, Any]:
        return self.call("GET", f"/api/v1/watchers/{watcher_id}")[1]["status"]  # type: ignore[no-any-return]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `sentinel ARGS -c CONFIG` against it, with a console wide enough for whole rows."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        return subprocess.run(
            [*sentinel_command(), *args, "-c", str(self.config)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**env, "COLUMNS": "250"},
        )

    def cli_json(self, *args: str) -> Any:
        """`sentinel ARGS --json`, which must succeed: its answer."""
        done = self.cli(*args, "--json")
        assert 0 == done.returncode, done.stderr
        return json.loads(done.stdout)

    def kill(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=12)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for service in started:
        if service.proc is not None and service.proc.poll() is None:
            service.proc.kill()
            service.proc.wait()


def test_init_example_fires_offline_within_15s(tmp_path: Path, running: list[Running]) -> None:
    """`sentinel init` + `sentinel run`: the example watcher fires with no network."""
    subprocess.run([*sentinel_command(), "init", str(tmp_path / "demo")], check=True, capture_output=True)
    port = free_port()
    for path in (tmp_path / "demo" / "sentinel.yaml", tmp_path / "demo" / "watchers" / "self-health.yaml"):
        path.write_text(path.read_text().replace("8765", str(port)))
    service = Running(tmp_path / "demo" / "sentinel.yaml", port)
    running.append(service)
    service.start()
    status = wait_until(
        lambda: service.status("self-health")["fires"] >= 1 and service.status("self-health"),
        timeout_s=15,
        what="the example to fire",
    )
    assert "ok" == status["state"]
    log = tmp_path / "demo" / ".sentinel" / "notifications.jsonl"
    wait_until(
        lambda: log.exists() and "notify" in log.read_text(), what="the scripted notify in the log target"
    )
    notify = next(json.loads(line) for line in log.read_text().splitlines() if '"notify"' in line)
    assert notify["message"].startswith("Sentinel is up: /healthz answered ok at ")
    path = f"/api/v1/callbacks/{notify['callbackId']}"
    # the target writes the line before its outcome (and the contract's fulfilment) is recorded
    wait_until(lambda: service.call("GET", path)[1]["callback"]["state"] == "fulfilled", what="fulfilled")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*sentinel_command(), *args, "-c", str(service.config)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    listed = cli("callbacks", "list", "--json")
    assert notify["callbackId"] in [item["callbackId"] for item in json.loads(listed.stdout)["items"]]
    shown = cli("callbacks", "show", notify["callbackId"])
    assert (0, True) == (shown.returncode, "sentinel_act" in shown.stdout), shown.stderr
    assert 1 == cli("callbacks", "show", "01NOTACALLBACK0000000000000").returncode
    assert 0 == service.kill(signal.SIGTERM)


PROJECT = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
hookResponseDedupeWindowMs: 0
targets: {{console: {{type: console}}}}
"""

WATCHERS = """\
watchers:
  - {id: once, strategy: webhook, fireOnce: true, deliveryTargets: [console]}
  - {id: toggled, strategy: webhook, deliveryTargets: [console]}
  - {id: delta, strategy: webhook, conditions: [{path: v, op: changed}], deliveryTargets: [console]}
"""


def make_project(tmp_path: Path) -> Running:
    port = free_port()
    (tmp_path / "sentinel.yaml").write_text(PROJECT.format(port=port))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
    return Running(tmp_path / "sentinel.yaml", port)


def test_sigkill_restart_keeps_watcher_state(tmp_path: Path, running: list[Running]) -> None:
    """After kill -9: disabled stays disabled, fireOnce stays spent, the `changed` baseline remains."""
    service = make_project(tmp_path)
    running.append(service)
    service.start()
    assert 202 == service.call("POST", "/hooks/ingest/once", {"a": 1})[0]
    assert "disabled" == service.status("once")["state"]
    assert 200 == service.call("PATCH", "/api/v1/watchers/toggled", {"enabled": False})[0]
    assert (202, {"accepted": True, "fired": False}) == service.call("POST", "/hooks/ingest/delta", {"v": 1})
    service.kill(signal.SIGKILL)

    service.start()
    assert ("disabled", 1) == (service.status("once")["state"], service.status("once")["fires"])
    assert "disabled" == service.status("toggled")["state"]
    assert {"accepted": True, "fired": False} == service.call("POST", "/hooks/ingest/delta", {"v": 1})[1]
    assert {"accepted": True, "fired": True} == service.call("POST", "/hooks/ingest/delta", {"v": 2})[1]
    assert 409 == service.call("POST", "/hooks/ingest/once", {"a": 1})[0]


def test_sigterm_stops_cleanly(tmp_path: Path, running: list[Running]) -> None:
    """SIGTERM: the process exits 0."""
    service = make_project(tmp_path)
    running.append(service)
    service.start()
    assert 0 == service.kill(signal.SIGTERM)


def test_sigterm_during_the_start_stops_it_gracefully(tmp_path: Path) -> None:
    """SIGTERM while the start waits on its store: the start is undone, the process exits 0, no
    traceback (before, the signal's default action killed it, leases and all)."""
    with socket.socket() as silent:  # accepts connections, never answers a Redis command
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent.settimeout(20)
        (tmp_path / "watchers").mkdir()
        (tmp_path / "sentinel.yaml").write_text(
            PROJECT.format(port=free_port()).replace(
                "sqlite:///state.db", f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
            )
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        proc = subprocess.Popen(
            [*sentinel_command(), "run", "-c", str(tmp_path / "sentinel.yaml")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            connection, _ = silent.accept()  # the start is waiting for the store's first answer
            with connection:
                proc.send_signal(signal.SIGTERM)
                out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert 0 == proc.returncode, err
    assert "stopped before the start finished" in err
    assert "Traceback" not in out + err


def test_sighup_reload_applies_changes_and_keeps_last_good(tmp_path: Path, running: list[Running]) -> None:
    """SIGHUP adds a new watcher; an invalid file is reported and the running set is kept."""
    service = make_project(tmp_path)
    running.append(service)
    service.start()
    extra = tmp_path / "watchers" / "x.yaml"
    extra.write_text("id: extra\nstrategy: webhook\n")
    assert service.proc is not None
    service.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: service.call("GET", "/api/v1/watchers/extra")[0] == 200, what="the new watcher")
    extra.write_text("id: extra\nstrategy: webhook\nbogus: 1\n")
    service.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "reload refused" in service.log.read_text(), what="the reload to be refused")
    assert 200 == service.call("GET", "/api/v1/watchers/extra")[0]
    assert "x.yaml:3: bogus" in service.log.read_text()


def test_cli_watchers_commands(tmp_path: Path, running: list[Running]) -> None:
    """`sentinel watchers list|show|disable|enable|fire` talk to the service; unreachable exits 3."""
    service = make_project(tmp_path)
    running.append(service)
    service.start()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*sentinel_command(), *args, "-c", str(service.config)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    listed = cli("watchers", "list", "--json")
    assert 0 == listed.returncode, listed.stderr
    assert ["delta", "once", "toggled"] == [i["id"] for i in json.loads(listed.stdout)["items"]]
    assert "toggled" in cli("watchers", "list").stdout
    assert 0 == cli("watchers", "disable", "toggled").returncode
    assert "disabled" == service.status("toggled")["state"]
    assert 0 == cli("watchers", "enable", "toggled").returncode
    fired = cli("watchers", "fire", "delta", "--payload", '{"v": 9}')
    assert (0, 26) == (fired.returncode, len(fired.stdout.strip()))
    assert 1 == cli("watchers", "show", "nope").returncode
    unreachable = subprocess.run(
        [*sentinel_command(), "watchers", "list", "--url", f"http://127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert 3 == unreachable.returncode
    assert "no Sentinel service answers" in unreachable.stderr


def test_cli_rejected_token_exits_1(tmp_path: Path, running: list[Running]) -> None:
    """A token the service rejects is exit code 1 with the reason; the config's token is used by default."""
    port = free_port()
    config = PROJECT.format(port=port).replace("port: ", "apiToken: tok-good-1234567890, port: ")
    (tmp_path / "sentinel.yaml").write_text(config)
    service = Running(tmp_path / "sentinel.yaml", port)
    running.append(service)
    service.start()
    base = [*sentinel_command(), "watchers", "list", "-c", str(service.config)]
    refused = subprocess.run(
        [*base, "--token", "wrong"], capture_output=True, text=True, timeout=30, check=False
    )
    assert 1 == refused.returncode
    assert "401" in refused.stderr
    accepted = subprocess.run(base, capture_output=True, text=True, timeout=30, check=False)
    assert 0 == accepted.returncode, accepted.stderr
