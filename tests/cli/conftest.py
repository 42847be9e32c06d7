"""Run the real ``sentinel`` command in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Runner = Callable[..., Result]


def sentinel_command() -> list[str]:
    script = Path(sys.executable).parent / "sentinel"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sentinel_hooks"]


async def remote_lines(url: str, cwd: Path, *args: str) -> list[str]:
    """``sentinel ARGS --url URL`` against a running service, in a subprocess off the event loop
    (the service answers meanwhile): its output lines, stripped, read wide (exit 0 asserted)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    done = await asyncio.to_thread(
        subprocess.run,
        [*sentinel_command(), *args, "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "COLUMNS": "250"},
        cwd=cwd,
    )
    assert 0 == done.returncode, done.stderr
    return [line.strip() for line in done.stdout.splitlines()]


@pytest.fixture
def sentinel(tmp_path: Path) -> Runner:
    """``sentinel(*args, env=…)`` runs the CLI in ``tmp_path`` and returns code, stdout, stderr."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Result:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        environ.update(env or {})
        done = subprocess.run(
            [*sentinel_command(), *args],
            cwd=cwd or tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run
