"""Redaction of secret values (everything that came from the environment).

A value shorter than ``MIN_SECRET_CHARS`` is not redacted: replacing every ``1`` or ``on``
in the output would garble it and such values are not credentials.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MIN_SECRET_CHARS = 4
MASK = "***"


class Redactor:
    """Replaces every registered secret inside strings (and nested data) with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._secrets = tuple(kept)
        self._pattern = re.compile("|".join(re.escape(s) for s in kept)) if kept else None

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def text(self, value: str) -> str:
        """``value`` with every secret masked."""
        if self._pattern is None:
            return value
        return self._pattern.sub(MASK, value)

    def data(self, value: Any) -> Any:
        """A copy of JSON-like ``value`` with secrets masked in keys and strings."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def merged(self, other: Redactor) -> Redactor:
        """A redactor that masks the secrets of both."""
        return Redactor((*self._secrets, *other._secrets))
