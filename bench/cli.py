"""Benchmark: how quick the CLI is, and how fast a project loads (issue 18.2 and 18.3).

    python bench/cli.py --quick    # 100 watcher files, load_config at 1k; under a minute; last line is JSON
    python bench/cli.py            # 500 watcher files, load_config at 1k and 10k; updates RESULTS.md

Each command runs as a fresh process, "before" (``--before``, default /work/main/src) and
"after" (this checkout's src) in turn within one run, next to ``python -c pass`` as the floor:
wall time (perf_counter around the child) and CPU time (user + system from the child's
rusage, ``os.wait4``). ``load_config`` is timed inside a fresh process per run, after its
imports, with ``time.process_time``. The project is generated: N http-poll watcher files with
three conditions, a messageTemplate and a dedupeKeyTemplate each (every template differs: none
is shared), a payloadTemplate of ``${…}`` paths, a sentinel.yaml with two targets and a model.
``load_config`` is also timed on bench/startup.py's project: N one-line watchers in one file.

Children read their bytecode from a cache, as an installed package does (pip writes the
``.pyc`` files at install): each side gets its own ``PYTHONPYCACHEPREFIX`` in the temporary
directory, filled by one unrecorded run of every command, and ``PYTHONDONTWRITEBYTECODE`` is
dropped from their environment. ``--no-bytecode-cache`` keeps the caller's environment instead
(with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__`` beside the sources, every run then
compiles the modules it imports).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from watchbench.bytecode import child_env  # noqa: E402  (after the path)

AFTER_SRC = HERE.parent / "src"
RESULTS = HERE / "RESULTS.md"
BEGIN = "<!-- cli-results:begin (written by bench/cli.py; edit outside these markers) -->"
END = "<!-- cli-results:end -->"
TARGET_HELP_S = 0.150
TARGET_TEST_S = 0.300
TARGET_VALIDATE_S = 1.0
TESTED = "w00042"

SERVICE_YAML = """\
store: sqlite:///.sentinel/state.db
server: {host: 127.0.0.1, port: 8765}
allowedHosts: [127.0.0.1, api.example.com]
limits: {maxWatchers: 100000}
models:
  rules: {type: scripted}
defaultHookModel: rules
targets:
  console: {type: console}
  log: {type: file, path: .sentinel/notifications.jsonl}
escalationTargets: [console]
"""

WATCHER_YAML = """\
# bench watcher {i}
id: w{i:05d}
strategy: http-poll
endpoint: https://api.example.com/v1/price?asset=a{i}
intervalMs: 60000
enabled: {enabled}
conditions:
  - {{path: data.price, op: lt, value: {i}.5}}
  - {{path: data.status, op: eq, value: open}}
  - path: data.volume
    op: gte
    value: 1000
fire:
  eventName: price_low_{i}
  priority: high
  operatorGoal: >-
    The price of asset a{i} dropped. Compare with recent observations,
    assess severity and notify with a concise summary.
  messageTemplate: "Asset a{i} is at ${{payload.data.price}} (status {{{{ payload.data.status }}}})."
  dedupeKeyTemplate: "a{i}-{{{{ payload.data.status }}}}"
  payloadTemplate: {{price: "${{payload.data.price}}", asset: a{i}, at: "${{timestamp}}"}}
  notifyResolved: true
deliveryTargets: [console, log]
tags: [bench, "group-{group}"]
"""

PAYLOAD = '{"data": {"price": 3, "status": "open", "volume": 5000}}'

LOAD_SCRIPT = """\
import json, sys, time
from pathlib import Path
from sentinel_hooks.config.loader import load_config
cpu, wall = time.process_time(), time.perf_counter()
loaded = load_config(Path(sys.argv[1]), environ={})
print(json.dumps({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                  "watchers": len(loaded.watchers)}))
"""


def write_project(root: Path, n: int) -> Path:
    """sentinel.yaml and ``n`` watcher files under ``root``; the config's path."""
    (root / "watchers").mkdir(parents=True, exist_ok=True)
    (root / "sentinel.yaml").write_text(SERVICE_YAML)
    for i in range(n):
        text = WATCHER_YAML.format(i=i, group=i % 10, enabled="false" if i % 7 == 0 else "true")
        (root / "watchers" / f"w{i:05d}.yaml").write_text(text)
    return root / "sentinel.yaml"


def write_one_file_project(root: Path, n: int) -> Path:
    """bench/startup.py's project: ``n`` one-line http-poll watchers in one file; the config's path."""
    sys.path.insert(0, str(HERE))
    from watchbench.project import write_project as write_startup_project

    return write_startup_project(root, n=n, port=9, interval_ms=10_000).config_file


@dataclass
class Samples:
    """Wall and CPU seconds of repeated runs of one command on one side."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def stats(self) -> dict[str, float]:
        def three(values: list[float]) -> tuple[float, float, float]:
            return min(values), statistics.median(values), max(values)

        wmin, wmed, wmax = three(self.wall)
        cmin, cmed, cmax = three(self.cpu)
        return {
            "wall_min_s": wmin,
            "wall_median_s": wmed,
            "wall_max_s": wmax,
            "cpu_min_s": cmin,
            "cpu_median_s": cmed,
            "cpu_max_s": cmax,
        }


def sentinel_command() -> list[str]:
    """The console script next to this Python, else ``python -m sentinel_hooks``."""
    script = Path(sys.executable).parent / "sentinel"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sentinel_hooks"]


def children_cpu_s() -> float:
    """User + system CPU seconds of every child waited for so far (RUSAGE_CHILDREN)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Side:
    """The code one side runs (``src`` on PYTHONPATH) and its bytecode cache (None: the caller's)."""

    src: Path | None
    pycache: Path | None = None

    def env(self) -> dict[str, str]:
        return child_env(self.src, self.pycache)


def run_child(argv: Sequence[str], *, side: Side, cwd: Path) -> tuple[float, float, int, str]:
    """``(wall_s, cpu_s, exit code, output)`` of one child process; its CPU is the growth of
    RUSAGE_CHILDREN while it ran (only this child was waited for meanwhile)."""
    env = side.env()
    env["COLUMNS"] = "120"
    cpu_before = children_cpu_s()
    started = time.perf_counter()
    child = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    return wall, children_cpu_s() - cpu_before, child.returncode, child.stderr + child.stdout[-200:]


def measure(
    sides: dict[str, Side], commands: dict[str, list[str]], *, runs: int, cwd: Path
) -> dict[str, dict[str, Samples]]:
    """Every command on every side, ``runs`` times, interleaved so drift hits both sides alike
    (after one unrecorded run of each, which fills the bytecode caches)."""
    found: dict[str, dict[str, Samples]] = {name: {side: Samples() for side in sides} for name in commands}
    for run in range(runs + 1):
        for name, argv in commands.items():
            for side_name, side in sides.items():
                wall, cpu, code, said = run_child(argv, side=side, cwd=cwd)
                if code != 0:
                    raise SystemExit(f"{name} ({side_name}) exited {code}: {said.strip()[-500:]}")
                if run > 0:
                    found[name][side_name].wall.append(wall)
                    found[name][side_name].cpu.append(cpu)
    return found


def measure_load(sides: dict[str, Side], config: Path, *, runs: int) -> dict[str, Samples]:
    """``load_config`` of ``config`` in a fresh process per run (imports excluded)."""
    found = {side: Samples() for side in sides}
    for _ in range(runs):
        for side_name, side in sides.items():
            result = subprocess.run(
                [sys.executable, "-c", LOAD_SCRIPT, str(config)],
                env=side.env(),
                capture_output=True,
                text=True,
                check=True,
            )
            answer = json.loads(result.stdout.strip().splitlines()[-1])
            found[side_name].wall.append(answer["wall_s"])
            found[side_name].cpu.append(answer["cpu_s"])
    return found


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="100 files, 3 runs, load at 1k; no RESULTS.md")
    parser.add_argument("--files", type=int, help="watcher files for validate/test (default 500; quick 100)")
    parser.add_argument("--runs", type=int, help="runs per command and side (default 7; quick 3)")
    parser.add_argument("--load-sizes", type=int, nargs="+", help="load_config sizes (default 1000 10000)")
    parser.add_argument("--load-runs", type=int, help="runs per load size and side (default 3; quick 1)")
    parser.add_argument(
        "--before",
        type=Path,
        default=Path("/work/main/src"),
        help="src of the 'before' side (skipped if absent)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="children use the caller's environment as it is (no bytecode cache of their own)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    files = args.files or (100 if args.quick else 500)
    runs = args.runs or (3 if args.quick else 7)
    load_sizes = args.load_sizes or ([1000] if args.quick else [1000, 10000])
    load_runs = args.load_runs or (1 if args.quick else 3)
    load_at_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="sentinel-cli-bench-") as tmp:
        root = Path(tmp)
        cached = not args.no_bytecode_cache
        sides: dict[str, Side] = {}
        if args.before.is_dir() and args.before.resolve() != AFTER_SRC.resolve():
            sides["before"] = Side(args.before, root / "pycache-before" if cached else None)
        sides["after"] = Side(AFTER_SRC, root / "pycache-after" if cached else None)
        config = write_project(root / "project", files)
        cli = sentinel_command()
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "sentinel --help": [*cli, "--help"],
            f"sentinel validate ({files} files)": [*cli, "validate", "-c", str(config)],
            f"sentinel test {TESTED}": [*cli, "test", TESTED, "-c", str(config), "--payload", PAYLOAD],
        }
        found = measure(sides, commands, runs=runs, cwd=root)
        loads: dict[str, dict[str, Samples]] = {}
        for size in load_sizes:
            big = write_project(root / f"load{size}", size)
            loads[f"{size:,} watcher files"] = measure_load(sides, big, runs=load_runs)
            one = write_one_file_project(root / f"one{size}", size)
            loads[f"{size:,} one-line watchers in one file"] = measure_load(sides, one, runs=load_runs)
    load_at_end = loadavg()
    summary = summarize(found, loads, files=files, load=(load_at_start, load_at_end))
    summary["bytecode_cache"] = cached
    if not args.quick and not args.no_write:
        write_results(RESULTS, section(summary, runs=runs, load_runs=load_runs, argv=argv))
    print(json.dumps(summary), flush=True)
    return 0


def summarize(
    found: dict[str, dict[str, Samples]],
    loads: dict[str, dict[str, Samples]],
    *,
    files: int,
    load: tuple[str, str],
) -> dict[str, Any]:
    """The numbers as one JSON-able dict, with the verdict on each target."""
    commands = {name: {side: s.stats() for side, s in by_side.items()} for name, by_side in found.items()}
    load_config = {
        shape: {side: s.stats() for side, s in by_side.items()} for shape, by_side in loads.items()
    }
    names = list(found)
    targets = {
        "help_le_150ms": (names[1], TARGET_HELP_S),
        "test_le_300ms": (names[3], TARGET_TEST_S),
        f"validate_{files}_le_1s": (names[2], TARGET_VALIDATE_S),
    }
    verdict = {
        key: commands[name]["after"]["wall_median_s"] <= limit for key, (name, limit) in targets.items()
    }
    return {
        "bench": "cli",
        "files": files,
        "loadavg_start": load[0],
        "loadavg_end": load[1],
        "commands": commands,
        "load_config": load_config,
        "targets_met": verdict,
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def _row(name: str, side: str, s: dict[str, float], before: dict[str, float] | None) -> str:
    ratio = f"{before['cpu_median_s'] / s['cpu_median_s']:.1f}x" if before and s["cpu_median_s"] > 0 else ""
    return (
        f"| {name} | {side} | {_ms(s['wall_min_s'])} / {_ms(s['wall_median_s'])} / {_ms(s['wall_max_s'])} "
        f"| {_ms(s['cpu_min_s'])} / {_ms(s['cpu_median_s'])} / {_ms(s['cpu_max_s'])} | {ratio} |"
    )


def section(summary: dict[str, Any], *, runs: int, load_runs: int, argv: list[str] | None) -> str:
    """The generated block of RESULTS.md."""
    sys.path.insert(0, str(HERE))
    from watchbench.report import machine

    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = [
        "| command | side | wall ms min / median / max | CPU ms min / median / max | CPU before / after |",
        "|---|---|---:|---:|---:|",
    ]
    rows = list(header)
    for name, by_side in summary["commands"].items():
        for side, stats in by_side.items():
            before = by_side.get("before") if side == "after" else None
            rows.append(_row(name, side, stats, before))
    load_rows = list(header)
    for shape, by_side in summary["load_config"].items():
        for side, stats in by_side.items():
            before = by_side.get("before") if side == "after" else None
            load_rows.append(_row(f"load_config, {shape}", side, stats, before))
    word = {True: "met", False: "**NOT met**"}
    names = list(summary["commands"])
    after = {name: summary["commands"][name]["after"] for name in names}
    met = summary["targets_met"]
    validate_key = f"validate_{summary['files']}_le_1s"
    verdicts = [
        f"- `sentinel --help` ≤ 150 ms wall: {word[met['help_le_150ms']]} "
        f"(median {_ms(after[names[1]]['wall_median_s'])} ms; `python -c pass` "
        f"{_ms(after[names[0]]['wall_median_s'])} ms)",
        f"- `sentinel test WATCHER` ≤ 300 ms wall: {word[met['test_le_300ms']]} "
        f"(median {_ms(after[names[3]]['wall_median_s'])} ms)",
        f"- `sentinel validate` on {summary['files']} watcher files ≤ 1 s wall: "
        f"{word[met[validate_key]]} "
        f"(median {_ms(after[names[2]]['wall_median_s'])} ms)",
    ]
    given = sys.argv[1:] if argv is None else argv
    command = "python bench/cli.py" + ("" if not given else " " + " ".join(given))
    return "\n\n".join(
        [
            BEGIN,
            "## CLI and config loading (`bench/cli.py`)",
            f"Measured {now} on {machine()}; load average {summary['loadavg_start']} at the start, "
            f"{summary['loadavg_end']} at the end (2 cores, shared with other work: wall times are "
            f"noisy, CPU times less so). {runs} runs per command and side, {load_runs} per load size. "
            + (
                "Both sides read cached bytecode, as an installed package does (one unrecorded run "
                "of each command fills each side's cache first)."
                if summary.get("bytecode_cache")
                else "Run with --no-bytecode-cache: the children compiled what they import when "
                "PYTHONDONTWRITEBYTECODE was set."
            ),
            "\n".join(rows),
            "`load_config` in a fresh process, imports excluded:",
            "\n".join(load_rows),
            "Targets (median wall of the after side):\n" + "\n".join(verdicts),
            f"Reproduce: `{command}` (before = `--before SRC`, default /work/main/src; after = this "
            "checkout). Quick: `python bench/cli.py --quick`.",
            END,
        ]
    )


def write_results(path: Path, generated: str) -> None:
    """Replace this benchmark's block in ``path``, or append it."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        path.write_text(before + generated + rest.split(END, 1)[1])
    else:
        path.write_text(text.rstrip("\n") + "\n\n" + generated + "\n")


if __name__ == "__main__":
    sys.exit(main())
