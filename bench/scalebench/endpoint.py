"""The watched endpoint and webhook sink of bench/scale.py: a bare asyncio HTTP/1.1 server.

Up to ~6,000 polls/s must cost it as little CPU as possible (it shares the machine with the
replicas it measures), so it is an ``asyncio.Protocol`` with keep-alive, not a web framework:
it reads a request's head (and body, by ``Content-Length``), answers from a fixed template and
appends one record per poll to compact arrays: arrival time, watcher number, replica number
(``X-Replica`` header). Routes:

- ``GET /poll/w<n>``: ``{"n": <counter>}``; the counter changes every ``period`` s (per watcher,
  with a phase), or never when ``period`` is 0, so a ``changed`` condition fires that often;
- ``POST /deliver``: the webhook sink, counted;
- ``GET /stats``: JSON: polls recorded, replica names by number, deliveries;
- ``GET /dump/<from>``: the records from number ``<from>`` on, as raw arrays
  (8-byte count, then times as doubles, watcher numbers as int32, replica numbers as int8).
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from array import array

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
BIN_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
DELIVERED = b'{"ok": true}'
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


class Records:
    """One entry per poll: when, which watcher, which replica."""

    def __init__(self) -> None:
        self.at = array("d")
        self.watcher = array("i")
        self.replica = array("b")
        self.names: list[str] = []
        self.numbers: dict[bytes, int] = {}
        self.deliveries = 0

    def number(self, name: bytes) -> int:
        found = self.numbers.get(name)
        if found is None:
            found = self.numbers[name] = len(self.names)
            self.names.append(name.decode(errors="replace"))
        return found

    def dump(self, start: int) -> bytes:
        return (
            struct.pack("<q", max(0, len(self.at) - start))
            + self.at[start:].tobytes()
            + self.watcher[start:].tobytes()
            + self.replica[start:].tobytes()
        )


def parse_dump(blob: bytes) -> tuple[array[float], array[int], array[int]]:
    """``GET /dump``'s body back into (times, watcher numbers, replica numbers)."""
    (count,) = struct.unpack_from("<q", blob)
    at, watcher, replica = array("d"), array("i"), array("b")
    offset = 8
    at.frombytes(blob[offset : offset + 8 * count])
    offset += 8 * count
    watcher.frombytes(blob[offset : offset + 4 * count])
    offset += 4 * count
    replica.frombytes(blob[offset : offset + count])
    return at, watcher, replica


def header(head: bytes, name: bytes) -> bytes | None:
    """A header's value in a request head (as sent, else case-insensitively), or None."""
    at = head.find(b"\r\n" + name + b": ")
    if at < 0:
        at = head.lower().find(b"\r\n" + name.lower() + b": ")
        if at < 0:
            return None
    start = at + len(name) + 4
    stop = head.find(b"\r\n", start)
    return head[start:] if stop < 0 else head[start:stop]


class Server(asyncio.Protocol):
    """One connection."""

    def __init__(self, records: Records, period_s: float) -> None:
        self.records, self.period_s = records, period_s
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        out = []
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buffer[:end]
            length = 0
            if head.startswith(b"POST"):
                lower = head.lower()
                at = lower.find(b"\r\ncontent-length:")
                if at >= 0:
                    stop = lower.find(b"\r\n", at + 2)
                    length = int(lower[at + 17 : stop if stop >= 0 else None])
            if len(buffer) < end + 4 + length:
                break
            buffer = buffer[end + 4 + length :]
            out.append(self.answer(head))
        self.buffer = buffer
        if out and self.transport is not None:
            self.transport.write(b"".join(out))

    def answer(self, head: bytes) -> bytes:
        line_end = head.find(b"\r\n")
        method, path, _ = (head[:line_end] if line_end >= 0 else head).split(b" ", 2)
        records = self.records
        if path.startswith(b"/poll/w"):
            now = time.time()
            number = int(path[7:])
            records.at.append(now)
            records.watcher.append(number)
            records.replica.append(records.number(header(head, b"X-Replica") or b"?"))
            if self.period_s:
                phase = (number % 97) / 97 * self.period_s
                body = b'{"n": %d}' % int((now + phase) // self.period_s)
            else:
                body = b'{"n": 0}'
            return OK_HEAD % len(body) + body
        if method == b"POST" and path == b"/deliver":
            records.deliveries += 1
            return OK_HEAD % len(DELIVERED) + DELIVERED
        if path == b"/stats":
            body = json.dumps(
                {"polls": len(records.at), "replicas": records.names, "deliveries": records.deliveries}
            ).encode()
            return OK_HEAD % len(body) + body
        if path.startswith(b"/dump/"):
            blob = records.dump(int(path[6:]))
            return BIN_HEAD % len(blob) + blob
        return NOT_FOUND


async def serve(port: int, period_s: float) -> None:
    """Listen on 127.0.0.1:``port`` until killed."""
    records = Records()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Server(records, period_s), "127.0.0.1", port, backlog=4096, reuse_address=True
    )
    async with server:
        await server.serve_forever()
