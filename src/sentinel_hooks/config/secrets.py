"""Redaction of secret values (everything that came from the environment).

A value shorter than ``MIN_SECRET_CHARS`` is not redacted: replacing every ``1`` or ``on``
in the output would garble it and such values are not credentials.

A secret is also found in the forms other programs write it in: an error page that echoes
the URL it was asked for shows it percent-encoded (``/`` as ``%2F`` or ``%2f``, a space as
``+``), HTML-escaped (``&amp;``) or JSON-escaped (``\\/``, ``\\"``, ``\\n``). Each character that
such an encoder may rewrite matches in any of those spellings; so ``found_in`` of a value's JSON
text finds every secret ``data`` would mask in the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, SecretStr

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
    """A regex matching ``char`` as written, percent-encoded (either case) or escaped; a
    control character also as JSON text writes it (``\\n``, ``\\u0001``), so a secret is found in
    the JSON text of a value wherever it is in one of the value's strings."""
    if char.isalnum() and char.isascii():
        return re.escape(char)
    encoded = "".join(f"%{byte:02x}" for byte in char.encode("utf-8"))
    escapes = dict.fromkeys((*_ESCAPED.get(char, ()), json.dumps(char, ensure_ascii=False)[1:-1]))
    escapes.pop(char, None)
    forms = [re.escape(char), f"(?i:{re.escape(encoded)})", *map(re.escape, escapes)]
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
        # no spelling of these secrets holds the joiner, so no match spans two joined strings
        self._joinable = not any(_JOINER in s for s in kept)

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

    def found_in(self, value: Any) -> bool:
        """Whether ``data`` would mask anything in JSON-like ``value`` (a key or a string).

        One search of all its strings joined: a fraction of ``data``'s cost, for callers that
        keep ``value`` as it is when nothing in it is secret."""
        if self._pattern is None:
            return False
        strings: list[str] = []
        _collect_strings(value, strings)
        if self._joinable:
            return self._pattern.search(_JOINER.join(strings)) is not None
        return any(self._pattern.search(text) is not None for text in strings)

    def merged(self, other: Redactor) -> Redactor:
        """A redactor that masks the secrets of both."""
        return Redactor((*self._secrets, *other._secrets))


_JOINER = "\x00"  # an environment variable cannot hold it


def _collect_strings(value: Any, out: list[str]) -> None:
    """Append every string ``Redactor.data`` would mask in ``value`` (keys as ``str``) to ``out``."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, member in value.items():
            out.append(str(key))
            _collect_strings(member, out)
    elif isinstance(value, list | tuple):
        for member in value:
            _collect_strings(member, out)


CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Request headers whose value is a credential (masked in a shown definition, never observed)."""
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:)[^/?#@]*@")


def masked_url(text: str) -> str:
    """``text`` with the password of a URL in it (``redis://:pw@host``, ``https://user:pw@host``)
    replaced by ``***``; anything else unchanged."""
    return _URL_PASSWORD.sub(rf"\g<head>{MASK}@", text)


def masked_credentials(model: BaseModel, data: Any) -> Any:
    """``data``, the mapping ``model`` was validated from (keys as written), with every credential
    replaced by ``***``: each ``SecretStr`` field (a webhook watcher's ``secret``, ``auth.bearerToken``,
    ``auth.basic.password``), the value of each credential header, and the password of each URL.

    By key, not by value: a secret written as a literal (in a file, or sent through the API, which
    takes no ``${env:…}``) is unknown to the ``Redactor`` yet just as secret, whatever its length."""
    if not isinstance(data, dict):
        return data
    shown = dict(data)
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        if key not in shown:
            continue
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            shown[key] = MASK
        elif isinstance(value, BaseModel):
            shown[key] = masked_credentials(value, shown[key])
        elif name == "headers" and isinstance(shown[key], dict):
            shown[key] = {
                header: MASK if str(header).lower() in CREDENTIAL_HEADERS else text
                for header, text in shown[key].items()
            }
        elif isinstance(shown[key], str):
            shown[key] = masked_url(shown[key])
    return shown
