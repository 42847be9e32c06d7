"""Benchmark: µs per condition evaluation, Sentinel's against hand-written Python, before and after.

    python bench/conditions.py --quick      # a few seconds; the last line is JSON; RESULTS.md untouched
    python bench/conditions.py              # more repeats; writes the conditions-results section
    python bench/conditions.py --before /path/to/other/src   # the "before" column's source tree

Each case is a watcher's ``conditions`` and ``match`` with an observation and the previous one,
as the firing pipeline evaluates them on every poll. Three ways to get the same answer are timed:

- *plain*: a hand-written function doing the same checks (dict and list lookups, comparisons,
  one RE2 search through google-re2's public `search()`, no semantics beyond the case's values): the floor;
- *before*: the ``sentinel_hooks`` under ``--before`` (default: the main worktree's ``src``);
- *after*: this checkout's ``src``.

Each side runs in a worker process (this script with ``--worker``) whose ``PYTHONPATH`` is that
source tree; it calls what the pipeline calls on every observation (``holds`` when the package
has it, else ``evaluate(...).matched``; from ``core.checks``, or ``core.conditions`` in older
trees), asserts the answer equals the plain function's, and times batches with
``time.perf_counter_ns``: µs per evaluation is a batch's time over its size, min and median over
all batches (plain is timed in both workers, interleaved with Sentinel's batches).
The workers alternate for ``--rounds`` rounds, so a burst of load on this shared machine hits
both sides. Conditions are compiled on first use; the warm-up evaluates each case first.

The cases (all conditions hold, so ``match: all`` evaluates every leaf; ``nested`` is ``match:
any`` whose first group fails):

- ``issue`` (issue 18 point 5; target ≤ 10 µs): a 112 KB status-page summary (283 components)
  and five conditions with one ``matches``:
  ``status.indicator in [major, critical]``, ``components.12.status neq operational``,
  ``meta.error_rate gte 0.05``, ``incidents[0].name matches (?i)(outage|elevated error)``,
  ``page.updated_at changed``;
- ``nested``: the same payload, ``match: any`` over ``{all: [status.indicator eq critical,
  meta.open_incidents gte 3]}`` (false) and ``{any: [page.name startsWith Prod,
  incidents.0.impact in [major, critical], meta.open_incidents gt "0"]}``;
- ``price``: a 1 KB price feed, ``ethereum.usd lt 2000``, ``ethereum.usd_24h_change lte "-3"``
  (a numeric string), ``ethereum.last_updated_at changed``, ``bitcoin.usd exists``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
HERE_SRC = BENCH.parent / "src"
DEFAULT_BEFORE = Path("/work/main/src")
RESULTS = BENCH / "RESULTS.md"
TARGET_CASE, TARGET_US = "issue", 10.0
BEGIN = "<!-- conditions-results:begin (written by bench/conditions.py; edit outside these markers) -->"
END = "<!-- conditions-results:end -->"
INTRO = "## Conditions (`bench/conditions.py`)\n\n"
PATTERN = "(?i)(outage|elevated error)"

Payloads = tuple[Any, Any]


def status_page() -> Payloads:
    """A status-page summary of 112 KB (283 components) and the poll before it."""
    rnd = random.Random(18)
    components = [
        {
            "id": f"c{i:04d}x{rnd.randrange(16**8):08x}",
            "name": f"Component {i} " + "api" * rnd.randrange(1, 5),
            "status": "degraded_performance" if i == 12 else "operational",
            "created_at": "2024-01-02T03:04:05.000Z",
            "updated_at": f"2025-06-{1 + i % 28:02d}T10:00:00.000Z",
            "position": i,
            "description": "Lorem ipsum dolor sit amet " * rnd.randrange(1, 6),
            "showcase": bool(i % 2),
            "group_id": None,
            "page_id": "kctbh9vrtdwd",
            "group": False,
            "only_show_if_degraded": False,
        }
        for i in range(283)
    ]
    now = {
        "page": {"id": "kctbh9vrtdwd", "name": "Example", "updated_at": "2025-06-30T10:00:00.000Z"},
        "status": {"indicator": "major", "description": "Partial System Outage"},
        "meta": {"open_incidents": 1, "error_rate": 0.0731},
        "components": components,
        "incidents": [
            {
                "id": "inc1",
                "name": "Elevated error rates on the EU API",
                "status": "investigating",
                "impact": "major",
                "incident_updates": [{"body": "We are investigating elevated errors. " * 3}],
            }
        ],
        "scheduled_maintenances": [],
    }
    text = json.dumps(now)
    before = json.loads(text)
    before["page"]["updated_at"] = "2025-06-30T09:59:00.000Z"
    return json.loads(text), before  # parsed, as an observation is


def price_feed() -> Payloads:
    """A 1 KB price feed and the poll before it."""
    coins = {
        name: {"usd": price, "usd_24h_change": change, "usd_24h_vol": 1.5e10, "last_updated_at": 1751277600}
        for name, price, change in [
            ("ethereum", 1999.5, -3.25),
            ("bitcoin", 107345.12, -0.5),
            *[(f"coin{i}", 1.0 + i, 0.1 * i) for i in range(10)],
        ]
    }
    before = json.loads(json.dumps(coins))
    before["ethereum"]["last_updated_at"] = 1751277540
    return json.loads(json.dumps(coins)), before


# Each case: payload maker, match, conditions as written in a watcher file, and the plain checks
# (given the observation, the previous one and a boolean RE2 search of PATTERN).
CASES: dict[str, tuple[Callable[[], Payloads], str, list[dict[str, Any]]]] = {
    "issue": (
        status_page,
        "all",
        [
            {"path": "status.indicator", "op": "in", "value": ["major", "critical"]},
            {"path": "components.12.status", "op": "neq", "value": "operational"},
            {"path": "meta.error_rate", "op": "gte", "value": 0.05},
            {"path": "incidents[0].name", "op": "matches", "value": PATTERN},
            {"path": "page.updated_at", "op": "changed"},
        ],
    ),
    "nested": (
        status_page,
        "any",
        [
            {
                "all": [
                    {"path": "status.indicator", "op": "eq", "value": "critical"},
                    {"path": "meta.open_incidents", "op": "gte", "value": 3},
                ]
            },
            {
                "any": [
                    {"path": "page.name", "op": "startsWith", "value": "Prod"},
                    {"path": "incidents.0.impact", "op": "in", "value": ["critical", "major"]},
                    {"path": "meta.open_incidents", "op": "gt", "value": "0"},
                ]
            },
        ],
    ),
    "price": (
        price_feed,
        "all",
        [
            {"path": "ethereum.usd", "op": "lt", "value": 2000},
            {"path": "ethereum.usd_24h_change", "op": "lte", "value": "-3"},
            {"path": "ethereum.last_updated_at", "op": "changed"},
            {"path": "bitcoin.usd", "op": "exists"},
        ],
    ),
}


def plain_issue(now: Any, before: Any, search: Callable[[str], bool]) -> bool:
    return (
        now["status"]["indicator"] in ("major", "critical")
        and now["components"][12]["status"] != "operational"
        and now["meta"]["error_rate"] >= 0.05
        and search(now["incidents"][0]["name"])
        and now["page"]["updated_at"] != before["page"]["updated_at"]
    )


def plain_nested(now: Any, before: Any, search: Callable[[str], bool]) -> bool:
    first = now["status"]["indicator"] == "critical" and now["meta"]["open_incidents"] >= 3
    return first or (
        now["page"]["name"].startswith("Prod")
        or now["incidents"][0]["impact"] in ("critical", "major")
        or now["meta"]["open_incidents"] > 0
    )


def plain_price(now: Any, before: Any, search: Callable[[str], bool]) -> bool:
    eth = now["ethereum"]
    return (
        eth["usd"] < 2000
        and eth["usd_24h_change"] <= -3
        and eth["last_updated_at"] != before["ethereum"]["last_updated_at"]
        and now["bitcoin"].get("usd") is not None
    )


PLAIN = {"issue": plain_issue, "nested": plain_nested, "price": plain_price}


def _batches(fn: Callable[[], Any], size: int, count: int, out: list[float]) -> None:
    """Append ``count`` samples of µs per call, each from a batch of ``size`` calls."""
    for _ in range(count):
        start = time.perf_counter_ns()
        for _ in range(size):
            fn()
        out.append((time.perf_counter_ns() - start) / size / 1000)


def worker(batches: int, size: int) -> dict[str, Any]:
    """Time every case in this process (sentinel_hooks from PYTHONPATH); the samples as JSON."""
    import re2
    from pydantic import TypeAdapter

    from sentinel_hooks.core import conditions

    # Where evaluation lives: core.checks (this tree), or core.conditions in older trees.
    try:
        from sentinel_hooks.core import checks as evaluation
    except ImportError:
        evaluation = conditions
    if not hasattr(evaluation, "evaluate"):
        evaluation = conditions
    holds = getattr(evaluation, "holds", None)
    options = re2.Options()
    options.log_errors = False
    regexp = re2.compile(PATTERN, options)

    # The floor's search: google-re2's public search(), as Sentinel calls it.
    def search(text: str) -> bool:
        return regexp.search(text) is not None

    adapter = TypeAdapter(list[conditions.ConditionNode])
    samples: dict[str, Any] = {"api": "holds" if holds else "evaluate().matched"}
    for name, (make, mode, written) in CASES.items():
        now, before = make()
        nodes = adapter.validate_python(written)
        plain = PLAIN[name]
        if holds is not None:
            sentinel = functools.partial(holds, nodes, mode, now, before)
        else:
            sentinel = functools.partial(
                lambda *args: evaluation.evaluate(*args).matched, nodes, mode, now, before
            )
        floor = functools.partial(plain, now, before, search)
        if not floor() is sentinel() is evaluation.evaluate(nodes, mode, now, before).matched:
            raise SystemExit(f"{name}: sentinel and the plain checks disagree")
        plain_us: list[float] = []
        sentinel_us: list[float] = []
        for _ in range(batches):  # interleaved, so load bursts hit both
            _batches(floor, size, 1, plain_us)
            _batches(sentinel, size, 1, sentinel_us)
        samples[name] = {
            "plain": plain_us,
            "sentinel": sentinel_us,
            "payload_bytes": len(json.dumps(now)),
            "leaves": json.dumps(written).count('"path"'),
        }
    public: list[float] = []
    _batches(lambda: regexp.search("Elevated error rates on the EU API"), size, batches, public)
    samples["re2_public_search_us"] = min(public)
    return samples


def run_worker(src: Path, batches: int, size: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--worker", "--batches", str(batches), "--size", str(size)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker on {src} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """min and median µs per case, over every batch of every round."""
    summary: dict[str, Any] = {
        "api": rounds[0]["api"],
        "re2_public_search_us": rounds[0]["re2_public_search_us"],
    }
    for name in CASES:
        entry: dict[str, Any] = {
            "payload_bytes": rounds[0][name]["payload_bytes"],
            "leaves": rounds[0][name]["leaves"],
        }
        for side in ("plain", "sentinel"):
            values = [value for one in rounds for value in one[name][side]]
            entry[side] = {"min": min(values), "median": statistics.median(values)}
        summary[name] = entry
    return summary


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:  # not Linux
        return "unknown"


def machine() -> str:
    cpu = "unknown CPU"
    info = Path("/proc/cpuinfo")
    if info.exists():
        names = [
            line.split(":", 1)[1].strip() for line in info.read_text().splitlines() if "model name" in line
        ]
        cpu = names[0] if names else cpu
    versions = []
    for package in ("pydantic", "google-re2"):
        try:
            from importlib.metadata import version

            versions.append(f"{package} {version(package)}")
        except Exception:  # a version we cannot read is just left out
            continue
    commit = subprocess.run(
        ["git", "-C", str(BENCH.parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return (
        f"{os.cpu_count()} CPU ({cpu}), Linux {platform.release()}, Python {sys.version.split()[0]}, "
        + ", ".join(versions)
        + (f", after = commit {commit}" if commit else "")
    )


def _us(side: dict[str, float]) -> str:
    return f"{side['min']:.2f} / {side['median']:.2f}"


def table(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    rows = [
        "| case | leaves | payload | plain µs min / median | before µs min / median "
        "| after µs min / median | after ÷ plain (median) | before ÷ after (median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in CASES:
        a = after[name]
        plain = a["plain"]["median"]
        b = before[name]["sentinel"] if before else None
        speedup = f"{b['median'] / a['sentinel']['median']:.1f}x" if b else "-"
        rows.append(
            f"| {name} | {a['leaves']} | {a['payload_bytes'] / 1000:.1f} KB | {_us(a['plain'])} "
            f"| {_us(b) if b else '-'} | {_us(a['sentinel'])} | {a['sentinel']['median'] / plain:.1f}x "
            f"| {speedup} |"
        )
    return "\n".join(rows)


def verdict(after: dict[str, Any]) -> str:
    median = after[TARGET_CASE]["sentinel"]["median"]
    word = "**met**" if median <= TARGET_US else "**NOT met**"
    return (
        f"Target (issue 18.5): `{TARGET_CASE}` ≤ {TARGET_US:.0f} µs per evaluation: {word} "
        f"({median:.2f} µs median)."
    )


def section(
    before: dict[str, Any] | None, after: dict[str, Any], *, load: str, command: str, before_src: str
) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    notes = (
        f"*plain* is hand-written Python doing the same checks (the floor); *before* is `{before_src}` "
        f"({before['api'] if before else '-'}), *after* this checkout ({after['api']}), each in its own "
        "process; µs per evaluation of the whole list, min and median over batches timed with "
        "`time.perf_counter_ns`. The cases are in the module docstring of `bench/conditions.py`. "
        "google-re2's public `search()` of the matched name alone costs "
        f"{after['re2_public_search_us']:.2f} µs "
        "(it builds a match object); the plain checks and *after* both call it."
    )
    return "\n\n".join(
        [
            BEGIN,
            f"Measured {now} on {machine()}; load average {load} (1, 5, 15 min; start → end of the run).",
            table(before, after),
            verdict(after),
            notes,
            f"Reproduce: `{command}`.",
            END,
        ]
    )


def write_results(generated: str) -> None:
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        RESULTS.write_text(head + generated + rest.split(END, 1)[1])
    else:
        RESULTS.write_text(text.rstrip("\n") + "\n\n" + INTRO + generated + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one round, few batches; RESULTS.md untouched")
    parser.add_argument("--before", type=Path, default=DEFAULT_BEFORE, help="src tree of the 'before' column")
    parser.add_argument("--rounds", type=int, help="alternating worker rounds (default 3; quick 1)")
    parser.add_argument("--batches", type=int, help="batches per case per round (default 40; quick 8)")
    parser.add_argument("--size", type=int, default=2000, help="evaluations per batch")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    batches = args.batches or (8 if args.quick else 40)
    if args.worker:
        print(json.dumps(worker(batches, args.size)))
        return 0
    rounds = args.rounds or (1 if args.quick else 3)
    load = loadavg()
    has_before = (args.before / "sentinel_hooks").is_dir() and args.before.resolve() != HERE_SRC.resolve()
    before_rounds, after_rounds = [], []
    for _ in range(rounds):
        if has_before:
            before_rounds.append(run_worker(args.before, batches, args.size))
        after_rounds.append(run_worker(HERE_SRC, batches, args.size))
    before = summarise(before_rounds) if before_rounds else None
    after = summarise(after_rounds)
    load = f"{load} → {loadavg()}"
    print(f"load average {load}")
    print(table(before, after))
    print(verdict(after))
    if not (args.quick or args.no_write):
        command = "python bench/conditions.py" + (
            f" --before {args.before}" if args.before != DEFAULT_BEFORE else ""
        )
        write_results(section(before, after, load=load, command=command, before_src=str(args.before)))
        print(f"wrote {RESULTS.relative_to(BENCH.parent)}")
    summary = {
        "benchmark": "conditions",
        "load": load,
        "target_us": TARGET_US,
        "target_met": after[TARGET_CASE]["sentinel"]["median"] <= TARGET_US,
        "cases": {
            name: {
                "plain_us": round(after[name]["plain"]["median"], 3),
                "before_us": round(before[name]["sentinel"]["median"], 3) if before else None,
                "after_us": round(after[name]["sentinel"]["median"], 3),
            }
            for name in CASES
        },
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
