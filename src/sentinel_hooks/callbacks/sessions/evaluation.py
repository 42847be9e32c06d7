"""Evaluation cases (SPEC §22): a cases file, its expectations, and their check against dry runs.

A case is an envelope (``@file``, a stored ``callbackId`` or a ``payload`` built into an envelope
for its watcher) and what its dry-run session (``replay.replay``) must do. Cases are read with
ruamel.yaml so that every error names ``file:line``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sentinel_hooks.callbacks.backends import create_backend
from sentinel_hooks.config.loader import LoadedConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.errors import SentinelError


class Judge(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    prompt: str


class Expect(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    outcome: str | None = None
    message_contains: list[str] = Field(default_factory=list, alias="messageContains")
    tools_called: list[str] = Field(default_factory=list, alias="toolsCalled")
    tools_not_called: list[str] = Field(default_factory=list, alias="toolsNotCalled")
    max_tokens: int | None = Field(default=None, alias="maxTokens")
    max_cost_usd: float | None = Field(default=None, alias="maxCostUsd")
    judge: Judge | None = None


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str
    watcher: str | None = None
    envelope: str | None = None
    callback_id: str | None = Field(default=None, alias="callbackId")
    payload: Any = None
    expect: Expect = Field(default_factory=Expect)
    line: int = 0


def load_cases(path: Path) -> list[Case]:
    """The cases of ``path``; a ``SentinelError`` naming ``file:line`` for anything wrong."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        data = YAML(typ="rt").load(path.read_text())
    except OSError as exc:
        raise SentinelError(f"{path}: cannot read: {exc.strerror}") from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise SentinelError(f"{path}:{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    items = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise SentinelError(f"{path}:1: cases: a list of cases is required")
    cases = []
    for index, item in enumerate(items):
        line = items.lc.item(index)[0] + 1 if hasattr(items, "lc") else 1
        try:
            case = Case.model_validate({**json.loads(json.dumps(item)), "line": line})
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise SentinelError(f"{path}:{line}: cases[{index}].{where}: {error['msg']}") from None
        except TypeError:
            raise SentinelError(f"{path}:{line}: cases[{index}]: a case is a mapping") from None
        sources = [s for s in (case.envelope, case.callback_id) if s is not None] + (
            [1] if case.payload is not None else []
        )
        if len(sources) != 1:
            raise SentinelError(f"{path}:{line}: {case.name}: give one of envelope, callbackId or payload")
        if case.payload is not None and case.watcher is None:
            raise SentinelError(f"{path}:{line}: {case.name}: a payload case needs watcher")
        cases.append(case)
    return cases


def case_envelope(
    case: Case,
    config: LoadedConfig,
    cases_path: Path,
    fetch: Any,
    build: Callable[[AnyWatcher, Any], Envelope],
) -> Envelope:
    """The envelope ``case`` runs: from its file, from the service (``fetch(callback_id)``), or
    built from its payload for its watcher (``build``: as a fire builds it, which the watchers
    layer knows)."""
    where = f"{cases_path}:{case.line}: {case.name}"
    if case.envelope is not None:
        file = cases_path.parent / case.envelope.removeprefix("@")
        try:
            envelope = Envelope.model_validate(json.loads(file.read_text()))
        except (OSError, ValueError) as exc:
            raise SentinelError(f"{where}: envelope {file}: {exc}") from None
    elif case.callback_id is not None:
        body = fetch(case.callback_id)
        if not body.get("envelope"):
            raise SentinelError(f"{where}: callback {case.callback_id} has no stored envelope")
        envelope = Envelope.model_validate(body["envelope"])
    else:
        loaded = config.watcher(case.watcher or "")
        if loaded is None:
            raise SentinelError(f"{where}: no watcher {case.watcher!r} in the config")
        return build(loaded.spec, case.payload)
    if case.watcher is not None and case.watcher != envelope.watcher.id:
        raise SentinelError(
            f"{where}: the envelope is watcher {envelope.watcher.id!r}'s, not {case.watcher!r}'s"
        )
    return envelope


def tokens_of(usage: dict[str, Any] | None) -> int:
    return int((usage or {}).get("inputTokens") or 0) + int((usage or {}).get("outputTokens") or 0)


def cost_of(usage: dict[str, Any] | None) -> float:
    return float((usage or {}).get("costUsd") or 0.0)


@dataclass
class Checked:
    """One run of a case: the replay and the expectations it failed (empty: passed)."""

    replay: dict[str, Any]
    failures: list[str] = field(default_factory=list)


async def check(expect: Expect, replayed: dict[str, Any], config: LoadedConfig) -> list[str]:
    """The expectations ``replayed`` fails, each a sentence."""
    failures = []
    if expect.outcome is not None and replayed["outcome"] != expect.outcome:
        failures.append(f"outcome {replayed['outcome']!r}, expected {expect.outcome!r}")
    text = "\n".join(replayed["messages"])
    failures += [f"no message contains {want!r}" for want in expect.message_contains if want not in text]
    called = {tool_name(c) for c in replayed["toolCalls"]}
    failures += [f"{tool} was not called" for tool in expect.tools_called if tool not in called]
    failures += [f"{tool} was called" for tool in expect.tools_not_called if tool in called]
    tokens, cost = tokens_of(replayed["usage"]), cost_of(replayed["usage"])
    if expect.max_tokens is not None and tokens > expect.max_tokens:
        failures.append(f"{tokens} tokens, more than maxTokens {expect.max_tokens}")
    if expect.max_cost_usd is not None and cost > expect.max_cost_usd:
        failures.append(f"${cost:.4f}, more than maxCostUsd {expect.max_cost_usd}")
    if expect.judge is not None:
        verdict = await judge(expect.judge, replayed, config)
        if verdict is not None:
            failures.append(verdict)
    return failures


def tool_name(call: dict[str, Any]) -> str:
    """``sentinel_act.run_command`` / ``sentinel_act.notify`` for the act tool, else the tool's
    name with the MCP ``server__tool`` written ``server.tool``."""
    name = str(call.get("name"))
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {}
    if name == "sentinel_act" and isinstance(arguments, dict) and arguments.get("action"):
        return f"sentinel_act.{arguments['action']}"
    return name.replace("__", ".", 1)


JUDGE_QUESTION = (
    "You check an on-call agent's work. Answer PASS or FAIL on the first line, then one sentence why.\n"
    "Criterion: {prompt}\n\nWhat the agent did (JSON):\n{did}"
)


async def judge(spec: Judge, replayed: dict[str, Any], config: LoadedConfig) -> str | None:
    """The judge model's verdict on ``replayed``: None when it says PASS, else why not."""
    model = config.service.models.get(spec.model)
    if model is None:
        return f"judge model {spec.model!r} is not one of the config's models"
    backend = create_backend(spec.model, model)
    did = {k: replayed[k] for k in ("outcome", "messages", "escalations")}
    did["toolCalls"] = [tool_name(c) for c in replayed["toolCalls"]]
    question = JUDGE_QUESTION.format(prompt=spec.prompt, did=json.dumps(did, ensure_ascii=False))
    try:
        reply = await backend.complete([{"role": "user", "content": question}], [])
    except Exception as exc:  # a judge that cannot answer fails the expectation, with the reason
        return f"judge {spec.model}: {exc}"
    finally:
        await backend.close()
    answer = (reply.text or "").strip()
    if answer.upper().startswith("PASS"):
        return None
    return f"judge: {answer.splitlines()[0] if answer else 'no answer'}"
