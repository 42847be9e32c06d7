"""Logging setup: readable lines on a terminal, JSON lines otherwise, secrets always masked."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

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
            entry["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(redactor: Redactor, *, level: int = logging.INFO) -> None:
    """Send Sentinel's logs to stderr (JSON when stderr is not a terminal)."""
    handler = logging.StreamHandler(sys.stderr)
    if sys.stderr.isatty():
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter(redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("apscheduler", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
