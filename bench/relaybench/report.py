"""bench/RESULTS.md's Relay section: the table of a full run, the machine, how to reproduce.

The file is shared with other benchmarks, so this module only ever replaces the text between
its own markers (``relay-results:begin`` / ``relay-results:end``). When they are missing it
appends a ``## Relay`` section holding them at the end of the file; everything outside the
markers (other sections, the hand-written analysis under the table) is left as it is.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from relaybench.orchestrate import Outcome

RESULTS = Path(__file__).resolve().parent.parent / "RESULTS.md"
BEGIN = "<!-- relay-results:begin (written by bench/relay.py; edit outside these markers) -->"
END = "<!-- relay-results:end -->"
P99_TARGET_MS = 250.0
MAX_TARGET_MS = 1000.0


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_line(redis_version: str | None) -> str:
    """One sentence naming the date, the machine and the versions that matter."""
    from sentinel_hooks import __version__

    redis = f", Redis {redis_version}" if redis_version else ""
    return (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} CPU "
        f"({_cpu_model()}), Linux {platform.release()}, Python {platform.python_version()}, "
        f"aiohttp {_version('aiohttp')}, redis-py {_version('redis')}{redis}, sentinel-hooks {__version__}."
    )


def _row(outcome: Outcome) -> str:
    n = outcome.numbers
    d = outcome.details()
    settle = (
        "-" if outcome.settle_ms is None else f"{outcome.settle_ms[0]:,.1f} / {outcome.settle_ms[1]:,.1f}"
    )
    lag = "-" if outcome.plan.preload else f"{outcome.insert_lag_p99_ms:,.0f}"
    redis_cpu = "-" if d["redis_server_cpu_s_per_1k"] is None else f"{d['redis_server_cpu_s_per_1k']:.3f}"
    return (
        f"| {outcome.plan.store_kind} | {outcome.plan.scenario} | {n.contracts:,} | "
        f"{n.lateness_p50_ms:,.1f} / {n.lateness_p99_ms:,.1f} / {n.lateness_max_ms:,.1f} | {settle} | "
        f"{n.over_1s:,} | {n.deliveries_per_s:,.1f} | {n.lost:,} | {n.duplicates:,} | "
        f"{outcome.intake_errors:,} | {d['cpu_s_per_1k_fallbacks']:.3f} | "
        f"{d['relay_phase_cpu_s_per_1k']:.3f} | {redis_cpu} | "
        f"{lag} | {outcome.deadline_span_s:.1f} | {outcome.other_load:.2f} |"
    )


def _verdict(outcome: Outcome) -> str:
    n = outcome.numbers
    p99 = "met" if n.lateness_p99_ms < P99_TARGET_MS else "**NOT met**"
    worst = "met" if n.lateness_max_ms < MAX_TARGET_MS and n.lost == 0 else "**NOT met**"
    return (
        f"- {outcome.plan.store_kind}, {outcome.plan.scenario}: p99 < 250 ms {p99} "
        f"({n.lateness_p99_ms:,.1f} ms); max < 1 s {worst} ({n.lateness_max_ms:,.1f} ms, {n.lost:,} lost)"
    )


def render(outcomes: Sequence[Outcome], redis_version: str | None) -> str:
    """The text between the markers."""
    lines = [
        machine_line(redis_version),
        "",
        "| store | scenario | contracts created | lateness p50 / p99 / max ms | relay settle p50 / p99 ms "
        "| > 1 s late | deliveries/s "
        "| lost | duplicates | intake errors | CPU s per 1k (whole run) | CPU s per 1k (relay phase) "
        "| redis-server CPU s per 1k "
        "| intake lag p99 ms | deadline span s | other load (cores) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(_row(o) for o in outcomes),
        "",
        "Targets (p99 lateness < 250 ms, max < 1 s and nothing lost):",
        *(_verdict(o) for o in outcomes),
        "",
        "Lateness is the arrival at the sink minus the deadline; relay settle is when the relay handed the "
        "fallback to the outbox (the contract's stored settledAt) minus the deadline, the rest is outbox "
        "wait and sending. "
        "CPU columns are the Sentinel process's (all threads) per 1,000 fallbacks delivered; the relay "
        "phase starts when the last callback was accepted. Other load: cores kept busy during the run by "
        "processes other than the benchmark's three and redis-server (the machine is shared); each plan ran "
        "up to `--attempts` times to find a quiet run.",
        "",
        "Reproduce: `python bench/relay.py --attempts 3` (4 to 12 minutes; starts a redis-server of its "
        "own on a free port). One store, 1,000 contracts: `python bench/relay.py --quick [--store redis]`.",
    ]
    return "\n".join(lines)


def update_results(outcomes: Sequence[Outcome], redis_version: str | None, path: Path = RESULTS) -> Path:
    """Replace the Relay block of ``path`` (append the section when it has none); ``path``."""
    block = f"{BEGIN}\n\n{render(outcomes, redis_version)}\n\n{END}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    start, end = text.find(BEGIN), text.find(END)
    if start != -1 and end > start:
        text = text[:start] + block + text[end + len(END) :]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + "## Relay\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")
    return path
