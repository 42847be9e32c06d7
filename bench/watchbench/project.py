"""The temp Sentinel project a run measures: sentinel.yaml plus N http-poll watchers.

All N watchers are in one file, ``watchers/bench.yaml``, under a ``watchers:`` list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SERVICE_YAML = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
limits: {{maxWatchers: {max_watchers}, minIntervalMs: 1000, requestTimeoutMs: 5000}}
hookResponseDedupeWindowMs: 0
"""

# one condition that never matches the endpoint's {"status": "ok"}: nothing ever fires
WATCHER_LINE = (
    '  - {{id: w{index}, strategy: http-poll, endpoint: "http://127.0.0.1:{port}/w/{index}", '
    "intervalMs: {interval_ms}, timeoutMs: 5000, "
    "conditions: [{{path: status, op: eq, value: down}}]}}\n"
)


@dataclass(frozen=True)
class Project:
    """Where one run's project lives."""

    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "sentinel.yaml"

    @property
    def watchers_file(self) -> Path:
        return self.root / "watchers" / "bench.yaml"

    @property
    def schedule_file(self) -> Path:
        return self.root / "schedule.json"


def write_project(
    root: Path, *, n: int, port: int, interval_ms: int, store: str = "sqlite:///state.db"
) -> Project:
    """Write sentinel.yaml and the watchers file of ``n`` watchers."""
    project = Project(root)
    (root / "watchers").mkdir(parents=True)
    project.config_file.write_text(SERVICE_YAML.format(store=store, max_watchers=max(100_000, n)))
    lines = ["watchers:\n"]
    lines.extend(WATCHER_LINE.format(index=i, port=port, interval_ms=interval_ms) for i in range(n))
    project.watchers_file.write_text("".join(lines))
    return project
