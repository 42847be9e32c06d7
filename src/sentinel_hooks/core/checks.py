"""What a watcher's conditions mean (SPEC §4), and the one place that says it.

:mod:`~sentinel_hooks.core.conditions` holds what users write (the models, checked at load);
each node compiles itself, once, with the functions here into a :data:`Check`, a plain function
of ``(observation, previous)`` to ``bool``, and a :data:`Trace` that also reports every leaf.
A check holds all the evaluation needs: the path as prepared ``(key, index)`` steps, the
operator specialised to its value (a set for an ``in`` list of strings, the value's exact
number for ``gt``), the RE2 program of a ``matches``. Evaluation then reads no model attribute
and builds no result objects. :func:`holds` is what the firing pipeline asks on every
observation; :func:`evaluate` reports each leaf's outcome too (``sentinel test``, the action
policy's rules).

The value comparisons come from :mod:`sentinel_hooks.core.operators` (JSON equality, exact
numbers, RE2 search, change); the fast paths here are exact shortcuts of them, each with the
reason it is exact next to it. ``tests/core/test_checks.py`` holds every check to a plain
reading of SPEC §4 on random conditions and observations.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from sentinel_hooks.canonical import compare_numbers, to_number
from sentinel_hooks.core.operators import (
    Searchable,
    as_number,
    changed,
    json_equal,
    regex_search,
)
from sentinel_hooks.core.paths import MISSING, is_index

__all__ = [
    "Check",
    "Compiled",
    "ConditionResult",
    "Evaluation",
    "MatchMode",
    "Trace",
    "evaluate",
    "group_check",
    "group_trace",
    "holds",
    "leaf_check",
    "leaf_trace",
    "resolver",
    "searcher",
    "value_test",
]

Check = Callable[[Any, Any], bool]
"""A compiled condition or group: ``(observation, previous)`` → whether it holds; never raises."""

MatchMode = Literal["all", "any"]
"""How a list of conditions combines: every one holds, or at least one."""

Test = Callable[[Any], bool]
"""A value operator bound to its value: the resolved value (or MISSING) → the outcome."""

# Below 2**53 every int is exactly a float, and then comparing it with a float the Python way
# orders it as comparing it with the float's shortest decimal (the value operators' reading of a
# float): a float and the decimal it prints as lie on the same side of every float.
_EXACT_FLOAT_INT: Final = 2**53
# Where changing types could differ from a comparison of canonical JSON, it is used instead:
# for two values of one of these exact types, canonical JSON differs exactly when the values do.
_PLAIN_TYPES: Final = frozenset({str, int, bool, type(None)})
_SEQUENCES: Final = (list, tuple)


def _steps(segments: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """Each segment with the array index it stands for (-1: it indexes no array)."""
    return tuple((segment, int(segment) if is_index(segment) else -1) for segment in segments)


def resolver(segments: Sequence[str]) -> Callable[[Any], Any]:
    """:func:`~sentinel_hooks.core.paths.resolve` for one path, its segments prepared once."""
    steps = _steps(segments)

    def resolve(data: Any) -> Any:
        current = data
        for key, index in steps:
            if isinstance(current, dict):
                current = current.get(key, MISSING)
                if current is MISSING:
                    return MISSING
            elif index >= 0 and isinstance(current, _SEQUENCES):
                if index >= len(current):
                    return MISSING
                current = current[index]
            else:
                return MISSING
        return current

    return resolve


def searcher(pattern: Searchable | None) -> Test:
    """:func:`~sentinel_hooks.core.operators.regex_search` for one compiled pattern."""
    if pattern is None:
        return _never
    return functools.partial(regex_search, pattern)


def _never(_: Any) -> bool:
    return False


def _exists(actual: Any) -> bool:
    return actual is not MISSING and actual is not None


def _absent(actual: Any) -> bool:
    return actual is MISSING or actual is None


def _fast_number(value: Any) -> int | float | None:
    """``value`` as an int or finite float that compares exactly like its exact number, if any."""
    if type(value) is int:
        return value
    if type(value) is float:
        return value if math.isfinite(value) else None
    number = as_number(value)
    if number is None:
        return None
    try:
        candidate = float(value)
    except (ValueError, TypeError, OverflowError):  # pragma: no cover - a JSON number always converts
        return None
    return candidate if math.isfinite(candidate) and to_number(candidate) == number else None


def _compared(value: Any, accept: Callable[[Any, Any], bool]) -> Test:
    """``actual`` → whether it and ``value`` are numbers (or numeric strings) and
    ``accept(actual, value)`` holds of them (``operator.gt`` and co.); compared exactly."""
    exact = as_number(value)
    if exact is None:
        return _never
    fast = _fast_number(value)
    # When Python's own comparison of an int or a float with ``fast`` is exact (see
    # _EXACT_FLOAT_INT): a float with a float or a small int; an int with an int, or with a
    # float when the int is small.
    with_float = fast is not None and (type(fast) is float or -_EXACT_FLOAT_INT <= fast <= _EXACT_FLOAT_INT)
    with_any_int = type(fast) is int
    with_small_int = type(fast) is float

    def compare(actual: Any) -> bool:
        kind = type(actual)
        if kind is float and with_float:
            return math.isfinite(actual) and accept(actual, fast)  # NaN and infinities: no number
        if kind is int and (
            with_any_int or (with_small_int and -_EXACT_FLOAT_INT <= actual <= _EXACT_FLOAT_INT)
        ):
            return accept(actual, fast)
        left = as_number(actual)
        return left is not None and accept(compare_numbers(left, exact), 0)

    return compare


def _equal_to(value: Any) -> Test:
    """``actual`` → :func:`~sentinel_hooks.core.operators.json_equal` ``(actual, value)``."""
    if isinstance(value, str):  # both strings, then plain string equality
        return lambda actual: isinstance(actual, str) and actual == value
    if isinstance(value, bool):
        return lambda actual: actual is value
    if value is None:
        return lambda actual: actual is None
    if _fast_number(value) is not None and to_number(value) is not None:
        same = _compared(value, operator.eq)
        # Only numbers equal numbers: a numeric string is a string, a bool is no number.
        return lambda actual: not isinstance(actual, str | bool) and same(actual)
    return lambda actual: json_equal(actual, value)


def _in(members: Sequence[Any]) -> Test:
    """``actual`` equals (by ``eq``) a member of ``members``."""
    if all(type(member) is str for member in members):
        strings = frozenset(members)
        # A str equals exactly the equal str members; anything else (a str subclass) the long way.
        return lambda actual: (
            actual in strings
            if type(actual) is str
            else isinstance(actual, str) and _any_equal(actual, members)
        )
    tests = tuple(_equal_to(member) for member in members)
    return lambda actual: any(test(actual) for test in tests)


def _any_equal(actual: Any, members: Sequence[Any]) -> bool:
    return any(json_equal(actual, member) for member in members)


def _contains(value: Any) -> Test:
    """Substring of a string, member of an array (by ``eq``), key of an object."""
    equal = _equal_to(value)
    is_text = isinstance(value, str)

    def contains(actual: Any) -> bool:
        if isinstance(actual, str):
            return is_text and value in actual
        if isinstance(actual, _SEQUENCES):
            return any(equal(member) for member in actual)
        if isinstance(actual, dict):
            return is_text and value in actual
        return False

    return contains


def _affix(value: Any, *, start: bool) -> Test:
    """``startsWith`` / ``endsWith``: strings only."""
    if not isinstance(value, str):
        return _never
    if start:
        return lambda actual: isinstance(actual, str) and actual.startswith(value)
    return lambda actual: isinstance(actual, str) and actual.endswith(value)


def value_test(op: str, value: Any) -> Test:
    """The value operator ``op`` (every op but ``matches`` and ``changed``) bound to ``value``;
    an unknown operator is always false."""
    if op in ("eq", "neq"):
        equal = _equal_to(value)
        return equal if op == "eq" else lambda actual: not equal(actual)
    if op in _ORDERS:
        return _compared(value, _ORDERS[op])
    if op in ("in", "notIn"):
        if not isinstance(value, list | tuple):
            return _never if op == "in" else lambda _: True
        member = _in(value)
        return member if op == "in" else lambda actual: not member(actual)
    if op == "startsWith" or op == "endsWith":
        return _affix(value, start=op == "startsWith")
    if op == "contains":
        return _contains(value)
    return _PRESENCE.get(op, _never)


_ORDERS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
_PRESENCE: Final[dict[str, Test]] = {"exists": _exists, "absent": _absent}


def leaf_check(segments: Sequence[str], op: str, value: Any, pattern: Searchable | None) -> Check:
    """One condition ``{path, op, value}`` (``segments`` parsed, ``pattern`` compiled) as a check."""
    resolve = resolver(segments)
    if op == "changed":

        def differs(observation: Any, previous: Any) -> bool:
            if previous is MISSING:  # the first observation only sets the baseline
                return False
            now, before = resolve(observation), resolve(previous)
            kind = type(now)
            if kind is type(before) and kind in _PLAIN_TYPES:
                return bool(now != before)
            return changed(now, before)

        return differs
    test = searcher(pattern) if op == "matches" else value_test(op, value)
    steps = _steps(segments)

    def check(observation: Any, _previous: Any) -> bool:
        current = observation  # resolver()'s walk, inline: this runs for every leaf of every poll
        for key, index in steps:
            if isinstance(current, dict):
                current = current.get(key, MISSING)
                if current is MISSING:
                    break
            elif index >= 0 and isinstance(current, _SEQUENCES):
                if index >= len(current):
                    current = MISSING
                    break
                current = current[index]
            else:
                current = MISSING
                break
        return test(current)

    return check


def group_check(children: Sequence[Check], *, any_of: bool) -> Check:
    """``any`` (one child holds) or ``all`` (every child holds) of ``children``; stops early,
    which changes nothing: checks are pure and never raise."""
    parts = tuple(children)
    if any_of:

        def any_check(observation: Any, previous: Any) -> bool:
            for part in parts:  # noqa: SIM110 - a loop: any() would build a generator per call
                if part(observation, previous):
                    return True
            return False

        return any_check

    def all_check(observation: Any, previous: Any) -> bool:
        for part in parts:  # noqa: SIM110 - a loop: all() would build a generator per call
            if not part(observation, previous):
                return False
        return True

    return all_check


@dataclass(frozen=True)
class ConditionResult:
    """The outcome of one leaf condition; ``actual`` is None (and ``missing`` True) when absent."""

    path: str
    op: str
    value: Any
    actual: Any
    result: bool
    missing: bool = False


@dataclass(frozen=True)
class Evaluation:
    """Whether the conditions matched, and every leaf's result in document order."""

    matched: bool
    results: list[ConditionResult]


Trace = Callable[[Any, Any, list[ConditionResult]], bool]
"""A compiled condition or group that evaluates every leaf below it, appending each leaf's result
(in document order) to the list it is given: ``(observation, previous, results)`` → its outcome."""


def leaf_trace(path: str, op: str, value: Any, segments: Sequence[str], check: Check) -> Trace:
    """The condition ``{path, op, value}`` (``segments`` parsed, ``check`` its compiled check)
    as a trace: its result, with the value it found at ``path``."""
    resolve = resolver(segments)

    def trace(observation: Any, previous: Any, results: list[ConditionResult]) -> bool:
        actual = resolve(observation)
        missing = actual is MISSING
        outcome = check(observation, previous)
        results.append(ConditionResult(path, op, value, None if missing else actual, outcome, missing))
        return outcome

    return trace


def group_trace(children: Sequence[Trace], *, any_of: bool) -> Trace:
    """``any`` or ``all`` of ``children``, as :func:`group_check` decides it, every child evaluated
    (so every leaf is reported)."""
    parts = tuple(children)

    def trace(observation: Any, previous: Any, results: list[ConditionResult]) -> bool:
        outcomes = [part(observation, previous, results) for part in parts]  # a list: no early stop
        return _combined(outcomes, any_of=any_of)

    return trace


class Compiled(Protocol):
    """A condition or a group, as written, that compiles itself (``core.conditions``' models)."""

    @property
    def check(self) -> Check: ...

    @property
    def trace(self) -> Trace: ...


def holds(nodes: Sequence[Compiled], match: MatchMode, observation: Any, previous: Any = MISSING) -> bool:
    """Whether ``nodes`` combined with ``match`` hold: :func:`evaluate`'s ``matched``, without the
    per-leaf results and stopping at the first deciding node. Never raises.

    A group of ``nodes`` as :func:`group_check` makes one, but over a list the caller keeps (a
    watcher's ``conditions``), so nothing is built per call; an empty list holds.
    """
    if match == "any":
        for node in nodes:
            if node.check(observation, previous):
                return True
        return not nodes  # an empty list matches every observation
    for node in nodes:  # noqa: SIM110 - a loop: all() would build a generator per call
        if not node.check(observation, previous):
            return False
    return True


def evaluate(
    nodes: Sequence[Compiled], match: MatchMode, observation: Any, previous: Any = MISSING
) -> Evaluation:
    """Combine ``nodes`` with ``match``, reporting every leaf; an empty list matches every
    observation. Never raises."""
    results: list[ConditionResult] = []
    outcomes = [node.trace(observation, previous, results) for node in nodes]
    matched = _combined(outcomes, any_of=match == "any") if outcomes else True
    return Evaluation(matched=matched, results=results)


def _combined(outcomes: list[bool], *, any_of: bool) -> bool:
    return any(outcomes) if any_of else all(outcomes)
