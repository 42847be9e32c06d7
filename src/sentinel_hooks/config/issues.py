"""Turn pydantic validation errors into ``file:line: key.path: message`` issues.

pydantic reports locations that include union tags (``('http-poll', 'intervalMs')``);
we walk the user's data along that location to keep only the parts the user wrote,
and walk the model types along it to know which keys were allowed (for the hint).
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr, Tag, ValidationError
from pydantic_core import ErrorDetails

from sentinel_hooks.config.base import KEY_PROBLEM
from sentinel_hooks.config.envvars import yaml_scalar
from sentinel_hooks.config.hints import did_you_mean
from sentinel_hooks.config.linemap import LineMap, Loc
from sentinel_hooks.errors import ConfigIssue

_QUOTED = re.compile(r"'([^']*)'")


def format_loc(loc: Sequence[str | int]) -> str:
    """``conditions[0].op`` style key path."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def user_loc(data: Any, loc: Sequence[str | int], *, keep_last: bool = False) -> Loc:
    """The parts of a pydantic ``loc`` that index the user's data (union tags dropped)."""
    kept: list[str | int] = []
    node = data
    last = len(loc) - 1
    for index, part in enumerate(loc):
        found, child = _child(node, part)
        if found:
            kept.append(part)
            node = child
        elif index == last and keep_last:
            kept.append(part)
    return tuple(kept)


def _child(node: Any, part: str | int) -> tuple[bool, Any]:
    """Whether ``part`` indexes ``node`` (a key of a dict, an index of a list), and the value."""
    if isinstance(node, dict) and isinstance(part, str) and part in node:
        return True, node[part]
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return True, node[part]
    return False, None


def _strip_annotated(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(tp) is Annotated:
        args = get_args(tp)
        return args[0], tuple(args[1:])
    return tp, ()


def _union_members(tp: Any) -> list[Any] | None:
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return list(get_args(tp))
    return None


def _member_for_tag(members: list[Any], tag: str) -> Any | None:
    for member in members:
        inner, meta = _strip_annotated(member)
        if any(isinstance(m, Tag) and m.tag == tag for m in meta):
            return inner
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            for field in inner.model_fields.values():
                if get_origin(field.annotation) is Literal and tag in get_args(field.annotation):
                    return inner
    return None


def _field_type(model: type[BaseModel], key: str) -> Any | None:
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            return field.annotation
    return None


def _step(tp: Any, part: str | int) -> tuple[Any, bool]:
    """The type found at ``part`` below ``tp``; the flag says whether ``part`` was consumed."""
    tp, _ = _strip_annotated(tp)
    members = _union_members(tp)
    if members is not None:
        if isinstance(part, str):
            chosen = _member_for_tag(members, part)
            if chosen is not None:
                return chosen, True
        models = [m for m in (_strip_annotated(x)[0] for x in members) if m is not type(None)]
        return (models[0] if len(models) == 1 else None), False
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
        return _field_type(tp, part), True
    origin = get_origin(tp)
    if origin in (list, tuple, Sequence) and isinstance(part, int):
        return get_args(tp)[0], True
    if origin is dict:
        return get_args(tp)[1], True
    return None, True


def type_at(root: Any, loc: Sequence[str | int]) -> Any | None:
    """The type the models expect at ``loc`` (None when it cannot be determined)."""
    tp: Any = root
    parts = list(loc)
    guard = 0
    while parts and tp is not None and guard < 200:
        guard += 1
        tp, consumed = _step(tp, parts[0])
        if consumed:
            parts.pop(0)
    return None if tp is None else _strip_annotated(tp)[0]


def allowed_keys(root: Any, loc: Sequence[str | int]) -> list[str]:
    """The keys the model at ``loc`` accepts (empty when it cannot be determined)."""
    tp = type_at(root, loc)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [field.alias or name for name, field in tp.model_fields.items()]
    return []


def _is_secret(root: Any, loc: Sequence[str | int]) -> bool:
    """Whether the key at ``loc`` holds a secret (its value must not be shown)."""
    tp = type_at(root, loc)
    members = _union_members(tp) or [tp]
    return any(_strip_annotated(member)[0] is SecretStr for member in members)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _message(error: ErrorDetails, root: Any) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == KEY_PROBLEM:
        return error["msg"]
    if kind == "extra_forbidden":
        key = str(error["loc"][-1])
        choices = allowed_keys(root, error["loc"][:-1])
        hint = did_you_mean(key, choices)
        listed = f"; allowed keys: {', '.join(choices)}" if choices and not hint else ""
        return f"unknown key {key!r}{hint}{listed}"
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error":
        expected = _QUOTED.findall(str(ctx.get("expected", "")))
        return f"{_shown(value)} is not one of {', '.join(expected)}{did_you_mean(str(value), expected)}"
    if kind == "union_tag_invalid":
        expected = _QUOTED.findall(str(ctx.get("expected_tags", "")))
        tag = str(ctx.get("tag"))
        field = str(ctx.get("discriminator", "")).strip("'")
        return f"{field} {tag!r} is not one of {', '.join(expected)}{did_you_mean(tag, expected)}"
    if kind == "union_tag_not_found":
        field = str(ctx.get("discriminator", "")).strip("'")
        return f"required key {field!r} is missing"
    if kind in ("value_error", "assertion_error"):
        message = error["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(prefix)
        return message
    if kind in ("string_too_short", "too_short"):
        return _too_short(value, ctx)
    message = error["msg"]
    if _is_secret(root, error["loc"]):
        return message
    if isinstance(value, str | int | float | bool) or value is None:
        message += f" (got {_shown(value)})"
    return message


def _too_short(value: Any, ctx: Mapping[str, Any]) -> str:
    """A length under the minimum, in words that show no value (it may be a secret)."""
    minimum = ctx.get("min_length", 1)
    if isinstance(value, list | dict):
        return f"needs at least {minimum} item(s), has {len(value)}"
    if not value:
        return "is empty: give it a value"
    return f"needs at least {minimum} character(s), has {len(str(value))}"


EXPECTED_TYPES = {
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "text",
    "list_type": "a list",
    "dict_type": "a mapping of keys",
    "model_type": "a mapping of keys",
}
"""What a key of each type takes, by pydantic's error type (values are never converted)."""


def validation_issues(
    exc: ValidationError, *, display: str, data: Any, lines: LineMap, root: Any, prefix: Loc = ()
) -> list[ConfigIssue]:
    """Every error of ``exc`` as a ConfigIssue (line looked up in ``lines`` under ``prefix``).

    Wrong-type errors at one key (one per member of a union) become one issue listing
    every type the key accepts.
    """
    issues: list[ConfigIssue] = []
    typed: dict[Loc, tuple[int, list[str], Any]] = {}
    for error in exc.errors():
        loc = error["loc"]
        kind = error["type"]
        shown = user_loc(data, loc, keep_last=kind in ("missing", KEY_PROBLEM))
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            field = str((error.get("ctx") or {}).get("discriminator", "")).strip("'")
            shown = (*shown, field)
        line_loc = shown[:-1] if kind in ("missing", "union_tag_not_found") else shown
        line = lines.line_of((*prefix, *line_loc))
        key = format_loc((*prefix, *shown))
        if kind in EXPECTED_TYPES:
            index, wanted, value = typed.setdefault(shown, (len(issues), [], error.get("input")))
            wanted.append(EXPECTED_TYPES[kind])
            message = type_message(wanted, value, secret=_is_secret(root, loc))
            if index < len(issues):
                issues[index] = ConfigIssue(display, line, key, message)
                continue
        else:
            message = _message(error, root)
        issues.append(ConfigIssue(display, line, key, message))
    return issues


def type_message(expected: Sequence[str], value: Any, *, secret: bool = False) -> str:
    """``expected a whole number, got the text '2000' (write it without quotes: 2000)``.

    The value of a secret key is not shown.
    """
    wanted = list(dict.fromkeys(expected))
    listed = wanted[0] if len(wanted) == 1 else ", ".join(wanted[:-1]) + " or " + wanted[-1]
    if secret:
        return f"expected {listed}"
    message = f"expected {listed}, got {_given(value)}"
    if isinstance(value, str) and "text" not in wanted and _unquoted_fits(value, wanted):
        return message + f" (write it without quotes: {value})"
    if "text" in wanted and isinstance(value, bool | int | float):
        written = str(value).lower() if isinstance(value, bool) else repr(value)
        return message + f" (quote it if you mean the text: '{written}')"
    return message


def _given(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {_shown(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _unquoted_fits(text: str, wanted: Sequence[str]) -> bool:
    """Whether ``text``, written without quotes, would be a value of a wanted type."""
    value = yaml_scalar(text)
    if isinstance(value, bool):
        return "true or false" in wanted
    if isinstance(value, int):
        return "a whole number" in wanted or "a number" in wanted
    return isinstance(value, float) and "a number" in wanted
