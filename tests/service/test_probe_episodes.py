"""Probe episodes through a running service with a real probe process (SPEC.md §3).

The probe is a small script in the project directory: it appends a line to ``runs.log`` (so the
tests can wait for polls) and prints ``report.txt``, which the tests rewrite between episodes.
Run ``n + 2`` starting means run ``n`` has been observed and fired (polls never overlap).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.shortcuts import get_envelope
from tests.service.conftest import SERVICE_CONFIG, Starter
from tests.support import wait_for

PROBE = """\
import pathlib
with pathlib.Path("runs.log").open("a") as runs:
    runs.write("run\\n")
text = pathlib.Path("report.txt").read_text()
print(text.replace("RUN", str(len(pathlib.Path("runs.log").read_text().splitlines()))))
"""
NOT_JSON = "the probe is broken"
POLLS = 6  # "many polls": enough that a per-poll fire would show


class Probe:
    """The probe script in ``folder``: what it prints next, and how often it has run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "probe.py").write_text(PROBE, encoding="utf-8")

    def argv(self) -> str:
        return json.dumps([sys.executable, str(self.folder / "probe.py")])

    def prints(self, text: str) -> None:
        """From the next run on, the probe prints ``text`` (RUN becomes the run number)."""
        fresh = self.folder / "report.tmp"
        fresh.write_text(text, encoding="utf-8")
        os.replace(fresh, self.folder / "report.txt")  # a run never reads half a report

    def runs(self) -> int:
        log = self.folder / "runs.log"
        return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0

    async def polled(self, times: int) -> None:
        """Wait until ``times`` more probe runs have been observed (and fired, if they fire)."""
        target = self.runs() + times + 1
        await wait_for(lambda: self.runs() >= target, timeout_s=30, what=f"{times} more probe runs")


def command_watcher(probe: Probe, *, probe_keys: str, fire: str = "{}") -> str:
    return textwrap.dedent(
        f"""\
        id: job
        strategy: command
        command: {probe.argv()}
        intervalMs: 100
        probe: {probe_keys}
        fire: {fire}
        deliveryTargets: [console]
        """
    )


async def fired(service: Service) -> list[Any]:
    """The watcher's fires (deduped attempts left out), oldest first."""
    page = await service.store.list_contracts(watcher_id="job")
    return [c for c in reversed(page.items) if c.state != "deduped"]


async def fired_kinds(service: Service) -> list[str]:
    return [c.trigger.kind for c in await fired(service)]


async def wait_fires(service: Service, count: int, what: str) -> None:
    """Wait until the watcher has fired ``count`` times (generous: probes start slowly under load)."""

    async def enough() -> bool:
        return len(await fired(service)) >= count

    await wait_for(enough, timeout_s=30, what=what)


async def test_a_failing_probe_fires_once_until_a_probe_succeeds(
    start_service: Starter, tmp_path: Path
) -> None:
    """onProbeError: terminal at the first error: one fire over many failing polls; a success
    followed by a failure is the next episode, and fires once more."""
    probe = Probe(tmp_path)
    probe.prints(NOT_JSON)
    keys = "{onProbeError: terminal, probeErrorThreshold: 1}"
    service = await start_service(watchers={"w.yaml": command_watcher(probe, probe_keys=keys)})
    await wait_fires(service, 1, "the probe-error fire")
    await probe.polled(POLLS)
    assert ["terminal"] == await fired_kinds(service)
    probe.prints('{"class": "progressing"}')
    await probe.polled(1)
    probe.prints(NOT_JSON)
    await wait_fires(service, 2, "the second probe-error episode")
    await probe.polled(POLLS)
    assert ["terminal", "terminal"] == await fired_kinds(service)


async def test_a_stall_fires_once_per_episode_with_a_tiny_dedupe_window(
    start_service: Starter, tmp_path: Path
) -> None:
    """The same digest poll after poll fires no_progress once, though dedupe forgets after 1 ms;
    a new digest that stalls again is the next episode."""
    probe = Probe(tmp_path)
    probe.prints('{"step": 7}')
    watcher = command_watcher(probe, probe_keys="{stallThreshold: 2}")
    service = await start_service(watchers={"w.yaml": watcher}, dedupe=1)
    await wait_fires(service, 1, "the stall fire")
    await probe.polled(POLLS)
    assert ["no_progress"] == await fired_kinds(service)
    probe.prints('{"step": 8}')
    await wait_fires(service, 2, "the second stall")
    await probe.polled(POLLS)
    assert ["no_progress", "no_progress"] == await fired_kinds(service)


async def test_repeat_interval_refires_a_lasting_stall_at_most_that_often(
    start_service: Starter, tmp_path: Path
) -> None:
    """repeatIntervalMs: 600 with a poll every 100 ms: reminders, each 600 ms or more (by the
    instants the fired observations were made) after the previous fire."""
    probe = Probe(tmp_path)
    probe.prints('{"digest": "job-1", "run": RUN}')
    watcher = command_watcher(probe, probe_keys="{stallThreshold: 2}", fire="{repeatIntervalMs: 600}")
    service = await start_service(watchers={"w.yaml": watcher})
    await wait_fires(service, 3, "two repeats")
    runs = []
    for contract in (await fired(service))[:3]:
        envelope = await get_envelope(service.store, contract.callback_id)
        assert envelope is not None
        runs.append(envelope.payload["run"])
    seen = {o.value["run"]: o.at for o in await service.store.observations("job", limit=500)}
    gaps_ms = [
        (seen[later] - seen[earlier]).total_seconds() * 1000 for earlier, later in itertools.pairwise(runs)
    ]
    assert all(gap >= 600 for gap in gaps_ms), gaps_ms


async def test_an_open_episode_survives_a_restart(tmp_path: Path) -> None:
    """A probe failing before and after a restart fires once: the episode is in the stored state."""
    probe = Probe(tmp_path)
    probe.prints(NOT_JSON)
    config = SERVICE_CONFIG.format(
        extra="", allowed='["127.0.0.1"]', server="{host: 127.0.0.1, port: 0}", dedupe=0, limits=""
    )
    (tmp_path / "sentinel.yaml").write_text(config, encoding="utf-8")
    (tmp_path / "watchers").mkdir()
    keys = "{onProbeError: terminal, probeErrorThreshold: 1}"
    (tmp_path / "watchers" / "w.yaml").write_text(command_watcher(probe, probe_keys=keys), encoding="utf-8")
    for _ in range(2):
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        try:
            await wait_fires(service, 1, "the probe-error fire")
            await probe.polled(POLLS)
            kinds = await fired_kinds(service)
        finally:
            await service.stop()
        assert ["terminal"] == kinds


def firing(service: Service) -> bool:
    """The watcher's status ``firing``, as the API shows it."""
    return bool(service.manager.status(service.manager.get("job"))["firing"])


async def test_status_is_firing_while_a_probe_episode_is_open(start_service: Starter, tmp_path: Path) -> None:
    """A stall that fired shows ``firing: true`` until the probe reports progress, then false."""
    probe = Probe(tmp_path)
    probe.prints('{"step": 7}')
    service = await start_service(
        watchers={"w.yaml": command_watcher(probe, probe_keys="{stallThreshold: 2}")}
    )
    assert not firing(service)
    await wait_fires(service, 1, "the stall fire")
    await probe.polled(2)
    assert firing(service)
    probe.prints('{"class": "progressing"}')
    await probe.polled(1)
    assert not firing(service)
