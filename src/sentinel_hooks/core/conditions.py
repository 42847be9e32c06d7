"""Watcher conditions as users write them (SPEC §4): the models, checked when loaded.

A condition is checked once, when its watcher (or action-policy rule, or silence) is loaded:
the path parses, the value suits the operator, a ``matches`` pattern compiles with RE2 (and is
kept compiled). What a condition means is :mod:`sentinel_hooks.core.checks`' alone: each node
compiles itself with it, on first use, into a ``check`` and a ``trace`` (cached on the
instance), which :func:`~sentinel_hooks.core.checks.holds` and
:func:`~sentinel_hooks.core.checks.evaluate` run. Evaluation is then a pure function of the
observation and the previous observation that never raises and never compiles.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
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

from sentinel_hooks.core.checks import Check, Trace, group_check, group_trace, leaf_check, leaf_trace
from sentinel_hooks.core.operators import Searchable, as_number
from sentinel_hooks.core.paths import parse_path

__all__ = [
    "AllGroup",
    "AnyGroup",
    "Condition",
    "ConditionNode",
    "Op",
    "compile_pattern",
    "count_conditions",
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


class _CompiledOnUse(BaseModel):
    """A condition node whose compiled forms (``functools.cached_property``, kept in the
    instance's ``__dict__`` beside its fields) are made on first use. They are closures, which
    pickle cannot carry, so a node is pickled with its fields only (the compiled cache,
    ``config.compiled``, may write watchers whose conditions this process already ran) and
    compiles again on first use after it is read."""

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        fields = type(self).model_fields
        state["__dict__"] = {key: value for key, value in state["__dict__"].items() if key in fields}
        return state


class Condition(_CompiledOnUse):
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

    @functools.cached_property
    def trace(self) -> Trace:
        """This condition compiled to report its result (``sentinel test``, policy rules)."""
        return leaf_trace(self.path, self.op, self.value, self.segments, self.check)


class AnyGroup(_CompiledOnUse):
    """``{any: [...]}``: true when at least one child is true."""

    model_config = _MODEL_CONFIG

    any: list[ConditionNode] = Field(min_length=1)

    @functools.cached_property
    def check(self) -> Check:
        """This group compiled (once, on first use): ``(observation, previous)`` → bool."""
        return group_check([child.check for child in self.any], any_of=True)

    @functools.cached_property
    def trace(self) -> Trace:
        """This group compiled to report every leaf below it."""
        return group_trace([child.trace for child in self.any], any_of=True)


class AllGroup(_CompiledOnUse):
    """``{all: [...]}``: true when every child is true."""

    model_config = _MODEL_CONFIG

    all: list[ConditionNode] = Field(min_length=1)

    @functools.cached_property
    def check(self) -> Check:
        """This group compiled (once, on first use): ``(observation, previous)`` → bool."""
        return group_check([child.check for child in self.all], any_of=False)

    @functools.cached_property
    def trace(self) -> Trace:
        """This group compiled to report every leaf below it."""
        return group_trace([child.trace for child in self.all], any_of=False)


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
