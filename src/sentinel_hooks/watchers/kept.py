"""Values made once per object and kept by its identity (``KeptByIdentity``), for what a fire
derives from its watcher spec and the service config: a reloaded watcher is a new spec, so it
gets a new value, and a kept value holds its objects, so their ids cannot be reused meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class KeptByIdentity(Generic[V]):
    """At most ``kept`` values, each made by ``make`` for a tuple of objects (all forgotten when
    full: a process has far fewer live watchers than a bound worth keeping an order for)."""

    def __init__(self, kept: int = 10_000) -> None:
        self._kept_max = kept
        self._kept: dict[tuple[int, ...], tuple[tuple[object, ...], V]] = {}

    def get(self, objects: tuple[object, ...], make: Callable[[], V]) -> V:
        key = tuple(map(id, objects))
        found = self._kept.get(key)
        if found is not None and all(a is b for a, b in zip(found[0], objects, strict=True)):
            return found[1]
        value = make()
        if len(self._kept) >= self._kept_max:
            self._kept.clear()
        self._kept[key] = (objects, value)
        return value
