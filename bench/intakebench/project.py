"""The throwaway Sentinel project of a run: one ``format: alertmanager`` watcher, the sink as its target.

Every alert the load sends is critical and new, so each one fires: the default ``scripted``
model notifies the sink, and the fan-out line (``notificationPayloadMode: concise``) goes there
too, so a fire costs a hook session and two deliveries. The watcher takes Alertmanager's bearer
token, as a receiver's ``http_config`` sends it.
"""

from __future__ import annotations

import json
from pathlib import Path

WATCHER_ID = "am"
TOKEN_ENV = "BENCH_AM_TOKEN"
TOKEN = "bench-alertmanager-token-7f3a"

WATCHER = f"""\
id: {WATCHER_ID}
strategy: webhook
format: alertmanager
auth: {{bearerToken: "${{env:{TOKEN_ENV}}}"}}
conditions: [{{path: labels.severity, op: eq, value: critical}}]
deliveryTargets: [sink]
fire:
  eventName: prom_alert
  messageTemplate: "${{payload.labels.alertname}} on ${{payload.labels.instance}}"
"""


GROUP_BY = "[payload.labels.alertname]"


def write_project(
    folder: Path,
    *,
    store: str,
    port: int,
    sink_port: int,
    group_wait_ms: int | None = None,
    fanout: bool = True,
) -> Path:
    """Write ``folder/sentinel.yaml`` and the watcher file; the config's path. ``group_wait_ms``:
    the watcher's fires are grouped by alertname (SPEC §19) with that ``waitMs``; ``fanout``
    false: no fan-out line, so the sink gets only the pages (and their follow-ups)."""
    (folder / "watchers").mkdir(parents=True, exist_ok=True)
    watcher = WATCHER
    if group_wait_ms is not None:
        watcher += f"  group: {{by: {GROUP_BY}, waitMs: {group_wait_ms}}}\n"
    (folder / "watchers" / f"{WATCHER_ID}.yaml").write_text(watcher, encoding="utf-8")
    target = {"type": "webhook", "url": f"http://127.0.0.1:{sink_port}/hook"}
    lines = [
        f"store: {json.dumps(store)}",
        f'server: {{host: "127.0.0.1", port: {port}}}',
        'allowedHosts: ["127.0.0.1"]',
        "hookResponseTimeoutMs: 60000",
        f"notificationPayloadMode: {'concise' if fanout else 'none'}",
        f"targets: {{sink: {json.dumps(target)}}}",
    ]
    path = folder / "sentinel.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
