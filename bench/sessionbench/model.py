"""The model stand-in: an OpenAI-compatible chat-completions server in its own process.

Run as ``python -m sessionbench.model --delay-s D`` (or ``--silent``). It is the shipped
``sentinel_hooks.testing.FakeOpenAIServer`` with one standing answer for every request, so it
needs no script per callback:

* a request whose last message is not a tool result gets one ``sentinel_act`` notify tool call
  (the message names the callback, read from the envelope in the first user message);
* a request whose last message is a tool result gets the plain text ``done`` (the session ends).

So a fire costs two model requests. ``--delay-s`` holds each request that long before
answering; ``--silent`` never answers (the client's ``timeoutMs`` ends it). Prints ``READY
{"url": …}`` and serves until stdin closes, then prints ``STATS {"requests": N}`` on stderr.
Request bodies are not kept (the fake's recording is emptied as it goes), so a long run does
not grow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any

from sentinel_hooks.testing import CannedCall, CannedReply, FakeOpenAIServer

CALLBACK = re.compile(r'"callbackId": "([^"]+)"')


class BenchModel(FakeOpenAIServer):
    """Answers every request by the rule of the module docstring."""

    def __init__(self, delay_s: float, silent: bool) -> None:
        super().__init__()
        self.count = 0
        self.delay_s = delay_s
        self.silent = silent
        self.answer_when(lambda _: True, self._answer)

    async def _answer(self, body: dict[str, Any]) -> str:
        self.count += 1
        self.requests.clear()  # keep no bodies: a long run must not grow
        self.request_sizes.clear()
        self.request_headers.clear()
        if self.silent:
            await asyncio.Event().wait()  # never answers; the client times out
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        return ""

    def render(self, canned: CannedReply, request: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages") or [{}]
        if messages[-1].get("role") == "tool":
            return super().render(CannedReply(text="done"), request)
        found = CALLBACK.search(str(messages[1].get("content", ""))) if len(messages) > 1 else None
        text = f"bench: {found.group(1) if found else 'a watcher'} fired; nothing to do."
        call = CannedCall("sentinel_act", {"action": "notify", "message": text}, f"call_{self.count}")
        return super().render(CannedReply(calls=(call,)), request)


async def serve(delay_s: float, silent: bool) -> None:
    model = BenchModel(delay_s, silent)
    await model.start()
    print(f"READY {json.dumps({'url': model.url})}", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while await reader.read(1024):
            pass
    finally:
        await model.stop()
        print(f"STATS {json.dumps({'requests': model.count})}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-s", type=float, default=0.0, help="hold each answer this long")
    parser.add_argument("--silent", action="store_true", help="never answer")
    args = parser.parse_args()
    asyncio.run(serve(args.delay_s, args.silent))


if __name__ == "__main__":
    main()
