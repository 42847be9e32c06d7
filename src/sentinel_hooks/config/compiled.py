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

Inside, each file's watchers are kept in the order of their phases (``core.phase``), in pickled
chunks of up to ``CHUNK_ROWS`` of one interval, followed by an index (each file's digest and
chunks, with the interval and the phases each chunk spans) and the index's offset. ``sentinel
run`` of a project the cache covers whole (``covers``) reads the chunks one at a time, those
polling soonest first, and starts each before reading the next (``config.loader.load_streamed``):
the first polls go out while a million watchers are still being read.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import pickle
import stat
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import sentinel_hooks
from sentinel_hooks import __version__
from sentinel_hooks.config.loaded import KEPT_ROWS, KeptData
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import Scheduled
from sentinel_hooks.core.phase import phase_us

log = logging.getLogger(__name__)

CACHE_NAME = "watchers.cache"
FORMAT = 4  # raise when what is pickled changes shape (4: watchers' data kept compressed together)
CHUNK_ROWS = 1000  # watchers per pickled chunk: about 15 ms to read, the start's unit of streaming
_UNSAFE_BYTES = (b"${env:", b"\\")  # a value may come from the environment (see the docstring)
_TRAILER = struct.Struct("<Q")  # the index's offset, the file's last bytes

Row = tuple[Any, bytes | KeptData, int | None, int]
"""One kept watcher: its spec, its data as read (pickled, or the ``KeptData`` holding it), its
line and its place in that ``KeptData`` (``LoadedWatcher`` without the file)."""
ChunkKey = tuple[int, int, int] | None
"""When a chunk's watchers poll: their interval and the first and last phase, in µs; None when
they are not on an interval."""
Chunk = tuple[int, ChunkKey]
"""Where a chunk starts in the cache, and its key."""


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
    """The kept files of one project under one context, and those to keep after this load.

    ``kept`` is the index read at ``open``; the chunks are read when asked for, from ``handle``
    (kept open until ``close``)."""

    path: Path
    context: str
    kept: Mapping[str, tuple[str, list[Chunk]]] = field(default_factory=dict)
    fresh: dict[str, tuple[str, list[Row]]] = field(default_factory=dict)
    changed: bool = False
    handle: BinaryIO | None = None

    @classmethod
    def open(cls, path: Path, context: str) -> CompiledCache:
        """The cache at ``path`` if it is safe to read and was written under ``context``."""
        try:
            if _trusted(path):
                handle = path.open("rb")
                try:
                    stored = _index(handle)
                except BaseException:
                    handle.close()
                    raise
                if isinstance(stored, dict) and stored.get("context") == context:
                    return cls(path, context, stored["files"], handle=handle)
                handle.close()
        except FileNotFoundError:
            pass
        except Exception as exc:  # any damage to the cache only means a full read
            log.info("compiled cache %s not used (%s: %s); the files are read", path, type(exc).__name__, exc)
        return cls(path, context)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def digest(self, content: bytes) -> str:
        return hashlib.sha256(content).hexdigest()

    def covers(self, files: Sequence[Path]) -> bool:
        """Whether the cache keeps exactly ``files`` (absolute paths), each with its bytes now:
        then this project loaded without a problem when the cache was written, checks across
        files included, and every watcher can be taken from it (``chunk``)."""
        if len(files) != len(self.kept) or self.handle is None:
            return False
        try:
            return all(self.matches(file, file.read_bytes()) for file in files)
        except OSError:
            return False

    def matches(self, file: Path, content: bytes) -> bool:
        found = self.kept.get(str(file))
        return found is not None and found[0] == self.digest(content)

    def chunks(self, file: Path) -> list[Chunk]:
        """The kept chunks of ``file``, in the order of their phases."""
        return self.kept[str(file)][1]

    def chunk(self, offset: int) -> list[Row]:
        """The rows of the chunk at ``offset`` (raises on a damaged or closed cache)."""
        if self.handle is None:
            raise ValueError("the compiled cache is closed")
        self.handle.seek(offset)
        rows: list[Row] = pickle.load(self.handle)  # our own file, checked by _trusted
        return rows

    def rows(self, file: Path, content: bytes) -> list[Row] | None:
        """The kept rows of ``file`` (an absolute path) with these bytes, in file order, or None."""
        if not self.matches(file, content):
            return None
        found = self.kept[str(file)]
        try:
            rows = [row for offset, _ in found[1] for row in self.chunk(offset)]
        except Exception as exc:  # a damaged chunk only means the file is read
            log.info("compiled cache %s not used for %s (%s: %s)", self.path, file, type(exc).__name__, exc)
            return None
        rows.sort(key=_line)  # kept in the order of phases
        self.fresh[str(file)] = (found[0], rows)
        return rows

    def keep(self, file: Path, content: bytes, rows: list[Row], *, clean: bool) -> None:
        """Remember ``file`` just read, if it may be kept (``clean``: it had no problem)."""
        self.changed = True
        if clean and keepable(content):
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
                files = {
                    name: (digest, _write_chunks(handle, rows)) for name, (digest, rows) in self.fresh.items()
                }
                offset = handle.tell()
                pickle.dump({"context": self.context, "files": files}, handle, protocol=5)
                handle.write(_TRAILER.pack(offset))
            os.replace(temporary, self.path)
        except Exception as exc:  # a cache that cannot be written is no error
            log.info("compiled cache %s not written (%s: %s)", self.path, type(exc).__name__, exc)


def keepable(content: bytes) -> bool:
    """Whether no value in a watcher file of these bytes can come from the environment: then it
    is kept once it loaded without a problem, unless a watcher of it names an
    ``operatorGoalFile`` (see the module docstring)."""
    return not any(marker in content for marker in _UNSAFE_BYTES)


def until_due(key: ChunkKey, now_us: int) -> int:
    """µs from ``now_us`` (since the epoch) until the first watcher of the chunk of ``key`` polls
    that has not passed its phase: 0 when its phases span ``now_us``; -1 (first of all) when it
    is not on an interval. The order to start chunks in."""
    if key is None:
        return -1
    interval_us, first, last = key
    to_first, to_last = (first - now_us) % interval_us, (last - now_us) % interval_us
    return 0 if to_last < to_first else to_first


def _write_chunks(handle: BinaryIO, rows: list[Row]) -> list[Chunk]:
    """Write ``rows`` in the order of their phases, in chunks of at most ``CHUNK_ROWS`` watchers
    of one interval (or none: cron, streams, webhooks); their index."""
    keyed = sorted(((_interval_phase(row[0]), row) for row in rows), key=_phase_order)
    chunks: list[Chunk] = []
    for _, group in itertools.groupby(keyed, key=lambda pair: None if pair[0] is None else pair[0][0]):
        part = list(group)
        for begin in range(0, len(part), CHUNK_ROWS):
            piece = part[begin : begin + CHUNK_ROWS]
            first, last = piece[0][0], piece[-1][0]
            key = None if first is None or last is None else (first[0], first[1], last[1])
            chunks.append((handle.tell(), key))
            pickle.dump(_with_kept_data([row for _, row in piece]), handle, protocol=5)
    return chunks


def _with_kept_data(rows: list[Row]) -> list[Row]:
    """``rows`` with their data in ``KeptData`` objects of up to ``KEPT_ROWS`` rows each; a
    group that is one ``KeptData`` read from the cache in its order already is kept as it is."""
    written: list[Row] = []
    for begin in range(0, len(rows), KEPT_ROWS):
        group = rows[begin : begin + KEPT_ROWS]
        first = group[0][1]
        same = isinstance(first, KeptData) and len(first) == len(group)
        if not (same and all(row[1] is first and row[3] == at for at, row in enumerate(group))):
            first = KeptData.of([_packed(row) for row in group])
        written.extend((spec, first, line, at) for at, (spec, _, line, _) in enumerate(group))
    return written


def _packed(row: Row) -> bytes:
    data = row[1]
    return data if isinstance(data, bytes) else data.packed(row[3])


def _interval_phase(spec: Any) -> tuple[int, int] | None:
    """(interval, phase) in µs of an interval-scheduled watcher, else None."""
    if not isinstance(spec, Scheduled) or spec.schedule is not None:
        return None
    interval_us = max(1, (spec.interval_ms or 1000) * 1000)
    return interval_us, phase_us(spec.id, interval_us)


def _phase_order(pair: tuple[tuple[int, int] | None, Row]) -> tuple[int, int]:
    """Watchers not on an interval first, then by interval and phase."""
    return (-1, 0) if pair[0] is None else pair[0]


def _line(row: Row) -> int:
    return row[2] or 0


def _index(handle: BinaryIO) -> Any:
    """The index at the end of an open cache file (raises on a damaged one)."""
    handle.seek(-_TRAILER.size, os.SEEK_END)
    (offset,) = _TRAILER.unpack(handle.read(_TRAILER.size))
    handle.seek(offset)
    return pickle.load(handle)  # our own file, checked by _trusted


def _trusted(path: Path) -> bool:
    """Whether ``path`` and its directory are this user's and writable by no one else."""
    for each in (path.parent, path):
        info = each.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            return False
    return True
