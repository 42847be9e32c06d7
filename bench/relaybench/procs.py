"""Child processes of the relay benchmark: start one, talk to it by lines, stop it for sure.

A child runs ``python -m relaybench.<role>`` with the bench folder and ``src`` on
``PYTHONPATH`` (the package is not installed). It answers on stdout with lines
``<TAG> <json>`` (``READY`` first) and reads commands from stdin; closing its stdin asks it
to stop (so the children of an orchestrator that died end too). Children run in their own
session, so a Ctrl-C reaches the orchestrator alone, which then stops them: ``stop`` closes
stdin, then escalates to SIGTERM and SIGKILL after a timeout each. A child's stderr goes to
a log file in the run's temporary folder, quoted when the child fails.

``cpu_seconds`` reads a process's user + system CPU from ``/proc`` (all threads, the SQLite
worker included), ``machine_busy_seconds`` the whole machine's (so a run can tell how much
other work shared its cores); ``cpu_plan`` picks the cores to pin the sink and the Sentinel
process to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import IO, Any

BENCH_DIR = Path(__file__).resolve().parent.parent
SRC_DIR = BENCH_DIR.parent / "src"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ChildFailed(RuntimeError):
    """A benchmark process exited, or did not answer in time."""


class Child:
    """One running ``relaybench.<role>`` process."""

    def __init__(self, role: str, proc: asyncio.subprocess.Process, log_path: Path, log: IO[bytes]) -> None:
        self.role = role
        self.proc = proc
        self.log_path = log_path
        self._log = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    async def start(
        cls,
        role: str,
        args: list[str],
        log_dir: Path,
        *,
        cpu: int | None = None,
        package: str = "relaybench",
        src: Path = SRC_DIR,
    ) -> Child:
        """Start ``<package>.<role> args`` (on core ``cpu`` when given) with Sentinel from ``src``."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), str(src), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        log_path = log_dir / f"{role}.log"
        log = log_path.open("ab")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                f"{package}.{role}",
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=env,
                limit=1 << 20,
                start_new_session=True,  # Ctrl-C reaches the orchestrator only; it stops the children
            )
        except BaseException:
            log.close()
            raise
        child = cls(role, proc, log_path, log)
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            with contextlib.suppress(OSError):  # the process may already be gone; expect() reports it
                os.sched_setaffinity(proc.pid, {cpu})
        return child

    async def expect(self, tag: str, *, timeout_s: float) -> dict[str, Any]:
        """The JSON of the next ``<tag> <json>`` line; ChildFailed if the child exits or stays silent."""
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    line = await self.proc.stdout.readline()
                    if not line:
                        raise ChildFailed(
                            self._failure(f"exited (code {await self.proc.wait()}) before {tag}")
                        )
                    text = line.decode("utf-8", "replace").strip()
                    if text.startswith(tag + " "):
                        data = json.loads(text[len(tag) + 1 :])
                        if not isinstance(data, dict):
                            raise ChildFailed(self._failure(f"sent a {tag} line that is not an object"))
                        return data
        except TimeoutError:
            raise ChildFailed(self._failure(f"sent no {tag} line within {timeout_s:.0f} s")) from None

    async def send(self, command: str) -> None:
        """Write one command line to the child's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()

    async def stop(self, *, timeout_s: float = 15.0) -> int:
        """Close stdin (a graceful stop), then SIGTERM, then SIGKILL; the exit code."""
        try:
            if self.proc.returncode is None and self.proc.stdin is not None:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    self.proc.stdin.close()
                if await self._exited(timeout_s):
                    return self.proc.returncode or 0
                with contextlib.suppress(ProcessLookupError):
                    self.proc.terminate()
                if await self._exited(5.0):
                    return self.proc.returncode or 0
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
            return await self.proc.wait()
        finally:
            self._log.close()

    def kill_now(self) -> None:
        """SIGKILL without waiting (last resort when the event loop is going away)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def _exited(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self.proc.wait(), timeout=timeout_s)
        except TimeoutError:
            return False
        return True

    def _failure(self, what: str) -> str:
        self._log.flush()
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-15:]
        return f"{self.role} (pid {self.pid}) {what}; last lines of {self.log_path}:\n" + "\n".join(tail)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (all its threads)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the name (field 2) may hold spaces
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime: fields 14, 15 of proc(5)


def is_local_process(pid: int, name_part: str) -> bool:
    """Whether ``pid`` is a process of this machine whose name contains ``name_part``."""
    try:
        return pid > 0 and name_part in Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return False


def machine_busy_seconds() -> float:
    """CPU seconds all cores of the machine have been busy since boot (``/proc/stat``, any process)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / _CLOCK_TICKS  # user … steal; guest time is inside user


def cpu_plan(pin: bool) -> tuple[int | None, int | None]:
    """(sink core, Sentinel core): two different cores when pinning and there are two, else unpinned."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None, None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        return None, None
    return usable[0], usable[-1]
