"""``bench/RESULTS.md``'s hook-session section: the table, the machine, the targets, how to reproduce.

Only the part between the ``sessions-results`` markers is rewritten.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from sessionbench.orchestrate import MODEL_TIMEOUT_MS, SCENARIOS, Outcome

RESULTS = Path(__file__).resolve().parent.parent / "RESULTS.md"
BEGIN = "<!-- sessions-results:begin (written by bench/sessions.py; edit outside these markers) -->"
END = "<!-- sessions-results:end -->"
TARGET_MACHINERY_MS = 2.0
MODEL_TURNS = 2  # the bench model answers a fire with a notify, then "done"


def machinery_ms(outcome: Outcome, outcomes: Sequence[Outcome]) -> float:
    """CPU per fire above the floor (the same code and store without hook sessions)."""
    floor = next(
        (
            o
            for o in outcomes
            if o.plan.scenario == "no sessions"
            and (o.plan.label, o.plan.store_kind) == (outcome.plan.label, outcome.plan.store_kind)
        ),
        None,
    )
    return math.nan if floor is None else outcome.cpu_ms_per_fire - floor.cpu_ms_per_fire


def sustainable(outcome: Outcome) -> tuple[float, str]:
    """Fires/s one process sustains: its CPU (one core: the loop and the store thread share the
    GIL) or, with a slow model, the session slots (hookConcurrency / time a fire holds one)."""
    cpu = 1000 / outcome.cpu_ms_per_fire if outcome.cpu_ms_per_fire > 0 else math.inf
    if outcome.plan.scenario == "1 s":
        slots = outcome.plan.concurrency / MODEL_TURNS
        if slots < cpu:
            return slots, "session slots"
    return cpu, "CPU"


def _f(value: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.{digits}f}"


def render(outcomes: Sequence[Outcome]) -> str:
    plan = outcomes[0].plan
    cpu = platform.processor() or platform.machine()
    lines = [
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPU ({cpu}), Linux "
        f"{platform.release()}, Python {platform.python_version()}. {plan.rate:g} fires/s for "
        f"{plan.duration_s:g} s per row, {plan.watchers} watcher ids (session keys), "
        f"hookConcurrency {plan.concurrency}; before = `{outcomes[0].plan.src}`.",
        "",
        "| store | model | code | CPU ms per fire | session machinery ms per fire | sustainable fires/s "
        "(bound) | agent's messages | fallbacks | lost | duplicates | outcome p50 / p99 ms | kept up "
        "| load average | other load (cores) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for o in outcomes:
        rate, bound = sustainable(o)
        machinery = "-" if o.plan.scenario == "no sessions" else _f(machinery_ms(o, outcomes))
        lines.append(
            f"| {o.plan.store_kind} | {o.plan.scenario} | {o.plan.label} | {_f(o.cpu_ms_per_fire)} "
            f"| {machinery} | {_f(rate, 0)} ({bound}) | {o.agent:,} | {o.fallbacks:,} | {o.lost} "
            f"| {o.duplicates} | {_f(o.latency_p50_ms, 0)} / {_f(o.latency_p99_ms, 0)} "
            f"| {'yes' if o.kept_up else 'NO'} | {o.loadavg} | {_f(o.other_load)} |"
        )
    lines += [
        "",
        f"Targets (session machinery ≤ {TARGET_MACHINERY_MS:g} ms of CPU per fire with an instant "
        "model; nothing lost or duplicated):",
    ]
    for o in outcomes:
        if o.plan.scenario == "instant" and o.plan.label == "after":
            value = machinery_ms(o, outcomes)
            met = "met" if value <= TARGET_MACHINERY_MS else "**NOT met**"
            lines.append(f"- {o.plan.store_kind}: ≤ {TARGET_MACHINERY_MS:g} ms {met} ({_f(value)} ms)")
    bad = [o for o in outcomes if o.lost or o.duplicates]
    lines.append(
        "- lost and duplicated outcomes: "
        + ("zero in every row" if not bad else f"**NOT zero** in {len(bad)} row(s)")
    )
    deadlines = ", ".join(f"{name} {ms / 1000:g} s" for name, (_, ms) in SCENARIOS.items())
    lines += [
        "",
        "CPU ms per fire: the Sentinel process (all threads) from the first fire to the last "
        "outcome, less its idle use over as long, per fire. Session machinery: that minus the "
        "same code's *no sessions* row (intake, relay, fallback delivery only). Sustainable "
        "fires/s: 1,000 / CPU ms per fire (one core), or for the 1 s model hookConcurrency / 2 s "
        "(each fire holds a session slot for two model turns) when that is lower; with the "
        "default hookConcurrency of 8 that is 4 fires/s. Response deadlines (hookResponseTimeoutMs): "
        f"{deadlines}; the model's timeoutMs {MODEL_TIMEOUT_MS / 1000:g} s. Kept up: every fire got "
        "exactly one message, the agent's with a model that answers, and the intake stayed on "
        "schedule.",
        "",
        "Reproduce: `python bench/sessions.py` (about 6 minutes; `--stores sqlite redis` adds Redis, "
        "with a redis-server of its own on a free port); `python bench/sessions.py --quick` for CI.",
    ]
    return "\n".join(lines)


def update_results(outcomes: Sequence[Outcome], path: Path = RESULTS) -> Path:
    """Replace the section between the markers (append it when missing); ``path``."""
    block = f"{BEGIN}\n\n{render(outcomes)}\n\n{END}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    start, end = text.find(BEGIN), text.find(END)
    if start != -1 and end > start:
        text = text[:start] + block + text[end + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n## Hook sessions (`bench/sessions.py`)\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")
    return path
