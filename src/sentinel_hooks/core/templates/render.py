"""Sentinel's templates (``fire.payloadTemplate``, ``contextTemplate``, ``dedupeKeyTemplate``,
``messageTemplate``): compiled once when a watcher is loaded, rendered on every fire. Each
string is compiled once however often it is checked and however many watchers share it.

Semantics (SPEC.md §4): strings are Jinja2 in a sandbox; ``${a.b}`` is a dotted JSON path
anywhere in a string; a string that is exactly one placeholder (``"${payload.price}"`` or
``"{{ payload.price }}"``) keeps the value's JSON type, otherwise values are interpolated as
text (objects and arrays as compact JSON, ``null``, ``true``/``false``). Object keys are never
templated. Variable names are checked at compile time against :data:`TEMPLATE_ROOTS`.

Every failure, at compile or at render, is a :class:`~sentinel_hooks.errors.TemplateError`
naming the key path, the template and (when one is at fault) the variable — never a Jinja2
or Python exception. This module is the public face; behind it are ``template_source`` (the
load-time compiler and checks), ``template_env`` (the sandbox), ``template_values`` (text
rendering and size limits), ``template_filters`` (the filter whitelist) and ``variables`` (the
variables and their values for one fire, which load no Jinja2).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import GeneratorType
from typing import Any, Final, Protocol

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.runtime import Undefined

from sentinel_hooks.canonical import plain_copy
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.core.templates.environment import (
    LOOP_BUDGET_KEY,
    LoopBudget,
    MissingValueError,
    SentinelSandbox,
    find_path,
)
from sentinel_hooks.core.templates.source import (
    RESULT_NAME,
    CompiledSource,
    PathRef,
    VariableChecker,
    compile_source,
    exact_placeholder,
    has_template_syntax,
)
from sentinel_hooks.core.templates.values import MAX_VALUE_SIZE, TemplateLimitError, check_size
from sentinel_hooks.core.templates.variables import TEMPLATE_ROOTS, template_variables
from sentinel_hooks.errors import TemplateError

__all__ = [
    "TEMPLATE_ROOTS",
    "CompiledText",
    "CompiledValue",
    "compile_text",
    "compile_value",
    "template_variables",
]


@functools.cache
def _environment() -> SentinelSandbox:
    return SentinelSandbox()


class _Part(Protocol):
    def render(self, variables: Mapping[str, Any]) -> Any: ...


@dataclass(frozen=True)
class _Const:
    value: Any

    def render(self, variables: Mapping[str, Any]) -> Any:
        return plain_copy(self.value)


@dataclass(frozen=True)
class _Object:
    items: tuple[tuple[str, _Part], ...]

    def render(self, variables: Mapping[str, Any]) -> Any:
        return {key: part.render(variables) for key, part in self.items}


@dataclass(frozen=True)
class _Array:
    items: tuple[_Part, ...]

    def render(self, variables: Mapping[str, Any]) -> Any:
        return [part.render(variables) for part in self.items]


@dataclass(frozen=True)
class _Path:
    """A string that is exactly ``${path}``: resolved without Jinja, type kept."""

    ref: PathRef
    where: str
    template: str

    def render(self, variables: Mapping[str, Any]) -> Any:
        root = variables.get(self.ref.root, MISSING)
        reason = "no such variable was given" if root is MISSING else None
        if root is not MISSING:
            root, reason = find_path(_environment(), root, self.ref.root, self.ref.keys)
        if reason is None:
            return root
        message = f"{self.where}: {self.ref.shown!r} is undefined ({reason})"
        raise TemplateError(message, template=self.template, variable=self.ref.shown)


@dataclass(frozen=True)
class _Jinja:
    """A compiled Jinja2 template: text, or one typed ``{{ expression }}``."""

    source: CompiledSource
    where: str
    template: str

    def render(self, variables: Mapping[str, Any]) -> Any:
        context = dict(variables)
        if self.source.has_loops:
            context[LOOP_BUDGET_KEY] = LoopBudget()
        try:
            return self._typed(context) if self.source.typed else self._text(context)
        except TemplateError:
            raise
        except Exception as exc:  # any failure inside a template is the template's error
            raise _translate(exc, self.where, self.template) from exc

    def _typed(self, context: dict[str, Any]) -> Any:
        template = self.source.template
        jinja_context = template.new_context(context)
        for _ in template.root_render_func(jinja_context):
            pass
        return _plain(jinja_context.vars[RESULT_NAME])

    def _text(self, context: dict[str, Any]) -> str:
        chunks: list[str] = []
        size = 0
        for chunk in self.source.template.generate(context):
            size += len(chunk)
            if size > MAX_VALUE_SIZE:  # stop early: characters never outnumber UTF-8 bytes
                raise TemplateLimitError(f"the rendered text is over {MAX_VALUE_SIZE} bytes")
            chunks.append(chunk)
        return check_size("".join(chunks))


def _translate(exc: Exception, where: str, template: str) -> TemplateError:
    """The TemplateError for an exception raised while rendering."""
    variable = exc.path if isinstance(exc, MissingValueError) else None
    if isinstance(exc, TemplateLimitError):
        message = f"refused: {exc}"
    elif isinstance(exc, SecurityError):
        message = f"not allowed in a template: {exc}"
    elif isinstance(exc, jinja2.TemplateError):
        message = str(exc)
    else:
        message = f"{type(exc).__name__}: {exc}"
    return TemplateError(f"{where}: {message}", template=template, variable=variable)


def _plain(value: Any) -> Any:
    """A typed ``{{ expression }}`` result as JSON data (tuples, generators → lists).

    Walks the whole value, so an undefined inside a list (``map(attribute=…)`` on a missing
    key) is an error here rather than a surprise for whoever serialises the result.
    """
    if isinstance(value, str):
        return check_size(value)
    if value is None or isinstance(value, bool | int | float | Decimal):
        return value
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | GeneratorType):
        return check_size([_plain(item) for item in value])
    if isinstance(value, Undefined):
        str(value)  # raises the undefined error that names the variable
    raise TypeError(f"the expression gives a {type(value).__name__}, which is not a JSON value")


class CompiledValue:
    """A compiled JSON-like template (payloadTemplate, contextTemplate); render it many times."""

    def __init__(self, part: _Part, *, name: str) -> None:
        self._part = part
        self.name = name

    @property
    def is_constant(self) -> bool:
        """True when the template has no placeholders (rendering does not run Jinja2)."""
        return isinstance(self._part, _Const)

    def render(self, variables: Mapping[str, Any]) -> Any:
        """The rendered value; raises TemplateError when a placeholder cannot be rendered.

        Values taken from ``variables`` are not copied: treat the result as read-only.
        """
        return self._part.render(variables)


class CompiledText:
    """A compiled text template (messageTemplate, dedupeKeyTemplate); renders to ``str``."""

    def __init__(self, part: _Part, *, name: str) -> None:
        self._part = part
        self.name = name

    def render(self, variables: Mapping[str, Any]) -> str:
        """The rendered text; raises TemplateError when it cannot be rendered."""
        text: str = self._part.render(variables)
        return text


def compile_value(template: Any, *, name: str) -> CompiledValue:
    """Compile a JSON-like template: strings anywhere inside are templates, keys are not.

    ``name`` is the key path used in error messages (``fire.payloadTemplate``). Raises
    TemplateError for a syntax error, a forbidden tag or filter, an unknown variable or a
    value that is not JSON-like.
    """
    return CompiledValue(_compile_part(template, name), name=name)


def compile_text(text: str, *, name: str) -> CompiledText:
    """Compile a text template; it always renders to a string (JSON for non-string values)."""
    if not isinstance(text, str):
        raise TemplateError(f"{name}: a text template must be a string", template=repr(text))
    return CompiledText(_compile_string(text, name, typed=False), name=name)


def _compile_part(value: Any, where: str) -> _Part:
    if isinstance(value, str):
        return _compile_string(value, where, typed=True)
    if value is None or isinstance(value, bool | int | float | Decimal):
        return _Const(value)
    if isinstance(value, Mapping):
        items: list[tuple[str, _Part]] = []
        for key, item in value.items():
            if not isinstance(key, str):
                message = f"{where}: object keys must be strings, not {key!r}"
                raise TemplateError(message, template=repr(value))
            items.append((key, _compile_part(item, f"{where}.{key}")))
        if all(isinstance(part, _Const) for _, part in items):
            return _Const(plain_copy(dict(value)))
        return _Object(tuple(items))
    if isinstance(value, list | tuple):
        parts = tuple(_compile_part(item, f"{where}[{index}]") for index, item in enumerate(value))
        if all(isinstance(part, _Const) for part in parts):
            return _Const(plain_copy(list(value)))
        return _Array(parts)
    message = f"{where}: a {type(value).__name__} is not a JSON value"
    raise TemplateError(message, template=repr(value))


COMPILED_CACHE_SIZE: Final = 4096
"""How many compiled strings are kept for reuse: a watcher's validator and its model compile
the same strings one after the other, and watchers often share a template."""


def _compile_string(text: str, where: str, *, typed: bool) -> _Part:
    """The part for one string; identical ``(text, where, typed)`` share one compiled part
    (parts are immutable, and each render makes its own context)."""
    return _compile_string_cached(str(text), where, typed)


@functools.lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _compile_string_cached(text: str, where: str, typed: bool) -> _Part:
    if not has_template_syntax(text):
        return _Const(text)
    inner = exact_placeholder(text) if typed else None
    if inner is not None:
        checker = VariableChecker(TEMPLATE_ROOTS, where=where, template=text)
        return _Path(checker.placeholder(inner), where, text)
    env = _environment()
    source = compile_source(env, text, where=where, roots=TEMPLATE_ROOTS, typed=typed)
    return _Jinja(source, where, text)
