"""The load: Alertmanager notifications POSTed on an open-loop schedule, and what came back.

Notification ``i`` is sent at ``start + i / rate`` whatever the answers before it did (an
Alertmanager with many groups does not wait for one group's answer to send another's), with
``per`` new critical alerts in it (fingerprints unique to the run, so every alert fires), all of
one alertname (as Alertmanager groups them): the first of ``alertnames`` names, or in turn. The
latency of a notification is its 202 minus its scheduled send time, so a server that falls
behind shows it even while the client's connections queue. A request is given
``ALERTMANAGER_TIMEOUT_S`` (Alertmanager's webhook timeout): later, it counts as timed out.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

ALERTMANAGER_TIMEOUT_S = 10.0
CONNECTIONS = 256
ALERTNAMES = ("HighLoad", "DiskFull", "ApiErrors", "PodCrashLooping", "CertExpiring", "QueueBacklog")


def notification(run: str, first: int, per: int, alertname: str = ALERTNAMES[0]) -> bytes:
    """The body of one notification: alerts ``first`` … ``first + per - 1`` of run ``run``."""
    alerts = [
        {
            "status": "firing",
            "labels": {
                "alertname": alertname,
                "instance": f"node-{i}",
                "job": "node",
                "severity": "critical",
            },
            "annotations": {"summary": f"load on node-{i} above 8 for 5 minutes"},
            "startsAt": "2026-11-28T01:00:00.000Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://127.0.0.1:9090/graph?g0.expr=node_load5+%3E+8",
            "fingerprint": f"{run}-{i:08d}",
        }
        for i in range(first, first + per)
    ]
    body = {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alertname}"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "sentinel",
        "groupLabels": {"alertname": alertname},
        "commonLabels": {"alertname": alertname, "job": "node", "severity": "critical"},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "alerts": alerts,
    }
    return json.dumps(body).encode()


@dataclass
class Answers:
    """What the notifications got back."""

    sent: int = 0
    latencies_s: list[float] = field(default_factory=list)  # of the 202s
    fired: int = 0
    alerts_accepted: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    first_send: float = 0.0
    first_send_wall: float = 0.0  # the same instant on the wall clock (the sink's)
    last_answer: float = 0.0

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


async def offer(
    url: str,
    headers: dict[str, str],
    *,
    rate: float,
    duration_s: float,
    per: int,
    run: str,
    alertnames: int = 1,
) -> Answers:
    """Send ``rate * duration_s`` notifications of ``per`` alerts on schedule (notification ``i``
    of alertname ``i % alertnames``); their answers."""
    count = max(1, round(rate * duration_s))
    names = ALERTNAMES[: max(1, alertnames)]
    bodies = [notification(run, i * per, per, names[i % len(names)]) for i in range(count)]
    answers = Answers(sent=count)
    timeout = aiohttp.ClientTimeout(total=ALERTMANAGER_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(body: bytes, due: float) -> None:
            try:
                async with session.post(url, data=body, headers=headers) as response:
                    data: Any = await response.json(content_type=None)
                    done = time.monotonic()
                    if response.status != 202:
                        answers.error(f"HTTP {response.status}")
                        return
            except TimeoutError:
                answers.error("timeout")
                return
            except aiohttp.ClientError as exc:
                answers.error(type(exc).__name__)
                return
            answers.latencies_s.append(done - due)
            answers.fired += int(data.get("fired", 0))
            answers.alerts_accepted += per
            answers.last_answer = max(answers.last_answer, done)

        start = time.monotonic() + 0.05
        answers.first_send, answers.first_send_wall = start, time.time() + 0.05
        tasks = []
        for index, body in enumerate(bodies):
            due = start + index / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(body, due)))
        await asyncio.gather(*tasks)
    return answers
