"""A Server-Sent Events parser (the WHATWG HTML "event stream" rules), fed raw byte chunks.

Pure and incremental: ``feed(chunk)`` returns the events completed by that chunk, whatever
the chunk boundaries (a CRLF, a UTF-8 sequence or a BOM may be split across chunks).
The rules: one leading BOM ignored; lines end in CRLF, CR or LF; ``:`` lines are comments;
``field: value`` drops one space after the colon; a line without a colon is a field with
an empty value; ``data`` lines are joined with ``\\n``; ``event`` sets the type (default
``message``); ``id`` (without NUL) sets the last event ID; ``retry`` (ASCII digits only)
sets the reconnection time; unknown fields are ignored. An event is dispatched only on a
blank line and only when data was given; the last event ID updates on every blank line.
An unterminated event at the end of the stream is never dispatched.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_LINE_END = re.compile(r"\r\n|\r|\n")
_DIGITS = re.compile(r"[0-9]+")
DEFAULT_TYPE = "message"


class SseTooLarge(ValueError):
    """A line or an event's data grew past the parser's character limit."""


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its ``type``, ``data`` and the last event ID at dispatch."""

    data: str
    type: str = DEFAULT_TYPE
    id: str = ""


class SseParser:
    """Turns an event stream's bytes into ``SseEvent`` values; ``max_chars`` bounds a line and an event."""

    def __init__(self, *, max_chars: int = 1 << 20, last_event_id: str = "") -> None:
        self.max_chars = max_chars
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._partial = ""
        self._after_cr = False
        self._data: list[str] = []
        self._data_chars = 0
        self._type = ""
        self._id_buffer = last_event_id

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by ``chunk`` (``SseTooLarge`` past the limit)."""
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if self._after_cr:
            self._after_cr = False
            text = text.removeprefix("\n")  # the LF of a CRLF split across chunks
        buffer = self._partial + text
        events: list[SseEvent] = []
        start = 0
        for end in _LINE_END.finditer(buffer):
            event = self._line(buffer[start : end.start()])
            start = end.end()
            if event is not None:
                events.append(event)
        self._after_cr = buffer.endswith("\r")
        self._partial = buffer[start:]
        if len(self._partial) > self.max_chars:
            raise SseTooLarge(f"an event-stream line passed {self.max_chars} characters")
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_chars += len(value) + 1
            if self._data_chars > self.max_chars:
                raise SseTooLarge(f"an event's data passed {self.max_chars} characters")
        elif name == "event":
            self._type = value
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry" and _DIGITS.fullmatch(value):
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        self.last_event_id = self._id_buffer
        data, event_type = self._data, self._type
        self._data, self._data_chars, self._type = [], 0, ""
        if not data:
            return None
        return SseEvent(data="\n".join(data), type=event_type or DEFAULT_TYPE, id=self.last_event_id)
