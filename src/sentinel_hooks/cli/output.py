"""Printing for the CLI: JSON for machines, rich tables for people, one-line errors."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


def stdout_console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """Indented JSON on stdout (UTF-8, keys in their natural order)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def print_error(message: str, *, prefix: bool = True) -> None:
    """One line on stderr: ``sentinel: error: …``."""
    sys.stderr.write((f"sentinel: error: {message}" if prefix else message) + "\n")


def compact(value: Any, limit: int = 60) -> str:
    """A value as short compact JSON for a table cell."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"
