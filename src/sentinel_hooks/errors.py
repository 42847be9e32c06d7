"""Sentinel's exception tree.

Adapters translate foreign exceptions (``sqlite3.Error``, ``redis.RedisError``,
``jinja2.TemplateError``, ``aiohttp.ClientError``) into these with ``raise … from exc``,
so the surfaces (the CLI's ``main()``, the API's error middleware) render every failure
in one place and never show a traceback::

    SentinelError
    ├── ConfigError          invalid sentinel.yaml / watcher / skill files (holds every ConfigIssue)
    ├── TemplateError        a template that cannot be parsed or rendered (names template and variable)
    ├── StoreError           the store failed an operation
    │   └── StoreUnavailable the store cannot be reached or opened
    ├── NotFound             a watcher, callback, inbox item … that does not exist
    └── Conflict             the request conflicts with the current state (e.g. an id in use)
        └── CallbackExists   a callback id that is already taken (names the callback and its state)
"""

from __future__ import annotations

from dataclasses import dataclass


class SentinelError(Exception):
    """Base of every error Sentinel raises on purpose."""


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in one file, printed as ``file:line: key.path: message``."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(SentinelError):
    """The configuration is invalid; ``issues`` lists every problem found, in file order."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


class TemplateError(SentinelError):
    """A template failed to parse (at load) or to render (at fire time)."""

    def __init__(self, message: str, *, template: str, variable: str | None = None) -> None:
        self.template = template
        self.variable = variable
        self.reason = message
        shown = template if len(template) <= 120 else template[:117] + "..."
        super().__init__(f"{message} in template {shown!r}")


class StoreError(SentinelError):
    """A store operation failed."""


class StoreUnavailable(StoreError):
    """The store cannot be opened or reached (bad URL, server down, unwritable file)."""


class NotFound(SentinelError):
    """The named object does not exist."""


class Conflict(SentinelError):
    """The request conflicts with the current state (an id in use, a file-defined watcher …)."""


class CallbackExists(Conflict):
    """A new callback names an id that is already taken; ``state`` is that callback's state
    (None when it was removed in the meantime)."""

    def __init__(self, callback_id: str, state: str | None) -> None:
        self.callback_id = callback_id
        self.state = state
        super().__init__(
            f"callback {callback_id!r} already exists (state {state}); send a new callbackId, or "
            f"GET /api/v1/callbacks/{callback_id} to follow the one there is"
        )
