"""The sandboxed Jinja2 environment that runs Sentinel's templates.

Watcher authors write templates; the data they read (``payload``) comes from the outside
world. So the environment is locked down: no globals (``range``, ``cycler``, ``lipsum`` …
do not exist), no loader, ``StrictUndefined``, and attribute access that means JSON keys
(``payload.items`` is the key ``items``, never ``dict.items``). Arithmetic that could build
a huge value is refused before it runs (``template_values``), filters are whitelisted
(``template_filters``), and loops have an iteration budget per render. The compiler
(``template_source``) rewrites templates to call :class:`TemplateBridge`, whose methods no
template text can name.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Final, cast

from jinja2 import StrictUndefined, TemplateRuntimeError, UndefinedError
from jinja2.ext import Extension
from jinja2.runtime import Context, Undefined
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import missing

from sentinel_hooks.core.paths import MISSING, is_index
from sentinel_hooks.core.templates.filters import safe_filters
from sentinel_hooks.core.templates.values import (
    TemplateLimitError,
    check_binop,
    refuse_over,
    to_text,
)

MAX_LOOP_ITERATIONS: Final = 100_000
"""Iterations of ``{% for %}`` loops allowed in one render, all loops together."""

LOOP_BUDGET_KEY: Final = "$loop_budget"
"""Render-context key of the loop budget (``$`` keeps it out of reach of template names)."""


class MissingValueError(UndefinedError):
    """An undefined value was used; ``path`` is the variable as the template wrote it."""

    path: ClassVar[str | None] = None


@functools.lru_cache(maxsize=512)
def missing_error_for(path: str) -> type[MissingValueError]:
    """An exception class that remembers ``path``, for ``Undefined(exc=…)``."""
    return cast("type[MissingValueError]", type("MissingValueError", (MissingValueError,), {"path": path}))


class SentinelUndefined(StrictUndefined):
    """``StrictUndefined`` whose error remembers the name that was undefined."""

    __slots__ = ()

    def __init__(
        self,
        hint: str | None = None,
        obj: Any = missing,
        name: str | None = None,
        exc: type[TemplateRuntimeError] = UndefinedError,
    ) -> None:
        if exc is UndefinedError and isinstance(name, str):
            exc = missing_error_for(name)
        super().__init__(hint, obj, name, exc)


def lookup(env: SandboxedEnvironment, obj: Any, key: Any) -> Any:
    """One step of ``a.b`` / ``a[b]``: object keys and array indices, else MISSING.

    Mappings are looked up by key only (an integer key ``0`` means the key ``"0"``); lists by
    index (a string index must be a non-negative decimal integer, as in paths); strings and
    scalars have no keys. Jinja's own objects (the ``loop`` variable) follow sandbox rules.
    """
    if isinstance(obj, Mapping):
        if isinstance(key, int) and not isinstance(key, bool):
            key = str(key)
        return obj.get(key, MISSING) if isinstance(key, str) else MISSING
    if isinstance(obj, list | tuple | str):
        if isinstance(key, str) and not isinstance(obj, str):
            key = int(key) if is_index(key) else MISSING
        if isinstance(key, slice):
            return obj[key]
        if isinstance(key, int) and not isinstance(key, bool) and -len(obj) <= key < len(obj):
            return obj[key]
        return MISSING
    if obj is None or isinstance(obj, int | float | Undefined):
        return MISSING
    if isinstance(key, str):
        value = SandboxedEnvironment.getattr(env, obj, key)
    else:
        value = SandboxedEnvironment.getitem(env, obj, key)
    return MISSING if isinstance(value, Undefined) else value


def describe_missing(parent: Any, shown_parent: str, key: Any) -> str:
    """Why ``key`` is not found under ``parent`` (shown as ``shown_parent``)."""
    if isinstance(parent, Mapping):
        return f"{shown_parent} has no key {str(key)!r}"
    if isinstance(parent, list | tuple):
        return f"{shown_parent} is an array of {len(parent)} items and has no item {key!r}"
    kinds = {str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    kind = "null" if parent is None else kinds.get(type(parent))
    if kind is not None:
        return f"{shown_parent} is {kind} and has no key {key!r}"
    return f"{shown_parent} has no attribute {key!r}"


def show_path(root: str, keys: tuple[str | int, ...]) -> str:
    """The dotted form of a path, as used in error messages (``payload.items.0``)."""
    return ".".join([root, *(str(key) for key in keys)])


def find_path(
    env: SandboxedEnvironment, root_value: Any, root: str, keys: tuple[str | int, ...]
) -> tuple[Any, str | None]:
    """Follow ``keys`` from ``root_value``: ``(value, None)`` or ``(MISSING, reason)``."""
    value = root_value
    for depth, key in enumerate(keys):
        found = lookup(env, value, key)
        if found is MISSING:
            return MISSING, describe_missing(value, show_path(root, keys[:depth]), key)
        value = found
    return value, None


class TemplateBridge(Extension):
    """Calls that rewritten templates make; reachable only through compiler-made nodes."""

    def resolve(self, root_value: Any, root: str, keys: tuple[str | int, ...]) -> Any:
        """The value at ``root.keys…``, or an undefined naming the path and the reason."""
        if isinstance(root_value, Undefined):
            return root_value
        env = cast("SandboxedEnvironment", self.environment)
        value, reason = find_path(env, root_value, root, keys)
        if reason is None:
            return value
        shown = show_path(root, keys)
        hint = f"{shown!r} is undefined ({reason})"
        return env.undefined(hint=hint, name=shown, exc=missing_error_for(shown))

    def concat(self, *values: Any) -> str:
        """``a ~ b``: text of each operand (JSON for non-strings), size-checked first."""
        texts = [to_text(value) for value in values]
        refuse_over(sum(len(text) for text in texts), "this '~'")
        return "".join(texts)

    def iterate(self, context: Context, iterable: Any) -> Iterator[Any]:
        """Items of a ``{% for %}`` loop, counted against the render's loop budget."""
        budget = context.get(LOOP_BUDGET_KEY)
        if not isinstance(budget, LoopBudget):
            budget = LoopBudget()
        for item in iterable:
            budget.spend()
            yield item


class LoopBudget:
    """How many loop iterations one render may still run."""

    def __init__(self, limit: int = MAX_LOOP_ITERATIONS) -> None:
        self.remaining = limit

    def spend(self) -> None:
        """Count one iteration; raise :class:`TemplateLimitError` when none are left."""
        self.remaining -= 1
        if self.remaining < 0:
            raise TemplateLimitError(f"loops ran more than {MAX_LOOP_ITERATIONS} iterations")


class SentinelSandbox(SandboxedEnvironment):
    """The template environment: no globals, safe filters, JSON-key attribute access."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        super().__init__(
            undefined=SentinelUndefined,
            autoescape=False,
            finalize=to_text,
            keep_trailing_newline=True,
            extensions=[TemplateBridge],
            auto_reload=False,
            cache_size=0,
        )
        self.globals.clear()
        self.filters = safe_filters()

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``x.attr`` means the key ``attr`` of a JSON object (see :func:`lookup`)."""
        return self.getitem(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        """``x[key]`` with the same rules as :func:`lookup`; undefined when absent."""
        if isinstance(obj, Undefined):
            return obj
        value = lookup(self, obj, argument)
        if value is not MISSING:
            return value
        shown = str(argument)
        hint = f"{shown!r} is undefined ({describe_missing(obj, 'the value', argument)})"
        return self.undefined(hint=hint, name=shown, exc=missing_error_for(shown))

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """Arithmetic, after refusing operations that would build an oversized value."""
        check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)
