"""A large project the compiled cache does not cover is validated in a child process, then read
from the cache it wrote (``config.precompile``); anything the child cannot do is done here."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from sentinel_hooks.config.compiled import cache_file
from sentinel_hooks.config.loader import load_config, load_streamed
from sentinel_hooks.config.precompile import PRECOMPILE_BYTES, main, precompiled
from sentinel_hooks.errors import ConfigError
from tests.cli.conftest import sentinel_command
from tests.config.test_compiled_cache import SERVICE, many, project
from tests.support import wait_until

pytestmark = pytest.mark.slow  # a child interpreter validating some thousands of watchers

LARGE = PRECOMPILE_BYTES // 90  # watchers of ``many``'s lines (~95 bytes each): just over the bound


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache in a state directory of the test's, given to the child as ``sentinel run`` would."""
    monkeypatch.setenv("SENTINEL_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_a_large_project_is_validated_apart_and_streamed_from_the_cache(
    tmp_path: Path, state_dir: Path
) -> None:
    """No cache yet: the child writes it, and the watchers come streamed from it, each with the
    spec, data and place a load in the process gives."""
    config = project(tmp_path, {"w.yaml": many(LARGE, 900_000)})
    assert (tmp_path / "watchers" / "w.yaml").stat().st_size >= PRECOMPILE_BYTES
    _loaded, chunks = load_streamed(config)
    assert chunks is not None
    assert cache_file(config, os.environ).parent == state_dir
    streamed = {w.spec.id: w for part in chunks for w in part}
    whole = load_config(config)
    assert len(whole.watchers) == len(streamed) == LARGE
    for w in whole.watchers[:: LARGE // 50]:
        kept = streamed[w.spec.id]
        assert (w.spec, w.raw, w.source) == (kept.spec, kept.raw, kept.source)
        assert w.same_data(kept)
        assert kept.same_data(w)


def test_a_large_project_with_a_problem_reports_it_from_this_process(tmp_path: Path, state_dir: Path) -> None:
    """The child finds the problem and writes nothing; the load here reports it with its line."""
    text = many(LARGE, 900_000) + "  - {id: bad, strategy: http-poll, intervalMs: 5000}\n"
    config = project(tmp_path, {"w.yaml": text})
    with pytest.raises(ConfigError) as caught:
        load_streamed(config)
    assert [(LARGE + 2, f"watchers[{LARGE}].endpoint")] == [
        (issue.line, issue.key) for issue in caught.value.issues
    ]
    assert not cache_file(config, os.environ).exists()


def test_the_child_answers_by_its_exit_status(tmp_path: Path, state_dir: Path) -> None:
    """0 once the project loaded and its cache is written, 1 for a project with a problem."""
    config = project(tmp_path, {"w.yaml": many(3, 60_000)})
    assert 0 == main([str(config)])
    assert cache_file(config, os.environ).exists()
    (tmp_path / "watchers" / "w.yaml").write_text("watchers:\n  - {id: x}\n")
    assert 1 == main([str(config)])


@pytest.mark.parametrize(
    "extra",
    [
        "",  # small: an interpreter started for it would cost more than it saves
        "# ${env:HOME}\n" * (PRECOMPILE_BYTES // 14),  # a file the cache never keeps
        "# operatorGoalFile\n" * (PRECOMPILE_BYTES // 19),  # maybe a goal file: never kept
    ],
    ids=["small", "environment", "goal-file"],
)
def test_no_child_where_it_could_not_help(tmp_path: Path, state_dir: Path, extra: str) -> None:
    """Where the cache could not cover the project after it, no child is started: the project
    is loaded here, whole (and nothing is streamed)."""
    config = project(tmp_path, {"w.yaml": many(3, 60_000) + extra})
    files = [tmp_path / "watchers" / "w.yaml"]
    assert not precompiled(config, cache_file(config, os.environ), files)
    loaded, chunks = load_streamed(config)
    assert chunks is None
    assert ["w0", "w1", "w2"] == [w.spec.id for w in loaded.watchers]


def _child_of(pid: int) -> int | None:
    """The pid of the validating child of ``pid``, if one runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"sentinel_hooks.config.precompile" in cmdline:
            return int(entry.name)
    return None


def test_a_ctrl_c_while_the_child_validates_stops_sentinel_run_without_a_traceback(tmp_path: Path) -> None:
    """The terminal's Ctrl-C goes to `sentinel run`'s process group: the service stops once the
    child is done, as after a load in the process; the child, in a session of its own, is not
    interrupted, so nothing prints a traceback."""
    service = SERVICE + "server: {host: 127.0.0.1, port: 0}\n"
    config = project(tmp_path, {"w.yaml": many(4 * LARGE, 900_000)}, service=service)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    env["SENTINEL_STATE_DIR"] = str(tmp_path / "state")
    run = subprocess.Popen(
        [*sentinel_command(), "run", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own process group, as a terminal gives a command
    )
    try:
        wait_until(lambda: _child_of(run.pid), timeout_s=30, what="the child validating the watchers")
        os.killpg(run.pid, signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert b"Traceback" not in out + err, err.decode()
    assert 0 == run.returncode, err.decode()
    assert b"stopped before the start finished" in err
