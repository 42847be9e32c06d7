"""docker-compose.yml built and run for real (SPEC.md §12; issue 27, "The deployment, for real").

The image is built the way someone offline or behind a mirror builds it: a base image from no
registry (Debian's debootstrap, ``docker import``), the package index this machine's pip uses
served on 127.0.0.1 and given as PIP_INDEX_URL, BuildKit on. Then ``docker-compose up``: both
services healthy, the example watcher fires, its state is on Redis, a reload by ``exec … kill
-HUP 1`` keeps the restart policy, a killed sentinel is restarted, ``down``/``up`` keeps the state
and fires nothing twice, a Redis outage is survived with bounded logging. Everything is removed
at the end: containers, volumes, networks, images, the daemon and its bridges
(tests/deploy/engine.py has the daemon and why it touches nothing else).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.engine import (
    BASE_IMAGE,
    Engine,
    PackageIndex,
    base_tarball,
    image_environment,
    running_engine,
)
from tests.deploy.layout import ROOT
from tests.redis_server import free_port
from tests.support import wait_until

TOKEN = "compose-run-test-token-0123456789"
LOCKS = (Path("deploy") / "requirements.lock", Path("deploy") / "build-requirements.lock")
CONTEXT = (
    "Dockerfile",
    ".dockerignore",
    "docker-compose.yml",
    "pyproject.toml",
    "README.md",
    "src",
    "deploy",
)
OUTAGE_S = 20
MAX_OUTAGE_LOG_LINES = 30
LEVEL = re.compile(r'"level": "(error|warning)"')


def copy_project(target: Path) -> Path:
    """What the build and compose read, copied: the test edits sources and never the repository."""
    target.mkdir()
    for name in CONTEXT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target / name)
    return target


def parse_time(value: str) -> datetime:
    """Docker's and the API's RFC 3339 times (nanoseconds cut to microseconds)."""
    value = re.sub(r"(\.\d{6})\d+", r"\1", value).replace("Z", "+00:00")
    return datetime.fromisoformat(value)


class Stack:
    """The compose project of the copied repository on the test's engine."""

    def __init__(self, engine: Engine, project: Path, index: PackageIndex) -> None:
        self.engine = engine
        self.project = project
        self.port = free_port()
        override = project / "docker-compose.test.yml"
        # The only test-specific setting: the index listens on this machine's loopback.
        override.write_text("services:\n  sentinel:\n    build:\n      network: host\n")
        env_file = project / "empty.env"
        env_file.write_text("")
        self.args = [
            *("--env-file", str(env_file), "-p", f"sentinel-test-{os.getpid()}"),
            *("-f", str(project / "docker-compose.yml"), "-f", str(override)),
        ]
        engine.env.update(
            {
                "SENTINEL_API_TOKEN": TOKEN,
                "SENTINEL_HOST_PORT": str(self.port),
                "SENTINEL_PYTHON_IMAGE": BASE_IMAGE,
                "SENTINEL_REDIS_IMAGE": BASE_IMAGE,
                "PIP_INDEX_URL": index.url,
                "PIP_TRUSTED_HOST": "127.0.0.1",
            }
        )
        self.build_args = [
            *("--build-arg", f"PYTHON_IMAGE={BASE_IMAGE}", "--build-arg", f"PIP_INDEX_URL={index.url}"),
            *("--build-arg", "PIP_TRUSTED_HOST=127.0.0.1", "--network", "host"),
        ]

    def compose(self, *args: str, timeout: float = 300) -> str:
        return self.engine.compose(self.args, *args, timeout=timeout)

    def attempt(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A compose command that may fail (its exit code is what the test checks)."""
        return subprocess.run(
            [self.engine.compose_cli, *self.args, *args],
            env=self.engine.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def container(self, service: str) -> str:
        found = self.compose("ps", "-q", service).split()
        assert 1 == len(found), f"{service}: containers {found}"
        return found[0]

    def state(self, service: str) -> dict[str, Any]:
        return dict(self.engine.inspect(self.container(service))["State"])

    def healthy(self, service: str) -> bool:
        return "healthy" == self.state(service).get("Health", {}).get("Status")

    def wait_healthy(self, *services: str, timeout_s: float = 120) -> None:
        for service in services:
            wait_until(lambda s=service: self.healthy(s), timeout_s=timeout_s, interval_s=0.5, what=service)

    def logs(self, service: str) -> list[str]:
        done = subprocess.run(
            [self.engine.docker_cli, "logs", self.container(service)],
            env=self.engine.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.splitlines()

    def api(self, path: str) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as response:
                return bool(200 == response.status)
        except (urllib.error.URLError, OSError):
            return False

    def fires(self) -> tuple[list[str], int]:
        """The example watcher's callback ids and the notify lines it wrote in the state volume."""
        items = self.api("/api/v1/callbacks?watcherId=self-health&limit=500")["items"]
        written = self.compose(
            "exec", "-T", "sentinel", "sh", "-c", "cat /var/lib/sentinel/notifications.jsonl"
        )
        notes = [line for line in written.splitlines() if "Sentinel is up in compose" in line]
        return sorted(item["callbackId"] for item in items), len(notes)

    def polled_since(self, moment: datetime) -> bool:
        """The example watcher checked its endpoint after ``moment`` (so it would have fired by now)."""
        try:
            status = self.api("/api/v1/watchers/self-health")["status"]
        except (urllib.error.URLError, OSError):
            return False
        checked = status.get("lastCheckAt")
        return bool(checked) and parse_time(checked) > moment

    def build_stage_layers(self) -> list[str]:
        """The layers of the Dockerfile's build stage, built with the same arguments as compose."""
        self.engine.docker(
            "build",
            *self.build_args,
            "--target",
            "build",
            "-t",
            "sentinel-test/build-stage",
            str(self.project),
            timeout=900,
        )
        layers = self.engine.inspect("sentinel-test/build-stage")["RootFS"]["Layers"]
        return [str(layer) for layer in layers]


def kill_sentinel_process(stack: Stack) -> None:
    """kill -9, from the host, the `sentinel run` process under the container's init."""
    init_pid = stack.state("sentinel")["Pid"]
    children = Path(f"/proc/{init_pid}/task/{init_pid}/children").read_text().split()
    assert 1 == len(children), f"docker-init ({init_pid}) should have one child, has {children}"
    os.kill(int(children[0]), 9)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_compose_stack_builds_offline_runs_and_recovers(tmp_path: Path) -> None:
    """Build with a mirror and no registry, run, reload, crash, down/up and a Redis outage; nothing left."""
    with running_engine() as engine:
        engine.docker("import", str(base_tarball()), BASE_IMAGE, timeout=600)
        index = PackageIndex(
            [ROOT / lock for lock in LOCKS], image_environment(engine, BASE_IMAGE), tmp_path / "index"
        )
        try:
            stack = Stack(engine, copy_project(tmp_path / "project"), index)
            try:
                run_scenario(stack)
            finally:
                engine.remember_bridges()
                down = stack.attempt("down", "-v", "--rmi", "all", "--remove-orphans")
                leftovers = [
                    engine.attempt(*command).stdout
                    for command in (
                        ("ps", "-aq"),
                        ("volume", "ls", "-q"),
                        ("network", "ls", "-q", "-f", "type=custom"),
                    )
                ]
        finally:
            index.close()
    assert (0, ["", "", ""]) == (down.returncode, leftovers), f"compose down -v: {down.stderr}"
    assert not engine.root.exists(), f"{engine.root} is left"
    assert [] == [b for b in engine.bridges if Path(f"/sys/class/net/{b}").exists()]


def run_scenario(stack: Stack) -> None:
    engine = stack.engine

    # The build: the locked dependencies sit in a layer of their own, before the sources.
    stack.compose("build", timeout=900)
    before = stack.build_stage_layers()
    init = stack.project / "src" / "sentinel_hooks" / "__init__.py"
    init.write_text(init.read_text() + "\n# a one-line change to the sources\n")
    after = stack.build_stage_layers()
    assert (before[:-2], True) == (after[:-2], before[-2:] != after[-2:]), "the dependency layer was rebuilt"
    engine.docker("rmi", "sentinel-test/build-stage")
    found = "import importlib.util as u; print([m for m in ('pip', 'setuptools') if u.find_spec(m)])"
    runtime = ("run", "--rm", "--network", "none", "--entrypoint", "python", "sentinel-hooks:local")
    assert "[]" == engine.docker(*runtime, "-c", found).strip(), "pip or setuptools in the runtime virtualenv"

    # Up: both services healthy soon after their start, with init and rotated logs.
    stack.compose("up", "-d", timeout=300)
    stack.wait_healthy("redis", "sentinel")
    for service in ("redis", "sentinel"):
        config = engine.inspect(stack.container(service))["HostConfig"]
        assert (True, "json-file", {"max-size": "10m", "max-file": "3"}, "unless-stopped") == (
            config["Init"],
            config["LogConfig"]["Type"],
            config["LogConfig"]["Config"],
            config["RestartPolicy"]["Name"],
        ), service
    state = stack.state("sentinel")
    first_check = parse_time(state["Health"]["Log"][0]["Start"])
    assert (first_check - parse_time(state["StartedAt"])).total_seconds() < 10, (
        "the first healthcheck came late"
    )

    # The example watcher fires, notifies into the state volume, and its contract is on Redis.
    wait_until(lambda: stack.fires()[1] >= 1, timeout_s=90, interval_s=1, what="the example's notification")
    callbacks, notes = stack.fires()
    assert (1, 1) == (len(callbacks), notes), (callbacks, notes)
    keys = stack.compose("exec", "-T", "redis", "redis-cli", "--scan", "--pattern", "sentinel:contract:*")
    assert f"sentinel:contract:{callbacks[0]}" in keys.split(), keys

    # Reload as the docs say: SIGHUP through exec (docker kill -s would disable the restart policy).
    stack.compose("exec", "-T", "sentinel", "sh", "-c", "kill -HUP 1")
    wait_until(
        lambda: any('"reloaded: ' in line for line in stack.logs("sentinel")), timeout_s=30, what="reload"
    )

    # A killed sentinel process is restarted (after that reload too), healthy again, fires nothing new.
    started, restarts = state["StartedAt"], engine.inspect(stack.container("sentinel"))["RestartCount"]
    kill_sentinel_process(stack)
    wait_until(
        lambda: stack.state("sentinel")["StartedAt"] != started, timeout_s=60, interval_s=0.5, what="restart"
    )
    stack.wait_healthy("sentinel")
    assert restarts + 1 == engine.inspect(stack.container("sentinel"))["RestartCount"]
    restarted = parse_time(stack.state("sentinel")["StartedAt"])
    wait_until(
        lambda: stack.polled_since(restarted), timeout_s=60, interval_s=1, what="a poll after the restart"
    )
    assert (callbacks, 1) == stack.fires()

    # down (volumes kept) and up: the same state, nothing fired twice.
    stack.compose("down", timeout=300)
    stack.compose("up", "-d", timeout=300)
    stack.wait_healthy("redis", "sentinel")
    upped = parse_time(stack.state("sentinel")["StartedAt"])
    wait_until(lambda: stack.polled_since(upped), timeout_s=60, interval_s=1, what="a poll after up")
    assert (callbacks, 1) == stack.fires()

    # A Redis outage: survived without a restart, logged with a bound, ready again afterwards.
    started, logged = stack.state("sentinel")["StartedAt"], len(stack.logs("sentinel"))
    stack.compose("stop", "redis")
    stopped = time.monotonic()
    wait_until(lambda: not stack.ready(), timeout_s=30, interval_s=0.5, what="/readyz to notice the outage")
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped)))  # the outage itself, deliberately long
    stack.compose("start", "redis")
    stack.wait_healthy("redis")
    wait_until(stack.ready, timeout_s=60, interval_s=0.5, what="/readyz after the outage")
    during = stack.logs("sentinel")[logged:]
    noisy = [line for line in during if LEVEL.search(line) or "Traceback" in line]
    assert len(noisy) < MAX_OUTAGE_LOG_LINES, (
        f"{len(noisy)} error/warning lines in a {OUTAGE_S} s outage:\n" + "\n".join(noisy[:40])
    )
    assert (started, True) == (stack.state("sentinel")["StartedAt"], stack.healthy("sentinel"))
    assert (callbacks, 1) == stack.fires()
