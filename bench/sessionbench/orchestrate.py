"""One benchmark run: sink, model server and Sentinel in their own processes; fires; the numbers.

1. Start the webhook sink and the model stand-in (``sessionbench.model``), both pinned to one
   core, and the Sentinel process (``sessionbench.service``) pinned to the other, with Sentinel's
   code from the plan's ``src`` (so "before" and "after" run the same benchmark code).
2. Read the Sentinel process's CPU, send ``go``: it fires ``rate`` callbacks a second for
   ``duration_s`` seconds through its intake.
3. Poll the sink until every fire has its message (the agent's notify or the relay's fallback),
   then wait ``DUPLICATE_GRACE_S`` more for any duplicate; give up at the last fire + the
   response deadline + ``LATE_AFTER_S``.
4. Read the CPU again, stop the processes, join the sink's records with the fire map.

CPU per fire = the Sentinel process's CPU (all threads, /proc) from ``go`` to the last outcome,
minus what the idle process used over as long (measured for ``IDLE_S`` just before ``go``: the
relay's and the outbox's timers, the API), divided by the fires. Sessions still running at that
point (a silent model's, waiting for their model timeout) are not charged any further.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
from relaybench.analysis import percentile
from relaybench.procs import SRC_DIR, Child, ChildFailed, cpu_plan, cpu_seconds, machine_busy_seconds
from soakbench.probes import own_redis

POLL_S = 0.2
IDLE_S = 2.0
DUPLICATE_GRACE_S = 1.0
LATE_AFTER_S = 10.0
TARGET = "sink"
MODEL_NAME = "bench"

# scenario → (model server flags, hookResponseTimeoutMs): what the model does, and how long the
# agent has before the fallback is due
SCENARIOS: dict[str, tuple[list[str] | None, int]] = {
    "no sessions": (None, 3_000),  # the floor: intake, relay, fallback delivery only
    "silent": (["--silent"], 3_000),
    "instant": ([], 10_000),
    "1 s": (["--delay-s", "1"], 10_000),
}
MODEL_TIMEOUT_MS = 20_000


@dataclass(frozen=True)
class Plan:
    """``rate`` fires/s for ``duration_s`` s with model ``scenario``, Sentinel from ``src``, on
    ``store`` (``sqlite``, or ``redis``: a redis-server the run starts on a free port)."""

    scenario: str
    rate: float
    duration_s: float
    label: str = "after"
    src: Path = SRC_DIR
    store: str = "sqlite"
    watchers: int = 1024
    concurrency: int = 512
    pin: bool = True
    profile: Path | None = None

    @property
    def store_kind(self) -> str:
        return "sqlite" if self.store == "sqlite" else "redis"

    @property
    def deadline_ms(self) -> int:
        return SCENARIOS[self.scenario][1]


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    fires: int
    cpu_s: float
    agent: int
    fallbacks: int
    lost: int
    duplicates: int
    stray: int
    latency_p50_ms: float
    latency_p99_ms: float
    completed_per_s: float
    intake_lag_p99_ms: float
    intake_errors: int
    first_error: str | None
    other_load: float
    loadavg: str

    @property
    def cpu_ms_per_fire(self) -> float:
        return 1000 * self.cpu_s / max(1, self.fires)

    @property
    def kept_up(self) -> bool:
        """Every fire had exactly one message, in time; with a model that answers, the agent's."""
        answers = self.plan.scenario in ("instant", "1 s")
        return (
            self.lost == 0
            and self.duplicates == 0
            and self.intake_errors == 0
            and (not answers or self.agent == self.fires)
            and self.intake_lag_p99_ms < 1000
        )

    def row(self) -> dict[str, Any]:
        return {
            "scenario": self.plan.scenario,
            "code": self.plan.label,
            "store": self.plan.store_kind,
            "rate": self.plan.rate,
            "fires": self.fires,
            "cpu_ms_per_fire": round(self.cpu_ms_per_fire, 3),
            "agent": self.agent,
            "fallbacks": self.fallbacks,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "stray": self.stray,
            "latency_p50_ms": round(self.latency_p50_ms, 1),
            "latency_p99_ms": round(self.latency_p99_ms, 1),
            "completed_per_s": round(self.completed_per_s, 1),
            "intake_lag_p99_ms": round(self.intake_lag_p99_ms, 1),
            "intake_errors": self.intake_errors,
            "first_error": self.first_error,
            "kept_up": self.kept_up,
            "other_load_cores": round(self.other_load, 2),
            "loadavg": self.loadavg,
        }


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg has them."""
    with open("/proc/loadavg", encoding="ascii") as file:
        return " ".join(file.read().split()[:3])


def write_project(folder: Path, plan: Plan, *, sink_port: int, model_url: str | None) -> Path:
    """``folder/sentinel.yaml``: one webhook target (the sink), the bench model as the default."""
    (folder / "watchers").mkdir(parents=True, exist_ok=True)
    store = plan.store if plan.store != "sqlite" else f"sqlite:///{(folder / 'state.db').resolve()}"
    target = {"type": "webhook", "url": f"http://127.0.0.1:{sink_port}/hook"}
    lines = [
        f"store: {json.dumps(store)}",
        'server: {host: "127.0.0.1", port: 0}',
        'allowedHosts: ["127.0.0.1"]',
        f"hookResponseTimeoutMs: {plan.deadline_ms}",
        "hookResponseFallbackMode: concise",
        "notificationPayloadMode: none",
        f"hookConcurrency: {plan.concurrency}",
        f"targets: {{{TARGET}: {json.dumps(target)}}}",
    ]
    if model_url is not None:
        model = {
            "type": "openai",
            "baseUrl": model_url,
            "model": "bench-model",
            "timeoutMs": MODEL_TIMEOUT_MS,
        }
        lines += [f"models: {{{MODEL_NAME}: {json.dumps(model)}}}", f"defaultHookModel: {MODEL_NAME}"]
    path = folder / "sentinel.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def _wait(port: int, n: int, until: float) -> None:
    async with aiohttp.ClientSession() as session:
        while time.time() < until:
            async with session.get(f"http://127.0.0.1:{port}/count") as response:
                if int((await response.json())["keys"]) >= n:
                    await asyncio.sleep(DUPLICATE_GRACE_S)
                    return
            await asyncio.sleep(POLL_S)


async def run(plan: Plan) -> Outcome:
    """Run ``plan`` once in a fresh temporary folder (kept, and named, when the run fails)."""
    folder = Path(tempfile.mkdtemp(prefix="session-bench-"))
    children: list[Child] = []
    keep = False
    try:
        if plan.store == "redis":  # a redis-server of the run's own, on a free port
            with own_redis(folder) as (url, _, _):
                return await _measure(replace(plan, store=url), folder, children)
        return await _measure(plan, folder, children)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except BaseException:
        keep = True
        raise
    finally:
        for child in children:
            child.kill_now()
        if keep or plan.profile is not None:
            print(f"session bench: the run's files are in {folder}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)


async def _measure(plan: Plan, folder: Path, children: list[Child]) -> Outcome:
    helper_cpu, sentinel_cpu = cpu_plan(plan.pin)
    sink = await Child.start("sink", ["--out", str(folder / "sink.jsonl")], folder, cpu=helper_cpu)
    children.append(sink)
    port = int((await sink.expect("READY", timeout_s=30))["port"])
    model_url = None
    model_flags = SCENARIOS[plan.scenario][0]
    if model_flags is not None:
        model = await Child.start("model", model_flags, folder, cpu=helper_cpu, package="sessionbench")
        children.append(model)
        model_url = str((await model.expect("READY", timeout_s=30))["url"])
    config = write_project(folder, plan, sink_port=port, model_url=model_url)
    args = ["-c", str(config), "--rate", str(plan.rate), "--duration-s", str(plan.duration_s)]
    args += ["--watchers", str(plan.watchers), "--map", str(folder / "map.jsonl")]
    if model_flags is None:
        args.append("--no-sessions")
    if plan.profile is not None:
        args += ["--profile", str(plan.profile)]
    sentinel = await Child.start(
        "service", args, folder, cpu=sentinel_cpu, package="sessionbench", src=plan.src
    )
    children.append(sentinel)
    await sentinel.expect("READY", timeout_s=60)
    idle_start = cpu_seconds(sentinel.pid)
    await asyncio.sleep(IDLE_S)
    idle_cores = (cpu_seconds(sentinel.pid) - idle_start) / IDLE_S
    ours_start = sum(cpu_seconds(c.pid) for c in children) + cpu_seconds(os.getpid())
    busy_start, wall_start = machine_busy_seconds(), time.monotonic()
    cpu_start, go_at = cpu_seconds(sentinel.pid), time.monotonic()
    await sentinel.send("go")
    inserted = await sentinel.expect("INSERTED", timeout_s=plan.duration_s + 120)
    fires = _read_jsonl(folder / "map.jsonl")
    until = time.time() + plan.deadline_ms / 1000 + LATE_AFTER_S
    await _wait(port, len(fires), until)
    cpu_s = cpu_seconds(sentinel.pid) - cpu_start - idle_cores * (time.monotonic() - go_at)
    ours = sum(cpu_seconds(c.pid) for c in children) + cpu_seconds(os.getpid()) - ours_start
    other = (machine_busy_seconds() - busy_start - ours) / (time.monotonic() - wall_start)
    loadavg = load_average()
    for child in reversed(children):
        if await child.stop() != 0:
            raise ChildFailed(f"{child.role} exited with an error; see {child.log_path}")
    return _analyse(plan, fires, _read_jsonl(folder / "sink.jsonl"), inserted, cpu_s, other, loadavg)


def _analyse(
    plan: Plan,
    fires: list[dict[str, Any]],
    records: list[dict[str, Any]],
    inserted: dict[str, Any],
    cpu_s: float,
    other: float,
    loadavg: str,
) -> Outcome:
    fired = {str(f["callbackId"]): float(f["firedAt"]) for f in fires}
    first: dict[str, tuple[float, str]] = {}
    duplicates = stray = 0
    for record in sorted((r for r in records if "at" in r), key=lambda r: r["at"]):
        callback_id = str(record["callbackId"])
        if record.get("page") is False and str(record["key"]).rsplit(":", 1)[-1].startswith("notify"):
            continue  # the agent's finding after the fallback: a follow-up of the page, not a second one
        if callback_id not in fired:
            stray += 1
        elif callback_id in first:
            duplicates += 1  # a second message for one fire: a repeat, or notify and fallback both
        else:
            first[callback_id] = (float(record["at"]), str(record["key"]).rsplit(":", 1)[-1])
    latencies = sorted(1000 * (at - fired[cid]) for cid, (at, _) in first.items())
    agent = sum(1 for _, kind in first.values() if kind.startswith("notify"))
    last = max((at for at, _ in first.values()), default=0.0)
    span = last - min(fired.values(), default=last)
    return Outcome(
        plan=plan,
        fires=len(fired),
        cpu_s=cpu_s,
        agent=agent,
        fallbacks=sum(1 for _, kind in first.values() if kind == "fallback"),
        lost=len(fired) - len(first),
        duplicates=duplicates,
        stray=stray,
        latency_p50_ms=percentile(latencies, 0.5),
        latency_p99_ms=percentile(latencies, 0.99),
        completed_per_s=len(first) / span if span > 0 else math.nan,
        intake_lag_p99_ms=float(inserted["lagP99Ms"]),
        intake_errors=int(inserted["errors"]),
        first_error=inserted["firstError"],
        other_load=max(0.0, other),
        loadavg=loadavg,
    )
