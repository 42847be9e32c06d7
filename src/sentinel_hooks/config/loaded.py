"""A validated watcher as a project's load gives it: its spec, the data it was read from, its place.

Only the API's definition of a watcher and a reload's comparison read the data, never a poll,
and a million loaded watchers are kept: so the data is kept pickled (about 200 bytes; as a dict
it was 1.4 KB), and a watcher read from the compiled cache does not even hold that: the data of
up to ``KEPT_ROWS`` of them is one compressed object (``KeptData``) with a digest of each
watcher's data for the comparison: about 27 bytes a watcher, the digest included (issue 34.5:
memory per idle watcher).
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sentinel_hooks.config.watcher import AnyWatcher

KEPT_ROWS = 256  # watchers per ``KeptData``: each one's place in it is a small int, shared by all
DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class WatcherSource:
    """Where a watcher was defined."""

    file: str
    line: int | None


class KeptData:
    """The pickled data of up to ``KEPT_ROWS`` watchers, compressed as one, and each one's digest.

    Compressed together, the data of watchers written alike (the same keys, much the same
    values) takes about a tenth of its pickles. It is made when the compiled cache is written
    and read back with the cache's chunk; a watcher's data is decompressed when asked for
    (``packed``), the latest few kept decompressed, since whoever asks for one often asks for
    its neighbours next (a cache written again goes through them in order).
    """

    __slots__ = ("blob", "digests")

    def __init__(self, blob: bytes, digests: bytes) -> None:
        self.blob = blob
        self.digests = digests

    @classmethod
    def of(cls, packed: Sequence[bytes]) -> KeptData:
        """The data of watchers whose data pickled to ``packed``, in that order."""
        if len(packed) > KEPT_ROWS:
            raise ValueError(f"{len(packed)} watchers' data in one KeptData; at most {KEPT_ROWS}")
        blob = zlib.compress(pickle.dumps(list(packed), protocol=pickle.HIGHEST_PROTOCOL), 1)
        return cls(blob, b"".join(map(digest_of, packed)))

    def __len__(self) -> int:
        return len(self.digests) // DIGEST_BYTES

    def packed(self, at: int) -> bytes:
        """The pickled data of the watcher at ``at``."""
        return _unpacked(self)[at]

    def digest(self, at: int) -> bytes:
        return self.digests[at * DIGEST_BYTES : (at + 1) * DIGEST_BYTES]

    def __reduce__(self) -> tuple[Any, tuple[bytes, bytes]]:
        return KeptData, (self.blob, self.digests)


@functools.lru_cache(maxsize=8)
def _unpacked(kept: KeptData) -> list[bytes]:
    found: list[bytes] = pickle.loads(zlib.decompress(kept.blob))  # our own bytes, made by ``of``
    return found


def digest_of(packed: bytes) -> bytes:
    return hashlib.blake2b(packed, digest_size=DIGEST_BYTES).digest()


@dataclass(frozen=True, slots=True)
class LoadedWatcher:
    """A validated watcher, the interpolated data it came from, and its place.

    ``data`` is the data pickled, or the ``KeptData`` holding it at ``at``. The place is kept
    as its parts (``source`` makes a ``WatcherSource`` of them: one object less a watcher).
    Slotted: no dict of attributes."""

    spec: AnyWatcher
    data: bytes | KeptData
    file: str
    line: int | None
    at: int = 0

    @classmethod
    def of(cls, spec: AnyWatcher, raw: Mapping[str, Any], source: WatcherSource) -> LoadedWatcher:
        """``spec`` loaded from ``raw`` (a JSON-like mapping), defined at ``source``."""
        return cls(spec, pickle.dumps(raw, protocol=pickle.HIGHEST_PROTOCOL), source.file, source.line)

    @property
    def source(self) -> WatcherSource:
        return WatcherSource(self.file, self.line)

    @property
    def packed(self) -> bytes:
        """The data, pickled."""
        data = self.data
        return data if isinstance(data, bytes) else data.packed(self.at)

    def digest(self) -> bytes:
        data = self.data
        return digest_of(data) if isinstance(data, bytes) else data.digest(self.at)

    @property
    def raw(self) -> dict[str, Any]:
        """The data the watcher was loaded from (a fresh copy)."""
        data: dict[str, Any] = pickle.loads(self.packed)  # our own bytes, made by ``of``
        return data

    def same_data(self, other: LoadedWatcher) -> bool:
        """Whether both were loaded from equal data (a reload restarts a watcher whose data
        changed): equal pickles (compared as bytes, or by their digests where one is kept), or
        else equal dicts, so that keys written in another order, which pickle differently, are
        no change."""
        mine, theirs = self.data, other.data
        if isinstance(mine, bytes) and isinstance(theirs, bytes):
            same = mine == theirs
        else:
            same = self.digest() == other.digest()
        return same or self.raw == other.raw
