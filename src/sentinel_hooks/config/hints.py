"""'Did you mean …?' hints for misspelt keys and enum values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` (case- and space-insensitive), if any is close enough."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    key = word.strip().lower()
    if key in lowered and lowered[key] != word:
        return lowered[key]
    found = difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.6)
    return lowered[found[0]] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or an empty string."""
    match = closest(word, choices)
    return f" (did you mean {match!r}?)" if match is not None else ""
