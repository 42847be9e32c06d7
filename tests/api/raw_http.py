"""Raw HTTP/1.1 requests, for what aiohttp's client will not send (header bytes that are not UTF-8)."""

from __future__ import annotations

import asyncio

from sentinel_hooks.service import Service


async def raw_status(service: Service, request: bytes) -> int:
    """Send ``request`` as it is to ``service`` and return the answer's status code."""
    host, port = service.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        status_line = await reader.readline()
    finally:
        writer.close()
        await writer.wait_closed()
    return int(status_line.split()[1])
