"""Values that a million watchers hold alike, kept once: empty lists and dicts, and numbers.

A watcher left without ``headers``, ``tags`` or ``deliveryTargets`` held an empty dict and two
empty lists of its own (176 bytes), and its ``intervalMs`` and ``timeoutMs`` two int objects
(56 bytes): more than a tenth of what an idle watcher holds (issue 34.5). A watcher's fields
are read-only (its model is frozen), but a list or dict in them could still be changed in
place, and a shared one would change every watcher's: so the shared empties refuse to be
changed (``TypeError``), and pickle as the one instance, so the compiled cache gives it back.
Everything else about them is a list's or a dict's (pydantic, ``json``, equality, copies).
"""

from __future__ import annotations

import functools
from typing import Any, NoReturn

NUMBERS_MAX = 4096  # distinct ints kept: intervals and timeouts are few; a bound all the same


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError("a watcher's fields are read-only: copy the value to change it")


class EmptyList(list[Any]):
    """The one empty list that watchers share; changing it raises ``TypeError``."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _empty_list, ()


class EmptyDict(dict[Any, Any]):
    """The one empty dict that watchers share; changing it raises ``TypeError``."""

    __slots__ = ()
    update = pop = popitem = clear = setdefault = _refuse
    __setitem__ = __delitem__ = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _empty_dict, ()


EMPTY_LIST = EmptyList()
EMPTY_DICT = EmptyDict()


def _empty_list() -> EmptyList:
    return EMPTY_LIST


def _empty_dict() -> EmptyDict:
    return EMPTY_DICT


@functools.lru_cache(maxsize=NUMBERS_MAX)
def _number(value: int) -> int:
    """The first int equal to ``value`` asked for (of those still remembered)."""
    return value


def shared_value(value: Any) -> Any:
    """An equal value that other watchers may hold too: the shared empty list or dict for an
    empty one, the first int of its value seen; anything else is ``value`` itself."""
    kind = type(value)
    if kind is int:
        return _number(value)
    if kind is list and not value:
        return EMPTY_LIST
    if kind is dict and not value:
        return EMPTY_DICT
    return value
