"""run_command against real child processes: no shell, fixed PATH, scrubbed env, caps, timeouts."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.policy.commands import (
    SAFE_PATH,
    CommandResult,
    Located,
    command_env,
    locate,
    run_command,
)
from tests.watchers.strategies.test_command_strategy import names_in, real_path, wait_gone

PYTHON = str(Path(sys.executable).absolute())


async def run(
    argv: list[str], cwd: Path, *, timeout_s: float = 10, secrets: tuple[str, ...] = (), path: str = SAFE_PATH
) -> Any:
    """The JSON tool result of ``argv`` run in ``cwd``."""
    return (await run_command(argv, timeout_s=timeout_s, cwd=cwd, secrets=secrets, path=path)).to_json()


async def run_python(script: str, cwd: Path, **keys: Any) -> Any:
    return await run([PYTHON, "-c", script], cwd, **keys)


async def test_echo_output_is_returned(tmp_path: Path) -> None:
    """A bare name found on the fixed PATH runs and its stdout comes back with ok and code 0."""
    expected = {"ok": True, "code": 0, "stdout": "hello world\n", "stderr": ""}
    assert expected == await run(["echo", "hello", "world"], tmp_path)


async def test_non_zero_exit_is_not_ok(tmp_path: Path) -> None:
    """A non-zero exit is ok false with the code, stdout and stderr."""
    script = "import sys; print('out'); print('bad', file=sys.stderr); sys.exit(3)"
    expected = {"ok": False, "code": 3, "stdout": "out\n", "stderr": "bad\n"}
    assert expected == await run_python(script, tmp_path)


async def test_stdout_is_capped_at_4000_characters(tmp_path: Path) -> None:
    """More stdout than the cap is read (the child is not killed) but only 4000 characters are kept."""
    result = await run_python("import sys; sys.stdout.write('é' * 100_000)", tmp_path)
    assert (True, "é" * 4000) == (result["ok"], result["stdout"])


async def test_stderr_is_capped_at_2000_characters(tmp_path: Path) -> None:
    """More stderr than the cap is drained but only 2000 characters are kept, multibyte ones whole."""
    result = await run_python("import sys; sys.stderr.write('€' * 100_000)", tmp_path)
    assert (True, "€" * 2000) == (result["ok"], result["stderr"])


async def test_stdout_past_the_read_bound_kills_the_child(tmp_path: Path) -> None:
    """Past 1 MiB on stdout the child is killed at once (long before its timeout)."""
    script = (
        "import os, sys, time\n"
        "open('child.pid', 'w').write(str(os.getpid()))\n"
        "sys.stdout.write('x' * (1024 * 1024 + 1)); sys.stdout.flush()\n"
        "time.sleep(60)\n"
    )
    result = await run_python(script, tmp_path, timeout_s=60)
    pid = int((tmp_path / "child.pid").read_text(encoding="utf-8"))
    expected = {"ok": False, "code": None, "error": "printed more than 1 MiB on stdout and was killed"}
    assert (expected, True) == (result, wait_gone(pid))


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    """Past its timeout the command and everything it spawned are killed; the result says so."""
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('grandchild.pid', 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    result = await run_python(script, tmp_path, timeout_s=2)
    grandchild = int((tmp_path / "grandchild.pid").read_text(encoding="utf-8"))
    assert ({"ok": False, "code": None, "error": "timed out after 2s"}, True) == (
        result,
        wait_gone(grandchild),
    )


async def test_arguments_are_not_interpreted_by_a_shell(tmp_path: Path) -> None:
    """``;`` and ``$(…)`` in arguments are literal text: nothing else runs."""
    result = await run(["echo", "a; touch pwned", "$(touch pwned2)"], tmp_path)
    assert ("a; touch pwned $(touch pwned2)\n", []) == (result["stdout"], names_in(tmp_path, "pwned*"))


def write_program(folder: Path, name: str) -> Path:
    """An executable shell script ``folder/name`` that prints ``ran``."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\necho ran\n", encoding="utf-8")
    program.chmod(0o755)
    return program


async def test_a_program_only_on_the_services_path_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executable is looked up on the fixed PATH, not on the service's PATH."""
    write_program(tmp_path / "bin", "sentinel-t-only-here")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    expected = {
        "ok": False,
        "code": None,
        "error": (
            f"command 'sentinel-t-only-here' was not found on the fixed PATH {SAFE_PATH}: "
            "use a program installed there or give its absolute path"
        ),
    }
    assert expected == await run(["sentinel-t-only-here"], tmp_path)


async def test_an_absolute_path_is_used_as_given(tmp_path: Path) -> None:
    """A program outside the fixed PATH runs when named by its absolute path."""
    program = write_program(tmp_path / "bin", "sentinel-t-only-here")
    assert {"ok": True, "code": 0, "stdout": "ran\n", "stderr": ""} == await run([str(program)], tmp_path)


async def test_a_relative_path_is_refused(tmp_path: Path) -> None:
    """``./prog`` or ``bin/prog`` is neither a bare name nor absolute: refused, not run."""
    write_program(tmp_path / "bin", "prog")
    result = await run(["bin/prog"], tmp_path)
    expected_error = "command 'bin/prog' is a relative path: give a bare program name or an absolute path"
    assert {"ok": False, "code": None, "error": expected_error} == result


async def test_a_missing_absolute_program_is_an_error_result(tmp_path: Path) -> None:
    """An absolute path that does not exist is an error result, not an exception."""
    result = await run([str(tmp_path / "missing")], tmp_path)
    assert (False, None, True) == (result["ok"], result["code"], result["error"].startswith("cannot start "))


async def test_an_empty_command_is_an_error_result(tmp_path: Path) -> None:
    """An empty command is refused with a clear error."""
    assert {"ok": False, "code": None, "error": "no command given"} == await run([""], tmp_path)


async def test_a_nul_character_is_an_error_result(tmp_path: Path) -> None:
    """An argument with a NUL byte (which exec cannot pass) is an error result, not an exception."""
    result = await run(["echo", "a\0b"], tmp_path)
    expected_error = "the command or an argument contains a NUL character"
    assert {"ok": False, "code": None, "error": expected_error} == result


async def test_the_child_path_is_the_fixed_path(tmp_path: Path) -> None:
    """The child's PATH is SAFE_PATH whatever the service's PATH is."""
    result = await run_python("import os; print(os.environ['PATH'])", tmp_path)
    assert SAFE_PATH + "\n" == result["stdout"]


async def test_secrets_and_credential_names_are_not_in_the_child_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variables holding a configured secret or named like a credential are not passed on."""
    monkeypatch.setenv("SENTINEL_T_PLAIN", "visible")
    monkeypatch.setenv("SENTINEL_T_DSN", "postgres://u:hunter2-pw@db/x")
    monkeypatch.setenv("SENTINEL_T_FOO_TOKEN", "t0k3n")
    monkeypatch.setenv("SENTINEL_T_Password", "pw")
    monkeypatch.setenv("SENTINEL_T_GOOGLE_CREDENTIALS", "/x.json")
    script = "import json, os; print(json.dumps(sorted(k for k in os.environ if 'SENTINEL_T_' in k)))"
    result = await run_python(script, tmp_path, secrets=("hunter2-pw",))
    assert ["SENTINEL_T_PLAIN"] == json.loads(result["stdout"])


async def test_a_secret_in_the_output_is_masked_before_the_cut(tmp_path: Path) -> None:
    """A secret printed across the 4000-character cut shows as ``***``, not as its first characters."""
    script = "print('x' * 3995 + 'hunter2-pw' + ' and hunter2-pw')"
    result = await run_python(script, tmp_path, secrets=("hunter2-pw",))
    assert "x" * 3995 + "*** a" == result["stdout"]


def test_command_env_drops_credentials_and_sets_path() -> None:
    """command_env keeps plain variables, drops credentials and replaces PATH."""
    parent = {"HOME": "/h", "PATH": "/evil", "DB": "x:s3cret@h", "aws_credential_file": "f", "MY_KEY": "k"}
    assert {"HOME": "/h", "PATH": SAFE_PATH} == command_env(parent, ["s3cret"])


async def test_the_working_directory_is_created_and_used(tmp_path: Path) -> None:
    """The child runs in ``cwd``, which is created when missing."""
    workdir = tmp_path / "state" / "commands" / "cb-1"
    result = await run_python("import os; print(os.getcwd())", workdir)
    assert real_path(workdir) + "\n" == result["stdout"]


@pytest.mark.parametrize("timeout_s", [0.5, 121])
async def test_a_timeout_outside_1_to_120_s_is_a_caller_error(tmp_path: Path, timeout_s: float) -> None:
    """timeout_s is bounded to 1..120 s like the tool's timeoutMs."""
    with pytest.raises(ValueError, match="timeout_s must be between 1 and 120 s"):
        await run_command(["echo"], timeout_s=timeout_s, cwd=tmp_path, secrets=())


def test_error_result_json_has_no_output_keys() -> None:
    """An error result is exactly {ok, code, error}."""
    assert {"ok": False, "code": None, "error": "e"} == CommandResult.failed("e").to_json()


def test_locate_resolves_a_link_found_on_the_path(tmp_path: Path) -> None:
    """A bare name found on the PATH keeps its place as ``found``; ``real`` is the link's target."""
    target = tmp_path / "real-tool"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    (tmp_path / "tool").symlink_to(target)
    expected = Located(found=str(tmp_path / "tool"), real=str(target))
    assert (expected, None) == (locate("tool", str(tmp_path)), locate("./tool", str(tmp_path)))


@pytest.mark.parametrize("command", ["ls\0x", "/bin/ls\0x", "no-such-program-anywhere"])
def test_locate_finds_nothing_for_a_nul_or_an_unknown_name(command: str) -> None:
    """A name holding a NUL, or found nowhere, locates nothing (never an exception)."""
    assert locate(command) is None


async def test_a_located_program_runs_under_the_name_it_was_found_by(tmp_path: Path) -> None:
    """The child starts the real file but sees the name it was called by (multi-call programs rely on it)."""
    cat = shutil.which("cat", path=SAFE_PATH)
    assert cat is not None
    (tmp_path / "mycat").symlink_to(cat)
    result = await run(["mycat", "/proc/self/cmdline"], tmp_path, path=str(tmp_path))
    assert f"{tmp_path / 'mycat'}\0/proc/self/cmdline\0" == result["stdout"]
