"""openclaw-sentinel's ``${…}`` placeholders → Sentinel templates (SPEC.md §4).

Upstream templates substitute only: a string that is exactly ``${path}`` takes the value at
``path`` (its JSON type kept), with ``path`` one of ``watcher.id``, ``watcher.skillId``,
``event.name``, ``timestamp`` or ``payload.<dotted path>``; every other string of a payload or
context template is sent as written. Sentinel's templates are Jinja2, and ``${a.b}`` is their
own shorthand for ``{{ a.b }}`` with the same meaning (whole placeholder keeps its type), so
an upstream placeholder carries over as written once its path is checked. What needs care:

- text that Jinja2 would read (``{{``, ``{%``, ``{#``) is escaped, so it stays literal;
- placeholders inside longer text were literal (or, at the start of the text, an error)
  upstream; Sentinel interpolates them, which is reported as a change;
- a placeholder upstream would refuse (another root, an empty path) cannot be carried.

Paths may be rewritten on the way (``evm-call`` observations are shaped differently, and a
dropped ``skillId`` is substituted by its value): a :data:`PathMapper` says what a path
becomes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

UPSTREAM_PATH: Final = re.compile(r"^(watcher\.(id|skillId)|event\.name|payload\.[A-Za-z0-9_.-]+|timestamp)$")
"""The placeholders upstream accepts (its ``template.ts``)."""

_PLACEHOLDER: Final = re.compile(r"\$\{([^{}]*)\}")
_MARKER: Final = re.compile(r"\{*(?:\$\{|\{[{%#])")
"""Text Sentinel would read as a template, with the braces right before it (``{${`` and ``{{{``:
escaping only the marker would leave a ``{`` that joins the ``{{`` of the escape)."""


@dataclass(frozen=True)
class Constant:
    """A placeholder whose value is known when importing (it becomes literal text)."""

    value: Any


@dataclass(frozen=True)
class Unmapped:
    """A path that has no counterpart in Sentinel, and why."""

    reason: str


PathMapper = Callable[[str], "str | Constant | Unmapped"]
"""Maps an upstream path (``payload.result.0``) to Sentinel's, to a constant, or to nothing."""


def same_path(path: str) -> str | Constant | Unmapped:
    """The identity :data:`PathMapper`."""
    return path


class TemplateProblem(ValueError):
    """A template string that cannot be carried over; the message says why."""


@dataclass
class TextResult:
    """A converted string and the changes worth telling the user about."""

    text: Any
    changes: list[str] = field(default_factory=list)


def escape_literal(text: str) -> str:
    """``text`` as a Sentinel template that renders exactly ``text`` (no placeholder in it)."""
    return _MARKER.sub(lambda m: _quoted(m.group(0)), text)


def _quoted(marker: str) -> str:
    """A Jinja2 expression printing ``marker`` (only ``{$%#`` in it: no quote or backslash)."""
    return '{{ "' + marker + '" }}'


def _placeholder(inner: str, mapper: PathMapper) -> str | Constant:
    path = inner.strip()
    if not UPSTREAM_PATH.match(path):
        raise TemplateProblem(
            f"placeholder '${{{inner}}}' is not one upstream accepts "
            "(watcher.id, watcher.skillId, event.name, timestamp, payload.<path>)"
        )
    mapped = mapper(path)
    if isinstance(mapped, Unmapped):
        raise TemplateProblem(f"placeholder '${{{inner}}}': {mapped.reason}")
    return mapped


def convert_text(text: str, mapper: PathMapper, *, interpolates: bool) -> TextResult:
    """One upstream template string as a Sentinel template string.

    ``interpolates``: upstream replaced placeholders anywhere in this text (dedupe key and
    deadline templates); otherwise only a text that is exactly one placeholder was templated.
    """
    whole = _PLACEHOLDER.fullmatch(text)
    if whole is not None:
        mapped = _placeholder(whole.group(1), mapper)
        if isinstance(mapped, Constant):
            value = _text_of(mapped.value) if interpolates else mapped.value
            return TextResult(escape_literal(value) if isinstance(value, str) else value)
        return TextResult("${" + mapped + "}")
    parts: list[str] = []
    literal: list[str] = []  # raw text since the last placeholder, escaped as one run
    filled = False
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        literal.append(text[position : match.start()])
        position = match.end()
        try:
            mapped = _placeholder(match.group(1), mapper)
        except TemplateProblem:
            if interpolates or text.startswith("${"):
                raise  # upstream refused this text at fire time
            literal.append(match.group(0))  # upstream sent it as written
            continue
        filled = True
        if isinstance(mapped, Constant):
            literal.append(_text_of(mapped.value))
            continue
        parts += [escape_literal("".join(literal)), "${" + mapped + "}"]
        literal = []
    literal.append(text[position:])
    parts.append(escape_literal("".join(literal)))
    changes = []
    if filled and not interpolates:
        refused = " (or refused the text, as it starts with one)" if text.startswith("${") else ""
        changes.append(
            f"upstream sent placeholders inside longer text as written{refused}; Sentinel fills them in"
        )
    return TextResult("".join(parts), changes)


def _text_of(value: Any) -> str:
    """A constant as upstream printed it inside text (``String(value)``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class ValueResult:
    """A converted payload/context template, and the keys that could not be carried."""

    value: Any
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (path below the template, why)
    changed: list[tuple[str, str]] = field(default_factory=list)


def convert_value(template: Any, mapper: PathMapper) -> ValueResult:
    """A payload or context template (object, array, scalar) with every string converted."""
    result = ValueResult(None)
    result.value = _walk(template, "", mapper, result)
    return result


_DROP: Final = object()


def _walk(node: Any, where: str, mapper: PathMapper, result: ValueResult) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, item in node.items():
            converted = _walk(item, f"{where}.{key}" if where else str(key), mapper, result)
            if converted is not _DROP:
                out[str(key)] = converted
        return out
    if isinstance(node, list):
        items = [_walk(item, f"{where}[{index}]", mapper, result) for index, item in enumerate(node)]
        return [item for item in items if item is not _DROP]
    if not isinstance(node, str):
        return node
    try:
        converted = convert_text(node, mapper, interpolates=False)
    except TemplateProblem as exc:
        result.dropped.append((where, str(exc)))
        return _DROP
    result.changed.extend((where, change) for change in converted.changes)
    return converted.text
