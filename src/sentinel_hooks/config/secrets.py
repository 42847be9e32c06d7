"""Redaction of secret values (everything that came from the environment).

A value shorter than ``MIN_SECRET_CHARS`` is not redacted: replacing every ``1`` or ``on``
in the output would garble it and such values are not credentials.

A secret is also found in the forms other programs write it in: an error page that echoes
the URL it was asked for shows it percent-encoded (``/`` as ``%2F`` or ``%2f``, a space as
``+``), HTML-escaped (``&amp;``) or JSON-escaped (``\\/``, ``\\"``). Each character that such
an encoder may rewrite matches in any of those spellings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MIN_SECRET_CHARS = 4
MASK = "***"

_ESCAPED: dict[str, tuple[str, ...]] = {
    "&": ("&amp;", "&#38;", "&#x26;"),
    "<": ("&lt;", "&#60;", "&#x3c;", "\\u003c"),
    ">": ("&gt;", "&#62;", "&#x3e;", "\\u003e"),
    '"': ("&quot;", "&#34;", "&#x22;", '\\"'),
    "'": ("&#39;", "&#x27;", "&apos;"),
    "/": ("\\/",),
    "\\": ("\\\\",),
    " ": ("+",),
}


def _spellings(char: str) -> str:
    """A regex matching ``char`` as written, percent-encoded (either case) or escaped."""
    if char.isalnum() and char.isascii():
        return re.escape(char)
    encoded = "".join(f"%{byte:02x}" for byte in char.encode("utf-8"))
    forms = [re.escape(char), f"(?i:{re.escape(encoded)})", *map(re.escape, _ESCAPED.get(char, ()))]
    return "(?:" + "|".join(forms) + ")"


def secret_pattern(secret: str) -> str:
    """A regex matching ``secret`` in any of the spellings the module docstring names."""
    return "".join(_spellings(char) for char in secret)


class Redactor:
    """Replaces every registered secret inside strings (and nested data) with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._secrets = tuple(kept)
        self._pattern = re.compile("|".join(secret_pattern(s) for s in kept)) if kept else None

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
