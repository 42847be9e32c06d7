"""Logging setup: readable lines on a terminal, JSON lines otherwise, secrets always masked.

Libraries' lines that say nothing to an operator are quieted here: the MCP SDK's per-request
INFO lines (stateless ``/mcp`` "terminates" a session of id None after every call) and aiohttp's
ERROR with a traceback for a request it cannot parse (a client's fault, already answered 400),
which becomes one WARNING line with the cause. Their real errors still show.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from sentinel_hooks.clock import iso
from sentinel_hooks.config.secrets import Redactor

CONTEXT_FIELDS = ("watcherId", "callbackId", "sessionKey", "target")


class RedactingFilter(logging.Filter):
    """Masks secrets in the final message and in context fields."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redactor.text(record.getMessage())
        record.args = None
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if isinstance(value, str):
                setattr(record, name, self._redactor.text(value))
        return True


class MalformedRequestFilter(logging.Filter):
    """aiohttp's "Error handling request" for a request its parser refused (answered 400) is one
    WARNING line naming the client and the cause, without the parser's excerpt and caret."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "aiohttp.server" or not record.exc_info:
            return True
        exc = record.exc_info[1]
        if not isinstance(exc, HttpProcessingError):
            return True
        lines = str(exc.message).strip().splitlines()
        cause = lines[0].strip().rstrip(":") if lines else "unreadable request"
        record.msg = f"{record.getMessage()}: malformed request refused with {exc.code}: {cause}"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def error_line(exc_info: Any) -> str:
    """An exception's type and message on one line (a traceback's last line is not that when the
    message spans lines: aiohttp's parser errors end with a caret)."""
    return " ".join("".join(traceback.format_exception_only(exc_info[0], exc_info[1])).split())


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and context fields."""

    def format(self, record: logging.LogRecord) -> str:
        from datetime import UTC, datetime

        entry: dict[str, Any] = {
            "at": iso(datetime.fromtimestamp(record.created, tz=UTC)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["error"] = error_line(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(redactor: Redactor, *, level: int = logging.INFO) -> None:
    """Send Sentinel's logs to stderr (JSON when stderr is not a terminal)."""
    handler = logging.StreamHandler(sys.stderr)
    if sys.stderr.isatty():
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(JsonFormatter())
    handler.addFilter(MalformedRequestFilter())
    handler.addFilter(RedactingFilter(redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in (
        "apscheduler",
        "aiohttp.access",
        "mcp.server.streamable_http",
        "mcp.server.streamable_http_manager",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)
