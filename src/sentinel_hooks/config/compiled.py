"""The compiled cache of watcher files: what a project's watchers validated to, kept for the next load.

Reading and validating a watcher costs 60 to 110 µs (libyaml's events, pydantic, the checks against
sentinel.yaml), so a million take minutes; reading them back from the cache about 9 µs.
``sentinel validate`` and ``sentinel run`` write it (``.sentinel/watchers.cache`` beside
sentinel.yaml, or in ``$SENTINEL_STATE_DIR``) and use it; other commands, the tests and a reload
read the files.

What is kept, and when it is used:

* a watcher file's watchers are kept when the file loaded without a problem, its text holds no
  ``${env:`` and no backslash (so no value came from the environment: no secret from it is written
  to disk, and a changed variable cannot be missed), and none of its watchers names an
  ``operatorGoalFile`` (a file the checks look for, which could go away);
* they are used for a file whose path and bytes are the ones kept, loaded under the same
  context: Sentinel's version and source code, Python's version, the project directory, the
  skills' names and sentinel.yaml as validated (its JSON, in which pydantic masks every
  ``SecretStr``), hashed. Anything else is read as usual, so a hit gives exactly what reading
  would: those watchers validated before, from the same bytes, against the same settings, and
  every problem is still reported with its file and line (a file with a problem is never kept).

The checks across files (duplicate ids, shared ping keys, ``limits.maxWatchers``) run on every
load. The cache is a pickle, which runs code when read: it is only read when the file and its
directory belong to this user and no one else may write them, the trust the store's files
beside it already need. It is written to a temporary file and renamed, mode 0600; any failure to
read or write it only means the files are read.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sentinel_hooks
from sentinel_hooks import __version__
from sentinel_hooks.config.service import ServiceConfig

log = logging.getLogger(__name__)

CACHE_NAME = "watchers.cache"
FORMAT = 1  # raise when what is pickled changes shape
_UNSAFE_BYTES = (b"${env:", b"\\")  # a value may come from the environment (see the docstring)

Row = tuple[Any, dict[str, Any], int | None]
"""One kept watcher: its spec, its data as read, its line (``LoadedWatcher`` without the file)."""


def cache_file(config_file: Path, environ: Mapping[str, str]) -> Path:
    """Where the compiled cache of the project ``config_file`` heads lives: ``$SENTINEL_STATE_DIR``
    when set (a container mounts the project read-only, its state directory writable), else
    ``.sentinel/`` beside ``config_file``."""
    state_dir = environ.get("SENTINEL_STATE_DIR")
    return (Path(state_dir) if state_dir else config_file.parent / ".sentinel") / CACHE_NAME


def context_digest(service: ServiceConfig, skills: Sequence[str], base_dir: Path) -> str:
    """What, besides a file's bytes, its validation depended on (see the module docstring)."""
    parts = [
        f"format {FORMAT}",
        f"sentinel {__version__} {_code_digest()}",
        f"python {sys.version}",
        f"base {base_dir}",
        "skills " + "\0".join(sorted(skills)),
        service.model_dump_json(),
    ]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def _code_digest() -> str:
    """A digest of Sentinel's own source: pickled models are only read back by the code that
    wrote them (a development checkout keeps its version number while its models change)."""
    package = Path(sentinel_hooks.__file__).parent
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*.py")):
        digest.update(str(source.relative_to(package)).encode("utf-8", "surrogatepass") + b"\0")
        digest.update(source.read_bytes())
    return digest.hexdigest()


@dataclass
class CompiledCache:
    """The kept files of one project under one context, and those to keep after this load."""

    path: Path
    context: str
    kept: Mapping[str, tuple[str, list[Row]]] = field(default_factory=dict)
    fresh: dict[str, tuple[str, list[Row]]] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def open(cls, path: Path, context: str) -> CompiledCache:
        """The cache at ``path`` if it is safe to read and was written under ``context``."""
        kept: Mapping[str, tuple[str, list[Row]]] = {}
        try:
            if _trusted(path):
                with path.open("rb") as handle:
                    stored = pickle.load(handle)  # our own file, checked by _trusted
                if isinstance(stored, dict) and stored.get("context") == context:
                    kept = stored["files"]
        except FileNotFoundError:
            pass
        except Exception as exc:  # any damage to the cache only means a full read
            log.info("compiled cache %s not used (%s: %s); the files are read", path, type(exc).__name__, exc)
        return cls(path, context, kept)

    def digest(self, content: bytes) -> str:
        return hashlib.sha256(content).hexdigest()

    def rows(self, file: Path, content: bytes) -> list[Row] | None:
        """The kept rows of ``file`` (an absolute path) with these bytes, or None."""
        found = self.kept.get(str(file))
        if found is None or found[0] != self.digest(content):
            return None
        self.fresh[str(file)] = found
        return found[1]

    def keep(self, file: Path, content: bytes, rows: list[Row], *, clean: bool) -> None:
        """Remember ``file`` just read, if it may be kept (``clean``: it had no problem)."""
        self.changed = True
        if clean and not any(marker in content for marker in _UNSAFE_BYTES):
            self.fresh[str(file)] = (self.digest(content), rows)

    def save(self) -> None:
        """Write what this load read or used, when it differs from what was kept."""
        if not self.changed and len(self.fresh) == len(self.kept):
            return
        try:
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                pickle.dump({"context": self.context, "files": self.fresh}, handle, protocol=5)
            os.replace(temporary, self.path)
        except Exception as exc:  # a cache that cannot be written is no error
            log.info("compiled cache %s not written (%s: %s)", self.path, type(exc).__name__, exc)


def _trusted(path: Path) -> bool:
    """Whether ``path`` and its directory are this user's and writable by no one else."""
    for each in (path.parent, path):
        info = each.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            return False
    return True
