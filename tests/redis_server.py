"""A ``redis-server`` the tests start themselves, on a free port of 127.0.0.1.

Tests never touch a Redis they did not start (a user's data may live on the default port): this one runs in a
temporary directory with persistence off and is killed when the test session ends. Locally,
without the ``redis-server`` binary, the tests that need it are skipped; in CI (``CI`` set) they
fail, since ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from tests.support import unavailable


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def redis_server_binary() -> str:
    """The ``redis-server`` to start (skipped locally without it, a failure in CI)."""
    return shutil.which("redis-server") or unavailable(
        "redis-server is not installed", in_ci=".ci/run must install it"
    )


@contextmanager
def running_redis(*, start_timeout_s: float = 10.0) -> Iterator[str]:
    """Start ``redis-server`` on a free port; yield its URL (db 0); stop it afterwards."""
    binary = redis_server_binary()
    with tempfile.TemporaryDirectory(prefix="sentinel-redis-") as workdir:
        for _ in range(5):  # another process may take the port between probing and binding
            port = free_port()
            process = subprocess.Popen(
                [
                    *(binary, "--bind", "127.0.0.1", "--port", str(port)),
                    *("--save", "", "--appendonly", "no"),
                    *("--dir", workdir, "--logfile", os.path.join(workdir, "redis.log")),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            url = f"redis://127.0.0.1:{port}/0"
            if _answers(url, process, start_timeout_s):
                break
            process.kill()
            process.wait()
        else:
            pytest.fail(f"redis-server did not start on a free port (log in {workdir})")
        try:
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _answers(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """True once the server at ``url`` answers PING; False if ``process`` exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with redis.Redis.from_url(url, socket_connect_timeout=0.5) as client:
                client.ping()
            return True
        except (redis.RedisError, OSError):
            time.sleep(0.05)
    return False


class RestartableRedis:
    """A ``redis-server`` on a free port with its data in ``workdir`` (AOF on), that a test stops and
    starts again on the same port with the same data: a Redis outage, nothing lost."""

    def __init__(self, workdir: str) -> None:
        self._binary = redis_server_binary()
        self._workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout_s: float = 10.0) -> None:
        """Start the server (again); wait until it answers."""
        self._process = subprocess.Popen(
            [
                *(self._binary, "--bind", "127.0.0.1", "--port", str(self.port)),
                *("--save", "", "--appendonly", "yes", "--appendfsync", "always"),
                *("--dir", self._workdir, "--logfile", os.path.join(self._workdir, "redis.log")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not _answers(self.url, self._process, timeout_s):
            self.stop()
            pytest.fail(f"redis-server did not start again on port {self.port} (log in {self._workdir})")

    def stop(self) -> None:
        """Stop the server (SIGTERM: its AOF is complete); nothing answers on the port afterwards."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
