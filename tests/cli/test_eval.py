"""`sentinel eval` as a real process (SPEC §22): payload cases in the dry run against a model
stand-in; pass and fail, --repeat, --json, --junit, exit codes, a judge expectation, file:line errors."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from xml.etree import ElementTree

import pytest

from sentinel_hooks.testing import FakeOpenAIServer
from tests.cli.conftest import sentinel_command

pytestmark = pytest.mark.slow

CONFIG = """\
store: sqlite:///state.db
allowedHosts: ["127.0.0.1"]
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 10000}}
  judge: {{type: openai, baseUrl: "{model_url}", model: judge-model, timeoutMs: 10000}}
defaultHookModel: local
targets:
  hook: {{type: webhook, url: "http://127.0.0.1:9/never"}}
actionPolicy:
  default: auto
"""

WATCHERS = """\
watchers:
  - id: disk
    strategy: webhook
    deliveryTargets: [hook]
"""

CASES = """\
cases:
  - name: pages-with-the-host
    watcher: disk
    payload: {host: db-3, used: 97}
    expect: {outcome: notify, messageContains: ["db-3"], toolsNotCalled: ["sentinel_act.run_command"],
             maxTokens: 50000}
"""


@pytest.fixture
def project(tmp_path: Path, model: FakeOpenAIServer) -> Path:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(model_url=model.url))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
    return tmp_path


async def sentinel(project: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    child = await asyncio.create_subprocess_exec(
        *sentinel_command(),
        *args,
        "-c",
        str(project / "sentinel.yaml"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**env, "COLUMNS": "250"},
        cwd=project,
    )
    out, err = await asyncio.wait_for(child.communicate(), timeout=120)
    assert child.returncode is not None
    return child.returncode, out.decode(), err.decode()


def notifies(model: FakeOpenAIServer, text: str) -> None:
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": text})
    model.reply_text("done")


async def test_a_passing_case_exits_0_with_json_and_junit(project: Path, model: FakeOpenAIServer) -> None:
    (project / "cases.yaml").write_text(CASES)
    for _ in range(2):
        notifies(model, "db-3 is at 97%")
    junit = project / "eval.xml"
    code, out, err = await sentinel(
        project, "eval", "cases.yaml", "--repeat", "2", "--json", "--junit", str(junit)
    )
    assert 0 == code, err
    result = json.loads(out)
    assert (True, 2, 2, "local") == (
        result["ok"],
        result["results"][0]["runs"],
        result["results"][0]["passed"],
        result["results"][0]["model"],
    )
    suite = ElementTree.parse(junit).getroot()
    assert ("testsuite", ["pages-with-the-host"], []) == (
        suite.tag,
        [c.get("name") for c in suite.iter("testcase")],
        list(suite.iter("failure")),
    )


async def test_a_failing_case_exits_1_and_says_why(project: Path, model: FakeOpenAIServer) -> None:
    (project / "cases.yaml").write_text(CASES)
    notifies(model, "a disk is full somewhere")
    junit = project / "eval.xml"
    code, out, err = await sentinel(project, "eval", "cases.yaml", "--junit", str(junit))
    assert 1 == code, err
    assert ("0/1" in out, "no message contains 'db-3'" in out) == (True, True), out
    failures = list(ElementTree.parse(junit).getroot().iter("failure"))
    assert [True] == ["db-3" in (f.text or "") for f in failures]


async def test_a_judge_expectation_asks_the_judge_model(project: Path, model: FakeOpenAIServer) -> None:
    (project / "cases.yaml").write_text(
        CASES.replace("maxTokens: 50000}", 'judge: {model: judge, prompt: "The message names the host"}}')
    )
    notifies(model, "db-3 is at 97%")
    model.reply_text("FAIL\nit names no host")
    code, out, _ = await sentinel(project, "eval", "cases.yaml", "--json")
    assert 1 == code
    assert ["judge: FAIL"] == json.loads(out)["results"][0]["failures"]
    judged = model.requests[-1]
    assert ("judge-model", True) == (
        judged["model"],
        "The message names the host" in judged["messages"][0]["content"],
    )


async def test_a_bad_cases_file_names_file_and_line(project: Path) -> None:
    (project / "cases.yaml").write_text(
        CASES.replace("    watcher: disk\n", "    watcher: disk\n    bogus: 1\n")
    )
    code, _, err = await sentinel(project, "eval", "cases.yaml")
    assert (1, True, False) == (code, "cases.yaml:2:" in err and "bogus" in err, "Traceback" in err), err
