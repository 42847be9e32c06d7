"""Watcher conditions: the models users write (SPEC §4) and their evaluation.

A condition is checked once, when its watcher (or action-policy rule) is loaded: the path
parses, the value suits the operator, a ``matches`` pattern compiles with RE2 (and is kept
compiled). Evaluation is then a pure function of the observation and the previous observation
that never raises and never compiles. Each node compiles, on first use, into a
:data:`~sentinel_hooks.core.checks.Check` (its ``check``, cached on the instance), so the hot path
:func:`holds` reads no model attribute and may stop at the first deciding leaf;
:func:`evaluate` evaluates every leaf so ``sentinel test`` can show each condition's outcome.
Operator semantics live in :mod:`sentinel_hooks.core.operators`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import re2
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
)

from sentinel_hooks.core.checks import Check, group_check, leaf_check
from sentinel_hooks.core.operators import Searchable, as_number
from sentinel_hooks.core.paths import MISSING, parse_path, resolve

__all__ = [
    "AllGroup",
    "AnyGroup",
    "Condition",
    "ConditionNode",
    "ConditionResult",
    "Evaluation",
    "Op",
    "compile_pattern",
    "count_conditions",
    "evaluate",
    "evaluate_one",
    "holds",
]

Op = Literal[
    "eq",
    "neq",
    "gt",
    "gte",
    "lt",
    "lte",
    "exists",
    "absent",
    "contains",
    "matches",
    "changed",
    "in",
    "notIn",
    "startsWith",
    "endsWith",
]

_VALUELESS: Final = frozenset({"exists", "absent", "changed"})
_NUMERIC: Final = frozenset({"gt", "gte", "lt", "lte"})
_LIST_VALUED: Final = frozenset({"in", "notIn"})
_STRING_VALUED: Final = frozenset({"matches", "startsWith", "endsWith"})
_MODEL_CONFIG: Final = ConfigDict(
    frozen=True,
    extra="forbid",
    strict=True,
    populate_by_name=True,
    defer_build=True,  # built with the watcher model that holds them (ConditionNode is resolved then)
)


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Searchable:
    """Compile ``pattern`` with RE2 (linear time); ``ValueError`` naming the pattern and reason."""
    options = re2.Options()
    options.log_errors = False  # the reason goes into our error, not to stderr
    try:
        compiled: Searchable = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "cannot compile"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(f"invalid regular expression {pattern!r}: {reason}") from exc
    except UnicodeEncodeError as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: contains a lone surrogate") from exc
    return compiled


def _has_non_finite(value: Any) -> bool:
    """Whether ``value`` is or holds a float NaN or infinity (YAML's ``.nan``, ``.inf``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return False


class Condition(BaseModel):
    """``{path, op, value?}``: one test of the value at ``path``."""

    model_config = _MODEL_CONFIG

    path: str
    op: Op
    value: Any = Field(default=None, validate_default=True)

    @field_validator("path")
    @classmethod
    def _path_parses(cls, path: str) -> str:
        parse_path(path)
        return path

    @field_validator("value")
    @classmethod
    def _value_suits_op(cls, value: Any, info: ValidationInfo) -> Any:
        op = info.data.get("op")
        if op is None or op in _VALUELESS:  # op invalid (reported on its own) or value ignored
            return value
        if value is None:
            raise ValueError(f"op {op!r} requires a value")
        if _has_non_finite(value):
            raise ValueError(
                f"value {value!r} holds NaN or an infinity, which JSON cannot carry (and NaN equals "
                "nothing); compare with a finite number, or test the path with exists/absent"
            )
        if op in _NUMERIC and as_number(value) is None:
            raise ValueError(
                f"op {op!r} compares numbers: value must be a number or a numeric string "
                f"such as 42 or '42', got {value!r}"
            )
        if op in _LIST_VALUED and not isinstance(value, list | tuple):
            raise ValueError(f"op {op!r} requires a list value, got {type(value).__name__}")
        if op in _STRING_VALUED and not isinstance(value, str):
            raise ValueError(f"op {op!r} requires a string value, got {type(value).__name__}")
        if op == "matches":
            compile_pattern(value)
        return value

    @functools.cached_property
    def segments(self) -> tuple[str, ...]:
        """The parsed path (parsed at first use: a watcher that never polls never needs it)."""
        return parse_path(self.path)

    @functools.cached_property
    def pattern(self) -> Searchable | None:
        """The compiled RE2 pattern of a ``matches`` condition, else ``None`` (``compile_pattern``
        remembers what validation compiled)."""
        return compile_pattern(self.value) if self.op == "matches" and isinstance(self.value, str) else None

    @functools.cached_property
    def check(self) -> Check:
        """This condition compiled (once, on first use): ``(observation, previous)`` → bool."""
        return leaf_check(self.segments, self.op, self.value, self.pattern)


class AnyGroup(BaseModel):
    """``{any: [...]}``: true when at least one child is true."""

    model_config = _MODEL_CONFIG

    any: list[ConditionNode] = Field(min_length=1)

    @functools.cached_property
    def check(self) -> Check:
        """This group compiled (once, on first use): ``(observation, previous)`` → bool."""
        return group_check([child.check for child in self.any], any_of=True)


class AllGroup(BaseModel):
    """``{all: [...]}``: true when every child is true."""

    model_config = _MODEL_CONFIG

    all: list[ConditionNode] = Field(min_length=1)

    @functools.cached_property
    def check(self) -> Check:
        """This group compiled (once, on first use): ``(observation, previous)`` → bool."""
        return group_check([child.check for child in self.all], any_of=False)


def _node_tag(data: Any) -> str:
    """Which model a node is, so errors point into it (an unknown key is Condition's extra key)."""
    if isinstance(data, AnyGroup) or (isinstance(data, Mapping) and "any" in data):
        return "any"
    if isinstance(data, AllGroup) or (isinstance(data, Mapping) and "all" in data):
        return "all"
    return "condition"


ConditionNode = Annotated[
    Annotated[Condition, Tag("condition")]
    | Annotated[AnyGroup, Tag("any")]
    | Annotated[AllGroup, Tag("all")],
    Discriminator(_node_tag),
]
"""A condition or a nested ``any``/``all`` group, as written in a ``conditions`` list."""


def count_conditions(nodes: Sequence[ConditionNode]) -> int:
    """Number of leaf conditions in ``nodes``, counted inside groups at any depth (groups are not counted)."""
    count = 0
    pending: list[ConditionNode] = list(nodes)
    while pending:
        node = pending.pop()
        if isinstance(node, Condition):
            count += 1
        else:
            pending.extend(node.any if isinstance(node, AnyGroup) else node.all)
    return count


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


def evaluate_one(condition: Condition, observation: Any, previous: Any = MISSING) -> ConditionResult:
    """Evaluate one condition; ``previous`` is the watcher's previous observation or MISSING."""
    actual = resolve(observation, condition.segments)
    missing = actual is MISSING
    return ConditionResult(
        path=condition.path,
        op=condition.op,
        value=condition.value,
        actual=None if missing else actual,
        result=condition.check(observation, previous),
        missing=missing,
    )


def holds(
    nodes: Sequence[ConditionNode],
    match: Literal["all", "any"],
    observation: Any,
    previous: Any = MISSING,
) -> bool:
    """Whether ``nodes`` combined with ``match`` hold: :func:`evaluate`'s ``matched``, without the
    per-leaf results and stopping at the first deciding node. Never raises."""
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
    nodes: Sequence[ConditionNode],
    match: Literal["all", "any"],
    observation: Any,
    previous: Any = MISSING,
) -> Evaluation:
    """Combine ``nodes`` with ``match``; an empty list matches every observation. Never raises."""
    results: list[ConditionResult] = []
    outcomes = [_evaluate_node(node, observation, previous, results) for node in nodes]
    if not outcomes:
        return Evaluation(matched=True, results=results)
    matched = any(outcomes) if match == "any" else all(outcomes)
    return Evaluation(matched=matched, results=results)


def _evaluate_node(
    node: ConditionNode, observation: Any, previous: Any, results: list[ConditionResult]
) -> bool:
    """Evaluate a node, appending its leaves' results; every child is evaluated."""
    if isinstance(node, Condition):
        outcome = evaluate_one(node, observation, previous)
        results.append(outcome)
        return outcome.result
    children = node.any if isinstance(node, AnyGroup) else node.all
    # A list, not a generator: every child is evaluated so every leaf is reported.
    outcomes = [_evaluate_node(child, observation, previous, results) for child in children]
    return any(outcomes) if isinstance(node, AnyGroup) else all(outcomes)
