"""The orchestrator side of the process protocol: start a role, wait for READY, stop it.

Children run ``python -m watchbench.<role>`` with the bench folder on ``PYTHONPATH``; their
stderr goes to a log file in the run's temp folder (shown when a child fails). ``stop`` closes
stdin first (a graceful stop), then escalates to SIGTERM and SIGKILL, each after a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

from watchbench.child import READY_PREFIX
from watchbench.procfs import cpu_seconds, rss_kib

T = TypeVar("T")

BENCH_DIR = Path(__file__).resolve().parent.parent


class ChildFailed(RuntimeError):
    """A benchmark process exited or stayed silent before it was ready."""


class Child:
    """One running role process."""

    def __init__(self, role: str, proc: asyncio.subprocess.Process, log_path: Path, log: IO[bytes]) -> None:
        self.role = role
        self.proc = proc
        self.log_path = log_path
        self._log = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    async def start(cls, role: str, args: list[str], log_dir: Path) -> Child:
        """Start ``watchbench.<role>`` with ``args``."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), env.get("PYTHONPATH")]))
        log_path = log_dir / f"{role}.log"
        log = log_path.open("ab")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                f"watchbench.{role}",
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=env,
            )
        except BaseException:
            log.close()
            raise
        return cls(role, proc, log_path, log)

    async def ready(self, timeout_s: float) -> dict[str, Any]:
        """The READY details, or ``ChildFailed`` (with the end of its log) after ``timeout_s``."""
        stdout = self.proc.stdout
        if stdout is None:
            raise ChildFailed(f"{self.role} was started without a stdout pipe")
        try:
            async with asyncio.timeout(timeout_s):
                while line := await stdout.readline():
                    text = line.decode(errors="replace")
                    if text.startswith(READY_PREFIX):
                        details: dict[str, Any] = json.loads(text[len(READY_PREFIX) :])
                        return details
        except TimeoutError:
            raise ChildFailed(f"{self.role} not ready after {timeout_s:.0f}s{self._log_tail()}") from None
        raise ChildFailed(f"{self.role} exited with {await self.proc.wait()}{self._log_tail()}")

    def cpu_seconds(self) -> float:
        """CPU seconds the process has used; ``ChildFailed`` when it is gone."""
        return self._read(cpu_seconds)

    def rss_kib(self) -> int:
        """The process's resident memory; ``ChildFailed`` when it is gone."""
        return self._read(rss_kib)

    def _read(self, reading: Callable[[int], T]) -> T:
        try:
            return reading(self.pid)
        except FileNotFoundError:
            raise ChildFailed(f"{self.role} exited during the measurement{self._log_tail()}") from None

    async def stop(self, timeout_s: float = 15.0) -> int:
        """Close stdin (graceful stop), then SIGTERM, then SIGKILL; returns the exit code."""
        if self.proc.returncode is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        for escalate in (self.proc.terminate, self.proc.kill):
            try:
                async with asyncio.timeout(timeout_s):
                    await self.proc.wait()
                break
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    escalate()
        code = await self.proc.wait()
        self._log.close()
        return code

    def _log_tail(self, lines: int = 20) -> str:
        self._log.flush()
        tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return ("\n--- " + str(self.log_path) + " ---\n" + "\n".join(tail)) if tail else ""
