"""Deployment (SPEC.md §12): docker-compose.yml is valid, the image's command works, the example validates.

No Docker engine is needed: compose files are checked with `docker-compose config -q` (Debian's
package, installed by .ci/run; skipped locally without it, a failure when ``CI`` is set), and the
image's ENTRYPOINT/CMD run here as a subprocess on the mounted example (tests/deploy/layout.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from ruamel.yaml import YAML

from tests.cli.conftest import sentinel_command
from tests.deploy.layout import (
    COMPOSE_FILE,
    EXAMPLE,
    LocalContainer,
    compose,
    dockerfile_instructions,
    healthcheck_command,
    interpolate,
    last_instruction,
    local_healthcheck,
    prepare,
)
from tests.support import wait_until

TOKEN = "deploy-test-token-1234"


def base_environ() -> dict[str, str]:
    """This process's environment without SENTINEL_* settings, plus the API token compose requires."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    return {**environ, "SENTINEL_API_TOKEN": TOKEN}


def compose_command() -> list[str]:
    """`docker-compose` (Debian) or `docker compose`; skip locally without either, fail in CI."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if docker and 0 == subprocess.run([docker, "compose", "version"], capture_output=True).returncode:
        return [docker, "compose"]
    if os.environ.get("CI"):
        pytest.fail(
            "neither docker-compose nor `docker compose` is installed; .ci/run installs docker-compose"
        )
    pytest.skip("neither docker-compose nor `docker compose` is installed")


def compose_config(environ: dict[str, str], tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`compose config -q` on the repository's compose file, ignoring any local .env file."""
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    return subprocess.run(
        [*compose_command(), "--env-file", str(env_file), "-f", str(COMPOSE_FILE), *extra, "config", "-q"],
        cwd=COMPOSE_FILE.parent,
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_compose_config_is_valid(tmp_path: Path) -> None:
    """`docker-compose config -q` accepts the compose file, the ollama and alertmanager profiles included."""
    environ = base_environ()
    plain = compose_config(environ, tmp_path)
    with_ollama = compose_config(environ, tmp_path, "--profile", "ollama")
    alerting = compose_config(environ, tmp_path, "--profile", "alertmanager")
    assert (0, 0, 0) == (plain.returncode, with_ollama.returncode, alerting.returncode), (
        plain.stderr + with_ollama.stderr + alerting.stderr
    )


def test_compose_refuses_to_start_without_api_token(tmp_path: Path) -> None:
    """Without SENTINEL_API_TOKEN, compose stops with a message saying what to set."""
    environ = {k: v for k, v in base_environ().items() if k != "SENTINEL_API_TOKEN"}
    done = compose_config(environ, tmp_path)
    assert (True, True) == (0 != done.returncode, "set SENTINEL_API_TOKEN" in done.stderr), done.stderr


def test_compose_services_layout() -> None:
    """sentinel waits for a healthy redis with AOF on a volume; ollama only under its profile."""
    services = compose()["services"]
    sentinel, store = services["sentinel"], services["redis"]
    actual = {
        "depends": sentinel["depends_on"],
        "mounts": sentinel["volumes"],
        "ports": [interpolate(port, {}) for port in sentinel["ports"]],  # SENTINEL_HOST_PORT unset
        "restart": sentinel["restart"],
        "aof": store["command"][store["command"].index("--appendonly") + 1],
        "redis volume": [v.split(":")[1] for v in store["volumes"]],
        "profiles": {name: spec.get("profiles") for name, spec in services.items()},
    }
    expected = {
        "depends": {"redis": {"condition": "service_healthy"}},
        "mounts": ["./deploy/example:/etc/sentinel:ro", "sentinel-state:/var/lib/sentinel"],
        "ports": ["127.0.0.1:8765:8765"],
        "restart": "unless-stopped",
        "aof": "yes",
        "redis volume": ["/data"],
        "profiles": {
            "sentinel": None,
            "redis": None,
            "ollama": ["ollama"],
            "prometheus": ["alertmanager"],
            "alertmanager": ["alertmanager"],
        },
    }
    assert expected == actual


def test_example_store_is_the_compose_redis_service() -> None:
    """The example's store is a redis:// URL whose host is the compose service with a healthcheck."""
    config = YAML(typ="safe", pure=True).load((EXAMPLE / "sentinel.yaml").read_text(encoding="utf-8"))
    store = urlsplit(config["store"])
    service = compose()["services"].get(store.hostname or "", {})
    assert ("redis", True) == (store.scheme, "healthcheck" in service)


def test_dockerfile_runs_as_non_root_uid_10001() -> None:
    """The image's last USER is uid 10001, never root."""
    assert "10001:10001" == last_instruction("USER")


def test_dockerfile_bakes_in_no_secret() -> None:
    """No ENV or ARG of the image names a token, key, secret or password."""
    suspicious = re.compile(r"TOKEN|SECRET|PASSWORD|API_?KEY", re.IGNORECASE)
    found = [f"{k} {v}" for k, v in dockerfile_instructions() if k in ("ENV", "ARG") and suspicious.search(v)]
    assert [] == found


def test_dockerfile_healthcheck_probes_healthz() -> None:
    """The image's HEALTHCHECK asks /healthz on the service's port with Python's urllib."""
    command = healthcheck_command()
    assert ("python", True) == (
        command[0],
        "urllib.request.urlopen('http://127.0.0.1:8765/healthz'" in command[2],
    )


def test_example_validates_with_the_token_set() -> None:
    """`sentinel validate` accepts deploy/example when SENTINEL_API_TOKEN is set."""
    done = subprocess.run(
        [*sentinel_command(), "validate", "--json", "-c", str(EXAMPLE / "sentinel.yaml")],
        env=base_environ(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (0, 3) == (done.returncode, json.loads(done.stdout or "{}").get("watchers")), done.stderr


@pytest.fixture
def redis_db() -> int:
    """This module's own database of the tests' redis-server (``redis_url``)."""
    return 12


class Process:
    """The image's command running locally."""

    def __init__(self, box: LocalContainer) -> None:
        self.box = box
        self.log = box.root / "service.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(box.argv, cwd=box.cwd, env=box.env, stdout=log, stderr=log)

    def alive(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        return True

    def healthz(self) -> bool:
        self.alive()
        try:
            with urllib.request.urlopen(f"{self.box.url}/healthz", timeout=2) as response:
                return bool(200 == response.status)
        except (urllib.error.URLError, OSError):
            return False

    def health_probes(self) -> tuple[int, int]:
        """Exit codes of the Dockerfile HEALTHCHECK and the compose healthcheck, run here."""
        compose_test = compose()["services"]["sentinel"]["healthcheck"]["test"]
        codes = [
            subprocess.run(local_healthcheck(c, self.box.port), capture_output=True, timeout=20).returncode
            for c in (healthcheck_command(), compose_test)
        ]
        return codes[0], codes[1]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=15)


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait()


def test_image_command_answers_healthchecks_and_stops_on_sigterm(
    tmp_path: Path, redis_url: str, processes: list[Process]
) -> None:
    """ENTRYPOINT + CMD on the example with Redis: both healthchecks pass, SIGTERM exits 0, then they fail."""
    process = Process(prepare(tmp_path, store=redis_url, environ=base_environ()))
    processes.append(process)
    wait_until(process.healthz, timeout_s=15, what=f"/healthz (log: {process.log})")
    healthy = process.health_probes()
    code = process.stop()
    assert ((0, 0), 0, (1, 1)) == (healthy, code, process.health_probes()), process.log.read_text()


def test_example_watcher_notifies_into_the_state_volume(tmp_path: Path, processes: list[Process]) -> None:
    """The example watcher fires inside the container layout; the log target writes to /var/lib/sentinel."""
    box = prepare(tmp_path, store=f"sqlite:///{tmp_path / 'state.db'}", environ=base_environ())
    process = Process(box)
    processes.append(process)
    log = box.local("/var/lib/sentinel/notifications.jsonl")
    wait_until(
        lambda: process.alive() and log.exists() and '"notify"' in log.read_text(),
        timeout_s=20,
        what="the example's notify",
    )
    notify = next(json.loads(line) for line in log.read_text().splitlines() if '"notify"' in line)
    assert ("self-health", True) == (
        notify["watcherId"],
        notify["message"].startswith("Sentinel is up in compose: /healthz answered ok at "),
    )
    assert 0 == process.stop()
