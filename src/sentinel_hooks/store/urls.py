"""Store URLs as messages and logs may show them: a password never appears."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redacted_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    port = f":{parts.port}" if parts.port else ""
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}{port}"
    return urlunsplit(parts._replace(netloc=netloc))
