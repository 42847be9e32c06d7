"""Hook-session benchmark: CPU per fire and sustainable fires/s with a silent, an instant and a 1 s model.

A whole Sentinel ``Service`` fires at a steady rate; each fire's hook session talks to a real
OpenAI-compatible model server on 127.0.0.1 (``sessionbench.model``) that answers with a
``sentinel_act`` notify, then ``done``: at once, after 1 s, or never (the silent model: the
relay's fallback reaches people). A webhook sink records every message, so each fire is
checked for exactly one (the agent's or the fallback): ``lost`` and ``duplicates``. A row
without hook sessions is the floor the session machinery is measured against. Every model
runs on "before" code (``--before-src``, default ``/work/main/src``) and "after" code (this
checkout's ``src``) in the same invocation.

    python bench/sessions.py --quick        instant model, this checkout only; one JSON line
    python bench/sessions.py                all models, before and after; bench/RESULTS.md
    python bench/sessions.py --models "no sessions" instant --no-before --no-write --repeat 5
                                            five rounds, the order flipped each round; the
                                            median session machinery per model and code
    python bench/sessions.py --models instant --watchers 32 …
                                            32 session keys instead of 1,024: sessions with
                                            earlier callbacks to recall (their memory)

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "src")]  # the package is not installed

from relaybench.procs import SRC_DIR  # noqa: E402  (after the path)
from sessionbench.orchestrate import SCENARIOS, Outcome, Plan, run  # noqa: E402
from sessionbench.report import machinery_ms, sustainable, update_results  # noqa: E402

DEFAULT_BEFORE = Path("/work/main/src")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="the instant model on this checkout only")
    parser.add_argument("--rate", type=float, default=None, help="fires per second (default 100; quick 40)")
    parser.add_argument(
        "--duration-s", type=float, default=None, help="seconds of firing (default 20; quick 3)"
    )
    parser.add_argument("--stores", nargs="+", choices=["sqlite", "redis"], default=["sqlite"])
    parser.add_argument("--models", nargs="+", choices=list(SCENARIOS), default=None)
    parser.add_argument("--before-src", type=Path, default=DEFAULT_BEFORE, help="the code to compare with")
    parser.add_argument("--no-before", action="store_true", help="run this checkout only")
    parser.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md alone")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every row this often (the order flipped each time); median machinery per row",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin the processes to cores")
    parser.add_argument(
        "--watchers",
        type=int,
        default=1024,
        help="watcher ids the fires take turns on, one session key each (default 1024: about two fires "
        "a key in a 20 s row; fewer give sessions with memory of earlier callbacks to recall)",
    )
    args = parser.parse_args(argv)
    if args.watchers < 1:
        parser.error("--watchers must be at least 1")
    return args


def plans(args: argparse.Namespace) -> list[Plan]:
    rate = args.rate or (40.0 if args.quick else 100.0)
    duration = args.duration_s or (3.0 if args.quick else 20.0)
    models = args.models or (["instant"] if args.quick else list(SCENARIOS))
    codes = [("after", SRC_DIR)]
    if not (args.quick or args.no_before):
        codes.insert(0, ("before", args.before_src.resolve()))
    return [
        Plan(
            model,
            rate,
            duration,
            label=label,
            src=src,
            store=store,
            watchers=args.watchers,
            pin=not args.no_pin,
        )
        for store in args.stores
        for model in models
        for label, src in codes
    ]


async def main_async(args: argparse.Namespace) -> list[list[Outcome]]:
    """Every round's outcomes. A round runs every plan; each next round runs them in the
    opposite order, so a drift of the machine's speed does not always favour the same row."""
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    rounds: list[list[Outcome]] = []
    for number in range(max(1, args.repeat)):
        outcomes: list[Outcome] = []
        ordered = plans(args)
        for plan in ordered if number % 2 == 0 else reversed(ordered):
            print(
                f"session bench: {plan.scenario} model, {plan.label}, {plan.store} …",
                file=sys.stderr,
                flush=True,
            )
            outcome = await run(plan)
            outcomes.append(outcome)
            print(json.dumps(outcome.row()), flush=True)
        rounds.append(outcomes)
    return rounds


def summary(rounds: list[list[Outcome]]) -> dict[str, object]:
    """The last line: per row its CPU, machinery and sustainable rate (the machinery is the
    row less the same round's no-sessions row); with several rounds every round's rows and the
    median machinery per store, model and code; lost and duplicates in all."""
    rows = []
    machinery: dict[str, list[float]] = {}
    for number, outcomes in enumerate(rounds, start=1):
        for o in outcomes:
            rate, bound = sustainable(o)
            above = machinery_ms(o, outcomes)
            if not math.isnan(above):
                machinery.setdefault(f"{o.plan.store_kind}/{o.plan.scenario}/{o.plan.label}", []).append(
                    above
                )
            rows.append(
                {
                    **({"round": number} if len(rounds) > 1 else {}),
                    "store": o.plan.store_kind,
                    "model": o.plan.scenario,
                    "code": o.plan.label,
                    "cpu_ms_per_fire": round(o.cpu_ms_per_fire, 3),
                    "machinery_ms_per_fire": None if math.isnan(above) else round(above, 3),
                    "sustainable_fires_per_s": round(rate),
                    "bound": bound,
                    "kept_up": o.kept_up,
                }
            )
    every = [o for outcomes in rounds for o in outcomes]
    medians = (
        {
            row: {"median": round(statistics.median(values), 3), "each": [round(v, 3) for v in values]}
            for row, values in machinery.items()
        }
        if len(rounds) > 1
        else {}
    )
    return {
        "fires": sum(o.fires for o in every),
        "lost": sum(o.lost for o in every),
        "duplicates": sum(o.duplicates for o in every),
        "rows": rows,
        **({"machinery_ms_per_fire": medians} if medians else {}),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        rounds = asyncio.run(main_async(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("session bench: interrupted; child processes stopped", file=sys.stderr)
        return 130
    if not (args.quick or args.no_write or args.no_before):  # the table shows the first round
        print(f"session bench: updated {update_results(rounds[0])}", file=sys.stderr)
    print(json.dumps(summary(rounds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
