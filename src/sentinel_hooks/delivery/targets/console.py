"""The ``console`` target: one line per message on the service's standard output.

It is where ``environment: test`` watchers deliver (SPEC.md §7) and the simplest target to try
a rule with, so it is always accepted unless the stream itself is gone: a closed or broken
stream is a ``DeliveryError`` that retrying will not fix, never a stray ``ValueError``.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from sentinel_hooks.config.targets import ConsoleTargetSpec, TargetSpec
from sentinel_hooks.delivery.targets.base import DeliveryError, Message, Target, TargetContext

CONTINUATION_INDENT = "    "
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN``: observed data must not drive the terminal."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def console_line(message: Message) -> str:
    """``[sentinel] <priority> <eventName> on <watcherId>: <text>``, later lines of the text indented."""
    first, *rest = message.text.splitlines() or [""]
    head = f"[sentinel] {message.priority} {message.event_name} on {message.watcher_id}: {first}"
    lines = [head, *(CONTINUATION_INDENT + line for line in rest)]
    return "\n".join(_visible(line) for line in lines) + "\n"


class ConsoleTarget:
    """Writes each message to ``context.console`` (standard output when None) and flushes."""

    def __init__(self, name: str, context: TargetContext) -> None:
        self.name = name
        self._stream = context.console

    def _output(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """Print ``message``; the idempotency key is not shown (the console cannot drop duplicates)."""
        stream = self._output()
        try:
            stream.write(console_line(message))
            stream.flush()
        except (ValueError, OSError) as exc:
            raise DeliveryError(
                f"console target {self.name!r}: cannot write to the output stream ({exc})"
            ) from exc

    async def close(self) -> None:
        """Nothing to release: the stream belongs to the service."""


def create(name: str, spec: TargetSpec, context: TargetContext) -> Target:
    """The ``console`` target called ``name``."""
    if not isinstance(spec, ConsoleTargetSpec):
        raise TypeError(f"target {name!r}: expected a console spec, got {type(spec).__name__}")
    return ConsoleTarget(name, context)
