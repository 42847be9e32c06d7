"""The filters Sentinel templates may use: a whitelist, each guarded against huge results.

Every filter's result is size-checked after it runs; the ones whose arguments alone could
build a huge value (``center(10**9)``, ``replace('', …)``, ``batch(n, fill)``, ``slice(n)``,
``indent(n)``, ``tojson(indent=n)``) are checked before. ``join``, ``string`` and ``tojson``
render non-strings as JSON, like the rest of the template text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final

from jinja2 import pass_environment
from jinja2.environment import Environment
from jinja2.filters import FILTERS, do_batch, do_indent, do_slice, make_attrgetter

from sentinel_hooks.core.templates.values import (
    TemplateLimitError,
    check_size,
    refuse_over,
    to_json,
    to_text,
)


def _sized(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)  # keeps Jinja's pass_environment/pass_context marker
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return check_size(func(*args, **kwargs))

    return wrapper


def _center(value: Any, width: int = 80) -> str:
    refuse_over(width, "center()")
    return to_text(value).center(width)


def _indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = to_text(s)
    prefix = len(width) if isinstance(width, str) else width
    refuse_over(len(text) + (text.count("\n") + 1) * prefix, "indent()")
    return do_indent(text, width, first, blank)


def _replace(s: Any, old: Any, new: Any, count: int | None = None) -> str:
    text, old_text, new_text = to_text(s), to_text(old), to_text(new)
    hits = text.count(old_text) if old_text else len(text) + 1
    if count is not None and count >= 0:
        hits = min(hits, count)
    refuse_over(len(text) + hits * (len(new_text) - len(old_text)), "replace()")
    return text.replace(old_text, new_text, -1 if count is None else count)


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Any:
    if fill_with is not None:
        refuse_over(linecount, "batch()")
    return do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Any:
    refuse_over(slices, "slice()")
    return do_slice(value, slices, fill_with)


@pass_environment
def _join(env: Environment, value: Any, d: str = "", attribute: str | int | None = None) -> str:
    items = map(make_attrgetter(env, attribute), value) if attribute is not None else value
    parts: list[str] = []
    size = 0
    for item in items:
        parts.append(to_text(item))
        size += len(parts[-1]) + len(d)
        refuse_over(size, "join()")
    return to_text(d).join(parts)


def _tojson(value: Any, indent: int | None = None) -> str:
    if indent is not None and not 0 <= indent <= 8:
        raise TemplateLimitError("tojson(indent) must be between 0 and 8")
    return to_json(value, indent=indent)


_FILTER_NAMES: Final = """abs batch capitalize center count d default dictsort first float indent
    int items join last length list lower map max min reject replace reverse round select slice sort
    string striptags sum title tojson trim truncate unique upper urlencode wordcount"""

SAFE_FILTERS: Final = frozenset(_FILTER_NAMES.split())
"""The filters templates may use; every other Jinja2 filter is removed."""

_OWN_FILTERS: Final[Mapping[str, Callable[..., Any]]] = {
    "batch": _batch,
    "center": _center,
    "indent": _indent,
    "join": _join,
    "replace": _replace,
    "slice": _slice,
    "string": to_text,
    "tojson": _tojson,
}


def safe_filters() -> dict[str, Callable[..., Any]]:
    """The whitelisted filters, each checking the size of what it returns."""
    return {name: _sized(_OWN_FILTERS.get(name) or FILTERS[name]) for name in SAFE_FILTERS}
