"""The ``file`` target: append one JSON line per message to a file, durably (SPEC.md §6.2).

Each line is ``{at, idempotencyKey, target, callbackId, watcherId, eventName, priority, kind,
message, envelope?, extra?}`` (the webhook body plus what a log reader needs). A message is
accepted only once its line is written, flushed and ``fsync``'d; that blocking work runs in a
worker thread, one line at a time per target (an ``asyncio.Lock``), and each line is a single
``write`` on an ``O_APPEND`` descriptor, so concurrent sends never interleave. The file is
opened per message, so it may be rotated or removed while the service runs.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from sentinel_hooks.clock import iso
from sentinel_hooks.config.targets import FileTargetSpec, TargetSpec
from sentinel_hooks.delivery.targets.base import (
    DeliveryError,
    Message,
    Target,
    TargetContext,
    TransientDeliveryError,
)
from sentinel_hooks.delivery.targets.webhook import webhook_body

FILE_MODE = 0o644


def file_record(message: Message, *, at: str, idempotency_key: str, target: str) -> dict[str, Any]:
    """The JSON object written for ``message`` (``extra`` only when it holds something)."""
    record: dict[str, Any] = {"at": at, "idempotencyKey": idempotency_key, "target": target}
    record |= webhook_body(message)
    record["kind"] = message.kind
    if message.extra:
        record["extra"] = message.extra
    return record


def append_line(path: Path, line: bytes) -> None:
    """Append ``line`` to ``path`` (parents created) and ``fsync`` it; blocking."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        view = memoryview(line)
        while view:
            written = os.write(descriptor, view)
            view = view[written:]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class FileTarget:
    """Appends JSON lines to ``path`` (relative to ``context.base_dir``)."""

    def __init__(self, name: str, spec: FileTargetSpec, context: TargetContext) -> None:
        self.name = name
        self.path = context.base_dir / spec.path
        self._clock = context.clock
        self._lock = asyncio.Lock()

    def _line(self, message: Message, idempotency_key: str) -> bytes:
        record = file_record(
            message, at=iso(self._clock.now()), idempotency_key=idempotency_key, target=self.name
        )
        try:
            text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise DeliveryError(f"file target {self.name!r}: the message is not JSON ({exc})") from exc
        return (text + "\n").encode("utf-8")

    async def send(self, message: Message, *, idempotency_key: str) -> None:
        """Append ``message`` as one line; return once it is on disk, else raise ``DeliveryError``."""
        line = self._line(message, idempotency_key)
        async with self._lock:
            try:
                await asyncio.to_thread(append_line, self.path, line)
            except OSError as exc:
                raise TransientDeliveryError(
                    f"file target {self.name!r}: cannot append to {self.path} ({exc.strerror or exc})"
                ) from exc

    async def close(self) -> None:
        """Nothing to release: the file is opened per message."""


def create(name: str, spec: TargetSpec, context: TargetContext) -> Target:
    """The ``file`` target called ``name``."""
    if not isinstance(spec, FileTargetSpec):
        raise TypeError(f"target {name!r}: expected a file spec, got {type(spec).__name__}")
    return FileTarget(name, spec, context)
