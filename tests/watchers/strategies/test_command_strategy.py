"""The `command` strategy against real probe processes (small ``python -c`` scripts)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import LimitsSpec
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, CommandWatcher
from sentinel_hooks.process_runner import ProbeRun, probe_env
from sentinel_hooks.watchers.strategies import command
from sentinel_hooks.watchers.strategies.command import CommandProbe
from sentinel_hooks.watchers.strategies.probe_state import ProbeFailure, ProbeReport
from sentinel_hooks.watchers.strategy import ObserveError, StrategyContext

# Prints the file ``report.txt`` of the working directory: tests rewrite it between polls.
ECHO_REPORT = "import sys; sys.stdout.write(open('report.txt').read())"


def make_probe(
    tmp_path: Path, argv: list[str], *, secrets: tuple[str, ...] = (), **keys: Any
) -> CommandProbe:
    """A probe strategy for ``argv`` run in ``tmp_path`` (watcher keys in camelCase)."""
    watcher = WATCHER_ADAPTER.validate_python(
        {"id": "probe", "strategy": "command", "command": argv, "intervalMs": 1000, **keys}
    )
    context = StrategyContext(
        http=cast(Any, None),
        clock=FakeClock(),
        limits=LimitsSpec(),
        base_dir=tmp_path,
        redactor=Redactor(secrets),
    )
    return command.create(cast(CommandWatcher, watcher), context)


def python_probe(tmp_path: Path, script: str, *, secrets: tuple[str, ...] = (), **keys: Any) -> CommandProbe:
    return make_probe(tmp_path, [sys.executable, "-c", script], secrets=secrets, **keys)


async def poll_report(probe: CommandProbe, tmp_path: Path, text: str) -> Any:
    """Poll once with ``text`` as the probe's stdout; the trigger it forces."""
    (tmp_path / "report.txt").write_text(text, encoding="utf-8")
    return (await probe.poll()).trigger


async def poll_error(probe: CommandProbe) -> str:
    with pytest.raises(ObserveError) as caught:
        await probe.poll()
    return str(caught.value)


def names_in(folder: Path, pattern: str) -> list[str]:
    return sorted(p.name for p in folder.glob(pattern))


def real_path(path: Path) -> str:
    return str(path.resolve())


def is_gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (exited, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def wait_gone(pid: int, within_s: float = 5.0) -> bool:
    """Poll /proc until ``pid`` is gone or ``within_s`` passes (SIGKILL delivery is asynchronous)."""
    deadline = time.monotonic() + within_s
    while not is_gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def test_terminal_class_fires_terminal_with_the_report_as_value(tmp_path: Path) -> None:
    """class: terminal forces a terminal trigger at once; the parsed object is the observation."""
    probe = python_probe(tmp_path, 'print(\'{"class": "terminal", "summary": "done"}\')')
    observed = await probe.poll()
    assert ("terminal", {"class": "terminal", "summary": "done"}) == (observed.trigger, observed.value)


async def test_same_output_stall_threshold_times_fires_no_progress(tmp_path: Path) -> None:
    """The same stdout hash seen stallThreshold times in a row forces no_progress."""
    probe = python_probe(tmp_path, ECHO_REPORT, probe={"stallThreshold": 3})
    seen = [await poll_report(probe, tmp_path, '{"step": 7}') for _ in range(3)]
    assert [None, None, "no_progress"] == seen


async def test_stall_stays_while_the_digest_does_not_change(tmp_path: Path) -> None:
    """Past the threshold every further identical report still forces no_progress."""
    probe = python_probe(tmp_path, ECHO_REPORT, probe={"stallThreshold": 2})
    seen = [await poll_report(probe, tmp_path, '{"step": 7}') for _ in range(4)]
    assert [None, "no_progress", "no_progress", "no_progress"] == seen


async def test_progressing_resets_the_stall_count(tmp_path: Path) -> None:
    """A progressing report in between means the identical reports around it never stall."""
    probe = python_probe(tmp_path, ECHO_REPORT, probe={"stallThreshold": 3})
    texts = ['{"step": 7}', '{"step": 7}', '{"class": "progressing"}', '{"step": 7}', '{"step": 7}']
    seen = [await poll_report(probe, tmp_path, text) for text in texts]
    assert [None] * 5 == seen


async def test_a_different_digest_resets_the_stall_count(tmp_path: Path) -> None:
    """Changing output restarts the run of identical digests."""
    probe = python_probe(tmp_path, ECHO_REPORT, probe={"stallThreshold": 2})
    seen = [await poll_report(probe, tmp_path, text) for text in ['{"n": 1}', '{"n": 2}', '{"n": 2}']]
    assert [None, None, "no_progress"] == seen


async def test_a_given_digest_wins_over_the_output_hash(tmp_path: Path) -> None:
    """Reports that differ but carry the same digest count as the same state."""
    probe = python_probe(tmp_path, ECHO_REPORT, probe={"stallThreshold": 2})
    texts = ['{"digest": "job-9", "at": 1}', '{"digest": "job-9", "at": 2}']
    assert [None, "no_progress"] == [await poll_report(probe, tmp_path, text) for text in texts]


async def test_the_observation_carries_the_probe_report(tmp_path: Path) -> None:
    """The pipeline decides episodes from the report itself: its class and digest come along."""
    probe = python_probe(tmp_path, ECHO_REPORT)
    (tmp_path / "report.txt").write_text('{"class": "stalled", "digest": "job-9"}', encoding="utf-8")
    assert ProbeReport("stalled", "job-9") == (await probe.poll()).probe


async def test_the_observation_carries_the_probe_error(tmp_path: Path) -> None:
    """A probe error observed at the threshold carries the error, so a success can end its episode."""
    probe = python_probe(
        tmp_path, "print('not json')", probe={"onProbeError": "stall", "probeErrorThreshold": 1}
    )
    assert ProbeFailure("probe stdout is not JSON: 'not json'") == (await probe.poll()).probe


async def test_non_json_below_the_threshold_is_a_retryable_observe_error(tmp_path: Path) -> None:
    """Until probeErrorThreshold is reached a probe error raises ObserveError, retryable."""
    probe = python_probe(tmp_path, "print('hello there')", probe={"onProbeError": "terminal"})
    with pytest.raises(ObserveError) as caught:
        await probe.poll()
    assert (True, "probe error 1/3: probe stdout is not JSON: 'hello there'") == (
        caught.value.retryable,
        str(caught.value),
    )


@pytest.mark.parametrize(("on_probe_error", "trigger"), [("terminal", "terminal"), ("stall", "no_progress")])
async def test_probe_errors_at_the_threshold_fire_per_on_probe_error(
    tmp_path: Path, on_probe_error: str, trigger: str
) -> None:
    """The probeErrorThreshold-th error in a row is observed with the onProbeError trigger."""
    probe = python_probe(
        tmp_path, "print('not json')", probe={"onProbeError": on_probe_error, "probeErrorThreshold": 2}
    )
    await poll_error(probe)
    observed = await probe.poll()
    expected_value = {"probeError": "probe stdout is not JSON: 'not json'", "errors": 2}
    assert (trigger, expected_value) == (observed.trigger, observed.value)


async def test_ignored_probe_errors_keep_raising_at_the_threshold(tmp_path: Path) -> None:
    """onProbeError: ignore never fires; the error stays visible as an ObserveError."""
    probe = python_probe(tmp_path, "print('not json')", probe={"probeErrorThreshold": 2})
    messages = [await poll_error(probe) for _ in range(3)]
    expected = [
        "probe error 1/2",
        "probe error (2 in a row, onProbeError",
        "probe error (3 in a row, onProbeError",
    ]
    assert expected == [m.split(":")[0] for m in messages]


async def test_a_good_probe_resets_the_error_count(tmp_path: Path) -> None:
    """Probe errors count only in a row."""
    probe = python_probe(tmp_path, ECHO_REPORT, probe={"onProbeError": "terminal", "probeErrorThreshold": 2})
    (tmp_path / "report.txt").write_text("oops", encoding="utf-8")
    await poll_error(probe)
    await poll_report(probe, tmp_path, '{"class": "progressing"}')
    (tmp_path / "report.txt").write_text("oops", encoding="utf-8")
    assert "probe error 1/2" in await poll_error(probe)


async def test_non_zero_exit_is_a_probe_error_when_zero_exit_is_required(tmp_path: Path) -> None:
    """requireZeroExit: a failing exit code is a probe error even with good JSON."""
    script = "import sys; print('{}'); sys.stderr.write('disk full'); sys.exit(3)"
    probe = python_probe(tmp_path, script, probe={"requireZeroExit": True})
    assert "probe error 1/3: probe exited with code 3; stderr: disk full" == await poll_error(probe)


async def test_non_zero_exit_is_accepted_by_default(tmp_path: Path) -> None:
    """Without requireZeroExit the exit code does not matter when stdout is a report."""
    probe = python_probe(tmp_path, "import sys; print('{\"ok\": false}'); sys.exit(3)")
    assert {"ok": False} == (await probe.poll()).value


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    """A probe past its timeoutMs is killed with everything it spawned, and it is a probe error."""
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    probe = python_probe(tmp_path, script, probe={"timeoutMs": 1500})
    message = await poll_error(probe)
    grandchild = int((tmp_path / "child.pid").read_text(encoding="utf-8"))
    expected = "probe error 1/3: probe timed out after 1.5 s and was killed"
    assert (expected, True) == (message, wait_gone(grandchild))


async def test_watcher_timeout_applies_when_the_probe_has_none(tmp_path: Path) -> None:
    """Without probe.timeoutMs the watcher's timeoutMs bounds the probe."""
    probe = python_probe(tmp_path, "import time; time.sleep(60)", timeoutMs=300)
    assert "probe error 1/3: probe timed out after 0.3 s and was killed" == await poll_error(probe)


async def test_stdout_past_64_kib_kills_the_probe(tmp_path: Path) -> None:
    """One byte over 64 KiB on stdout kills the probe at once (long before its timeout)."""
    script = (
        "import os, sys, time\n"
        "open('probe.pid', 'w').write(str(os.getpid()))\n"
        "sys.stdout.write('x' * (64 * 1024 + 1)); sys.stdout.flush()\n"
        "time.sleep(60)\n"
    )
    probe = python_probe(tmp_path, script)
    message = await poll_error(probe)
    pid = int((tmp_path / "probe.pid").read_text(encoding="utf-8"))
    expected = "probe error 1/3: probe printed more than 64 KiB on stdout and was killed"
    assert (expected, True) == (message, wait_gone(pid))


async def test_stdout_of_exactly_64_kib_is_read(tmp_path: Path) -> None:
    """The bound is inclusive: a 65,536-byte report is accepted."""
    script = "import sys; pad = 'x' * (64 * 1024 - 10); sys.stdout.write('{\"p\": \"' + pad + '\"}')"
    probe = python_probe(tmp_path, script)
    observed = await probe.poll()
    assert 64 * 1024 - 10 == len(observed.value["p"])


async def test_secrets_and_credential_names_are_not_in_the_probe_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variables holding a configured secret or named like a credential are not passed on."""
    monkeypatch.setenv("SENTINEL_T_PLAIN", "visible")
    monkeypatch.setenv("SENTINEL_T_DSN", "postgres://u:hunter2-pw@db/x")
    monkeypatch.setenv("SENTINEL_T_API_TOKEN", "t0k3n")
    monkeypatch.setenv("SENTINEL_T_PASSWORD", "pw")
    monkeypatch.setenv("SENTINEL_T_Secret", "x")
    script = (
        "import json, os; print(json.dumps({'env': sorted(k for k in os.environ if 'SENTINEL_T_' in k)}))"
    )
    probe = python_probe(tmp_path, script, secrets=("hunter2-pw",))
    assert {"env": ["SENTINEL_T_PLAIN"]} == (await probe.poll()).value


def test_probe_env_drops_values_containing_a_secret_and_credential_names() -> None:
    """probe_env keeps only variables that neither name nor contain a credential."""
    parent = {"HOME": "/h", "DB_URL": "redis://:s3cret-pw@h/0", "AWS_ACCESS_KEY_ID": "A", "Gh_Token": "t"}
    assert {"HOME": "/h"} == probe_env(parent, ["s3cret-pw"])


async def test_argv_is_passed_without_a_shell(tmp_path: Path) -> None:
    """Shell syntax in an argument is literal text: nothing is run, nothing expanded."""
    argv = [
        sys.executable,
        "-c",
        "import json, sys; print(json.dumps({'args': sys.argv[1:]}))",
        "a; touch pwned",
        "$(touch pwned2)",
    ]
    observed = await make_probe(tmp_path, argv).poll()
    created = names_in(tmp_path, "pwned*")
    assert ({"args": ["a; touch pwned", "$(touch pwned2)"]}, []) == (observed.value, created)


async def test_probe_runs_in_the_project_directory(tmp_path: Path) -> None:
    """The working directory is the project dir (relative paths in probes resolve there)."""
    probe = python_probe(tmp_path, "import json, os; print(json.dumps({'cwd': os.getcwd()}))")
    expected = {"cwd": real_path(tmp_path)}
    assert expected == (await probe.poll()).value


async def test_a_missing_program_is_a_probe_error(tmp_path: Path) -> None:
    """A command that cannot be started counts as a probe error."""
    probe = make_probe(tmp_path, [str(tmp_path / "no-such-probe")])
    assert (await poll_error(probe)).startswith("probe error 1/3: cannot start ")


async def test_second_poll_while_one_runs_is_refused(tmp_path: Path) -> None:
    """poll() never overlaps itself: a second call during a probe raises ObserveError."""
    probe = python_probe(tmp_path, "import time; time.sleep(60)")
    first = asyncio.create_task(probe.poll())
    await asyncio.sleep(0)  # let the first poll start (it marks itself running before any await)
    message = await poll_error(probe)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert "watcher 'probe': previous probe still running" == message


async def test_cancelling_a_poll_kills_the_probe(tmp_path: Path) -> None:
    """A cancelled poll (service shutdown) leaves no probe process behind."""
    script = "import os, time; open('probe.pid', 'w').write(str(os.getpid())); time.sleep(60)"
    probe = python_probe(tmp_path, script)
    task = asyncio.create_task(probe.poll())
    pid_file = tmp_path / "probe.pid"
    deadline = time.monotonic() + 5
    while not pid_file.exists() or not pid_file.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, "probe never started"
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_gone(int(pid_file.read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        (b"[1, 2]", "probe stdout must be a JSON object, got list"),
        (b'{"class": "done"}', "probe class 'done' is not one of progressing, stalled, terminal (or absent)"),
        (b"", "probe stdout is not JSON: (empty)"),
    ],
)
def test_bad_reports_are_probe_errors(stdout: bytes, reason: str) -> None:
    """Output that is not a JSON object with a known class is a probe error."""
    outcome, _ = command.interpret(ProbeRun(stdout, 0, b""), require_zero_exit=False)
    assert ProbeFailure(reason) == outcome


def test_report_digest_defaults_to_the_stdout_hash() -> None:
    """Without a digest field the digest is the sha256 of the raw stdout."""
    outcome, _ = command.interpret(ProbeRun(b'{"a": 1}\n', 0, b""), require_zero_exit=False)
    assert ProbeReport(None, hashlib.sha256(b'{"a": 1}\n').hexdigest()) == outcome


def test_report_json_digest_is_rendered_canonically() -> None:
    """A non-string digest compares by its canonical JSON (key order does not matter)."""
    first, _ = command.interpret(ProbeRun(b'{"digest": {"a": 1, "b": 2}}', 0, b""), require_zero_exit=False)
    second, _ = command.interpret(ProbeRun(b'{"digest": {"b": 2, "a": 1}}', 0, b""), require_zero_exit=False)
    assert first == second


def test_os_environ_is_left_untouched(tmp_path: Path) -> None:
    """Filtering builds a new mapping; the service's own environment keeps its variables."""
    before = dict(os.environ)
    probe_env(os.environ, ["anything"])
    assert before == dict(os.environ)
