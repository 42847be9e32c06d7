"""Imported text stays text: the upstream values a watcher file may not carry as written.

Upstream sends its strings as written, but in a Sentinel file ``${env:NAME}`` anywhere in a
value is filled from the service's environment at load (SPEC.md §2): an imported header
``"${env:SENTINEL_API_TOKEN}"`` would send the service's secret to the watcher's endpoint on the
first poll. Template fields escape the marker like any other template text
(``templates.escape_literal``); the other fields have no escape, so such a value is refused.
So is a value (or key) longer than any field needs (a 30 MB goal makes a file nobody can read
or load), an ``operatorGoal`` over the project's ``maxOperatorGoalChars``, and text that is not
valid Unicode (the API refuses it too, SPEC.md §9).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from sentinel_hooks.config.envvars import ENV_MARK
from sentinel_hooks.config.linemap import Loc

MAX_TEXT_CHARS: Final = 65536
"""The longest imported string (a template's rendered value has the same bound, SPEC.md §4)."""

ENV_REASON: Final = (
    "holds '${env:', which Sentinel fills from its own environment when it loads the file "
    "(upstream sent it as written); an imported value could carry a secret off: write "
    "${env:NAME} yourself if you mean one"
)


def unsafe_value(watcher: dict[str, Any], *, max_goal_chars: int) -> tuple[Loc, str] | None:
    """The first value (or key) of ``watcher`` that may not be written as it is, and why; None
    if none."""
    for loc, text, is_key in _strings(watcher, ()):
        if ENV_MARK in text and not is_key:  # keys are never interpolated
            return loc, ENV_REASON
        goal = loc == ("fire", "operatorGoal") and not is_key
        limit = max_goal_chars if goal else MAX_TEXT_CHARS
        if len(text) > limit:
            what = "maxOperatorGoalChars" if goal else "the limit for imported text"
            return loc, f"{len(text)} characters, over {what} ({limit})"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return loc, "not valid Unicode (a lone surrogate, as JSON's \\ud800 writes one)"
    return None


def _strings(node: Any, loc: Loc) -> Iterator[tuple[Loc, str, bool]]:
    """Every string in ``node`` with where it is, and whether it is a key (its entry's place)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*loc, str(key)), str(key), True
            yield from _strings(value, (*loc, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, (*loc, index))
    elif isinstance(node, str):
        yield loc, node, False
