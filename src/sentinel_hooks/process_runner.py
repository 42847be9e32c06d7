"""Running one `command` probe process safely: no shell, bounded output, a hard deadline.

The probe runs as ``argv`` directly (``asyncio.create_subprocess_exec``; a ``;`` or ``$(…)`` in an
argument is just text), in its own session and so its own process group, with stdin closed. Its
stdout is read up to ``max_bytes``: one byte more, or the deadline passing, kills the whole
process group (the probe and anything it spawned) with SIGKILL and is a ``ProbeRunError``. The
child's environment is the parent's minus anything that could leak a credential (``probe_env``).
The agent's ``run_command`` tool runs on the same machinery (``callbacks/policy/commands.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sentinel_hooks.errors import SentinelError

STDOUT_LIMIT_BYTES = 64 * 1024
STDERR_KEPT_BYTES = 2048
_CHUNK_BYTES = 16 * 1024
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|KEY", re.IGNORECASE)


class ProbeRunError(SentinelError):
    """The probe could not be started, ran past its deadline, or printed too much."""


class ProbeTimeout(ProbeRunError):
    """The process ran past its deadline; its process group was killed."""


class ProbeOutputTooLarge(ProbeRunError):
    """The process printed more than ``max_bytes`` on stdout; its process group was killed."""


@dataclass(frozen=True)
class ProbeRun:
    """A probe process that finished: its stdout, exit code and the start of its stderr."""

    stdout: bytes
    exit_code: int
    stderr: bytes


def probe_env(parent: Mapping[str, str], secrets: Iterable[str]) -> dict[str, str]:
    """The environment a probe gets: ``parent`` without variables that may hold credentials.

    Dropped: every variable whose value contains one of ``secrets`` (the values Sentinel's
    configuration read through ``${env:…}``), and every variable whose name contains ``TOKEN``,
    ``SECRET``, ``PASSWORD`` or ``KEY`` (any case), e.g. ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``.
    A probe that needs one of those must read it from a file of its own.
    """
    hidden = [s for s in secrets if s]
    return {
        name: value
        for name, value in parent.items()
        if not _SECRET_NAME.search(name) and not any(s in value for s in hidden)
    }


async def run_probe(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    max_bytes: int = STDOUT_LIMIT_BYTES,
    stderr_bytes: int = STDERR_KEPT_BYTES,
    executable: str | None = None,
) -> ProbeRun:
    """Run ``argv`` to completion; ``ProbeRunError`` if it cannot start, overruns or times out.

    ``executable`` is the file to start when it is not ``argv[0]`` (which the child then sees
    as its name).

    The overrun is a ``ProbeOutputTooLarge`` and the timeout a ``ProbeTimeout`` (both
    ``ProbeRunError``); the first ``stderr_bytes`` of stderr are kept, the rest read and dropped.
    """
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            executable=executable,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise ProbeRunError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc
    # Both are PIPEs above; the asserts only narrow the types.
    assert process.stdout is not None
    assert process.stderr is not None
    stderr_task = asyncio.create_task(_read_head(process.stderr, stderr_bytes))
    finished = False
    try:
        async with asyncio.timeout(timeout_s):
            stdout = await _read_bounded(process.stdout, max_bytes)
            exit_code = await process.wait()
            stderr = await stderr_task
        finished = True
    except TimeoutError as exc:
        raise ProbeTimeout(f"probe timed out after {timeout_s:g} s and was killed") from exc
    finally:
        if not finished:
            stderr_task.cancel()
            _kill_group(process.pid)
            await process.wait()
    return ProbeRun(stdout=stdout, exit_code=exit_code, stderr=stderr)


async def _read_bounded(stream: asyncio.StreamReader, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(_CHUNK_BYTES):
        size += len(chunk)
        if size > max_bytes:
            raise ProbeOutputTooLarge(
                f"probe printed more than {max_bytes // 1024} KiB on stdout and was killed"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_head(stream: asyncio.StreamReader, keep_bytes: int) -> bytes:
    """The first ``keep_bytes`` of ``stream``; the rest is read and dropped so the child never blocks."""
    kept = bytearray()
    while chunk := await stream.read(_CHUNK_BYTES):
        kept += chunk[: max(0, keep_bytes - len(kept))]
    return bytes(kept)


def _kill_group(pid: int) -> None:
    """SIGKILL the probe's process group (its id is the probe's pid: it leads its own session)."""
    with contextlib.suppress(ProcessLookupError):  # the whole group has already exited
        os.killpg(pid, signal.SIGKILL)
