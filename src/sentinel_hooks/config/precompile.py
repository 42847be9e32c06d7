"""A large project validated in a child process, so that ``sentinel run`` holds its watchers as
the compiled cache lays them out.

Validating a watcher makes about as much short-lived data as it keeps (the YAML it was read
from, the interpolated data, pydantic's intermediate values), allocated between the objects it
keeps. Freed, that data leaves holes in the allocator's pools that the process keeps for as
long as it runs: 100,000 watchers validated in the process held 3.6 KiB a watcher once
started, the same watchers read back from the compiled cache 2.7 (issue 34.5). So when the
cache does not cover a project whose watcher files are large (``PRECOMPILE_BYTES``), ``sentinel
run`` has a child process load the project as ``sentinel validate`` does, which writes the
cache, and then reads the watchers from it (``config.loader.load_streamed``).

The child only saves memory; it decides nothing. Whatever it could not do (a problem in the
project, a file the cache may not keep, a cache it could not write, the child failing to start)
only means the project is read in this process as before, which reports any problem with its
file and line. It is not started where it could not help: a small project, a file the cache
never keeps (``_kept_whole``), a cache directory this user cannot write.

Run as ``python -m sentinel_hooks.config.precompile CONFIG_FILE``: exit status 0 when the
project loaded (and the cache was written), 1 when it has a problem, 2 on any other failure.
It runs in a session of its own, so a Ctrl-C in the terminal reaches only the service, which
stops once the child is done, as it would once a load in the process is done.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from sentinel_hooks.config.compiled import keepable

log = logging.getLogger(__name__)

_GOAL_FILE = b"operatorGoalFile"  # a watcher that names one is never kept (``config.compiled``)

PRECOMPILE_BYTES = 1 << 20
"""Watcher files smaller in all than this (some thousands of watchers) are read in the process:
an interpreter started for them would cost more time than their holes cost memory."""


def precompiled(config_file: Path, cache_path: Path, files: Sequence[Path]) -> bool:
    """Whether a child process loaded the project of ``config_file`` (whose watcher files are
    ``files``), writing its compiled cache at ``cache_path``; False without starting one where
    it could not help (see the module docstring)."""
    try:
        contents = [file.read_bytes() for file in files]
    except OSError:
        return False  # the load in the process says what is wrong
    if sum(map(len, contents)) < PRECOMPILE_BYTES or not all(map(_kept_whole, contents)):
        return False
    if not _writable(cache_path.parent):
        return False
    command = [sys.executable, "-m", __name__, str(config_file)]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            check=False,
            start_new_session=True,  # a Ctrl-C in the terminal is the service's to handle (it waits)
        )
    except OSError as exc:
        log.info("watchers not validated in a child process (%s); validating them here", exc)
        return False
    if done.returncode != 0:
        log.info("the child validating the watchers exited with %s; validating them here", done.returncode)
    return done.returncode == 0


def _kept_whole(content: bytes) -> bool:
    """Whether the cache may keep a watcher file of these bytes (a mention of a goal file, in a
    comment too, counts as one: its watchers are never kept)."""
    return keepable(content) and _GOAL_FILE not in content


def _writable(directory: Path) -> bool:
    """Whether ``directory``, or the nearest folder above it that exists, may be written."""
    for folder in (directory, *directory.parents):
        if folder.exists():
            return os.access(folder, os.W_OK | os.X_OK)
    return False


def main(argv: Sequence[str]) -> int:
    """The child: load the project at ``argv[0]`` as ``sentinel validate`` does."""
    from sentinel_hooks.config.loader import load_config
    from sentinel_hooks.errors import ConfigError

    try:
        load_config(Path(argv[0]), compiled=True)
    except ConfigError:
        return 1
    except Exception as exc:  # reported by the parent's own load, which will meet it too
        sys.stderr.write(f"sentinel: validating the watchers failed: {type(exc).__name__}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
