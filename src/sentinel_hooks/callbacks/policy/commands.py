"""Running an agent's ``run_command`` (SPEC §5.3) once the action policy has allowed it.

The agent is a model, so its command is treated as untrusted: the argv runs without a shell, the
executable is looked up on a fixed ``SAFE_PATH`` (never the service's ``PATH``, which a user may
have pointed at a writable directory) and its symlinks resolved (``locate``: the action policy
judges that real program, and the very file it judged is the one started), the child gets the
service's environment minus anything
that could hold one of our credentials, and it runs in a working directory the caller chooses
under the state dir. The process machinery is the command-watcher probe's
(``process_runner.py``): own process group, stdin closed, stdout read up to
1 MiB, the whole group SIGKILLed at the deadline or past the read bound. Only the first 4000
characters of stdout and 2000 of stderr go into the result the model sees, secrets masked
before the cut (so a secret straddling it cannot show in part). Whatever the child does, the
outcome is a ``CommandResult``, never an exception.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.process_runner import (
    ProbeOutputTooLarge,
    ProbeRunError,
    ProbeTimeout,
    probe_env,
    run_probe,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "MIN_TIMEOUT_S",
    "READ_LIMIT_BYTES",
    "SAFE_PATH",
    "STDERR_CHARS",
    "STDOUT_CHARS",
    "CommandResult",
    "Located",
    "command_env",
    "locate",
    "run_command",
]

SAFE_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STDOUT_CHARS: Final = 4000
STDERR_CHARS: Final = 2000
READ_LIMIT_BYTES: Final = 1024 * 1024
DEFAULT_TIMEOUT_S: Final = 30.0
MIN_TIMEOUT_S: Final = 1.0
MAX_TIMEOUT_S: Final = 120.0
# UTF-8 needs at most 4 bytes a character: this many bytes always hold STDERR_CHARS characters.
_STDERR_KEPT_BYTES: Final = STDERR_CHARS * 4
# probe_env already drops TOKEN, SECRET, PASSWORD and KEY names; commands also lose these.
_CREDENTIAL_NAME: Final = re.compile(r"CREDENTIAL", re.IGNORECASE)


@dataclass(frozen=True)
class CommandResult:
    """What a command amounted to: finished (``code`` set) or not run to the end (``error`` set)."""

    ok: bool
    code: int | None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> CommandResult:
        """A command that did not run to completion (not found, timed out, killed)."""
        return cls(ok=False, code=None, error=error)

    def to_json(self) -> dict[str, Any]:
        """The tool result: ``{ok, code, stdout, stderr}``, or ``{ok: false, code: null, error}``."""
        if self.error is not None:
            return {"ok": self.ok, "code": self.code, "error": self.error}
        return {"ok": self.ok, "code": self.code, "stdout": self.stdout, "stderr": self.stderr}


@dataclass(frozen=True)
class Located:
    """Where a command's program is: ``found`` as looked up (the child's ``argv[0]``, so a
    multi-call program such as BusyBox still sees the name it was called by), and ``real``, the
    file that runs once every symlink is resolved (what the action policy's ``argv0`` names)."""

    found: str
    real: str


def locate(command: str, path: str = SAFE_PATH) -> Located | None:
    """The program ``command`` names: an absolute path as given, or a bare name found on ``path``;
    None for a relative path with a ``/``, a name found nowhere, or one holding a NUL character."""
    if "\0" in command:
        return None
    if os.path.isabs(command):
        found: str | None = command
    elif "/" in command:
        found = None
    else:
        found = shutil.which(command, path=path)
    if found is None:
        return None
    return Located(found=found, real=os.path.realpath(found))


def command_env(
    parent: Mapping[str, str], secrets: Collection[str], *, path: str = SAFE_PATH
) -> dict[str, str]:
    """The environment a command gets: ``parent`` without credentials, and ``PATH`` set to ``path``.

    Dropped: what ``probe_env`` drops (variables whose value contains one of ``secrets``, names
    containing TOKEN, SECRET, PASSWORD or KEY) and names containing CREDENTIAL, in any case.
    """
    env = {
        name: value for name, value in probe_env(parent, secrets).items() if not _CREDENTIAL_NAME.search(name)
    }
    env["PATH"] = path
    return env


async def run_command(
    argv: list[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cwd: Path,
    secrets: Collection[str],
    path: str = SAFE_PATH,
    located: Located | None = None,
) -> CommandResult:
    """Run ``argv`` (no shell) in ``cwd`` (created if missing) and report how it went.

    ``argv[0]`` is an absolute path, used as given, or a bare name looked up on ``path``; a
    relative path with a ``/`` is refused. Pass ``located`` (``locate``'s answer for ``argv[0]``)
    to start exactly the file that was checked, instead of looking it up again. ``ok`` is true
    only for exit code 0. A child past
    ``timeout_s`` or printing more than ``READ_LIMIT_BYTES`` on stdout is killed with its whole
    process group. ``ValueError`` only for a ``timeout_s`` outside 1..120 s (a caller bug).
    """
    if not MIN_TIMEOUT_S <= timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(
            f"timeout_s must be between {MIN_TIMEOUT_S:g} and {MAX_TIMEOUT_S:g} s, got {timeout_s!r}"
        )
    if not argv or not argv[0]:
        return CommandResult.failed("no command given")
    if any("\0" in arg for arg in argv):
        return CommandResult.failed("the command or an argument contains a NUL character")
    program = located or locate(argv[0], path)
    if program is None:
        return CommandResult.failed(_not_found(argv[0], path))
    try:
        await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    except OSError as exc:
        return CommandResult.failed(
            f"cannot create the working directory {str(cwd)!r}: {exc.strerror or exc}"
        )
    try:
        run = await run_probe(
            [program.found, *argv[1:]],
            executable=program.real,
            cwd=cwd,
            env=command_env(os.environ, secrets, path=path),
            timeout_s=timeout_s,
            max_bytes=READ_LIMIT_BYTES,
            stderr_bytes=_STDERR_KEPT_BYTES,
        )
    except ProbeTimeout:
        return CommandResult.failed(f"timed out after {timeout_s:g}s")
    except ProbeOutputTooLarge:
        limit_mib = READ_LIMIT_BYTES // (1024 * 1024)
        return CommandResult.failed(f"printed more than {limit_mib} MiB on stdout and was killed")
    except ProbeRunError as exc:  # could not start: permissions, bad executable format …
        return CommandResult.failed(str(exc))
    redactor = Redactor(secrets)
    return CommandResult(
        ok=run.exit_code == 0,
        code=run.exit_code,
        stdout=_text(run.stdout, STDOUT_CHARS, redactor),
        stderr=_text(run.stderr, STDERR_CHARS, redactor),
    )


def _not_found(command: str, path: str) -> str:
    if "/" in command:
        return f"command {command!r} is a relative path: give a bare program name or an absolute path"
    return (
        f"command {command!r} was not found on the fixed PATH {path}: "
        "use a program installed there or give its absolute path"
    )


def _text(data: bytes, max_chars: int, redactor: Redactor) -> str:
    """The first ``max_chars`` characters of ``data`` as UTF-8 (bad bytes replaced), secrets masked."""
    return redactor.text(data.decode("utf-8", errors="replace"))[:max_chars]
