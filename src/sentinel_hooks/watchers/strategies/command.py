"""The `command` strategy (SPEC.md §3): a probe program's JSON verdict, with stall detection.

Each ``poll()`` runs the watcher's ``command`` once (see ``probe_process``: no shell, cwd = the
project directory, a filtered environment, 64 KiB stdout bound, ``probe.timeoutMs`` or the
watcher's ``timeoutMs``), parses stdout as a JSON object
``{class?, digest?, fingerprints?, reasons?, summary?}`` and feeds the result to the pure state
machine in ``probe_state``. What ``poll()`` returns or raises:

- a good report → ``Observed(value=<the parsed object>, trigger=<terminal|no_progress|None>)``,
  so conditions can read ``class``, ``summary``… The digest is the report's ``digest`` (a string
  as is, anything else as canonical JSON) or else the sha256 of the raw stdout.
- a probe error (start failure, timeout, oversized stdout, stdout that is not a JSON object, an
  unknown ``class``, a non-zero exit when ``requireZeroExit``) → ``ObserveError`` (retryable) below
  ``probeErrorThreshold``; from the threshold on, ``onProbeError: stall|terminal`` gives
  ``Observed(value={"probeError": reason, "errors": n}, trigger=no_progress|terminal)`` and
  ``ignore`` keeps raising ``ObserveError`` (the watcher's status shows it).

Either way the ``Observed`` carries the report or error as ``probe``. The trigger is asked for
on every run while the state lasts; the firing pipeline fires it once per episode
(``watchers/episodes.py``), from state it keeps in the store, so a restart does not fire it again.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from sentinel_hooks.canonical import canonical_json
from sentinel_hooks.config.watcher import CommandWatcher
from sentinel_hooks.process_runner import ProbeRun, ProbeRunError, probe_env, run_probe
from sentinel_hooks.watchers.strategies.probe_state import (
    PROBE_CLASSES,
    ProbeFailure,
    ProbeOutcome,
    ProbeReport,
    ProbeState,
    step,
)
from sentinel_hooks.watchers.strategy import Observed, StrategyContext, TransientObserveError


class CommandProbe:
    """Runs one watcher's probe command on demand and tracks its stall and error counts."""

    def __init__(self, watcher: CommandWatcher, context: StrategyContext) -> None:
        self._watcher = watcher
        self._context = context
        self._state = ProbeState()
        self._running = False

    @property
    def state(self) -> ProbeState:
        """The stall run and error count after the last probe."""
        return self._state

    async def poll(self) -> Observed:
        """Run the probe once and apply SPEC §3's probe rules to what it printed."""
        if self._running:
            raise TransientObserveError(f"watcher {self._watcher.id!r}: previous probe still running")
        self._running = True
        try:
            outcome, value = await self._probe()
        finally:
            self._running = False
        trigger, self._state = step(self._state, outcome, self._watcher.probe)
        now = self._context.clock.now()
        if isinstance(outcome, ProbeReport):
            return Observed(value=value, at=now, trigger=trigger, probe=outcome)
        errors = self._state.errors
        if trigger is None:
            threshold = self._watcher.probe.probe_error_threshold
            if errors < threshold:
                raise TransientObserveError(f"probe error {errors}/{threshold}: {outcome.reason}")
            raise TransientObserveError(
                f"probe error ({errors} in a row, onProbeError: ignore): {outcome.reason}"
            )
        value = {"probeError": outcome.reason, "errors": errors}
        return Observed(value=value, at=now, trigger=trigger, probe=outcome)

    async def close(self) -> None:
        """Nothing stays open between probes."""

    async def _probe(self) -> tuple[ProbeOutcome, Any]:
        probe = self._watcher.probe
        timeout_ms = probe.timeout_ms or self._watcher.timeout_ms
        try:
            run = await run_probe(
                self._watcher.command,
                cwd=self._context.base_dir,
                env=probe_env(os.environ, self._context.redactor.secrets),
                timeout_s=timeout_ms / 1000,
            )
        except ProbeRunError as exc:
            return ProbeFailure(self._context.redactor.text(str(exc))), None
        outcome, value = interpret(run, require_zero_exit=probe.require_zero_exit)
        if isinstance(outcome, ProbeFailure):
            return ProbeFailure(self._context.redactor.text(outcome.reason)), None
        return outcome, value


def interpret(run: ProbeRun, *, require_zero_exit: bool) -> tuple[ProbeOutcome, Any]:
    """The report (with the parsed object) or the probe error that ``run`` amounts to."""
    if require_zero_exit and run.exit_code != 0:
        return ProbeFailure(f"probe exited with code {run.exit_code}{_stderr_hint(run)}"), None
    try:
        value = json.loads(run.stdout)
    except (ValueError, UnicodeDecodeError):
        exit_hint = f" (exit code {run.exit_code}{_stderr_hint(run)})" if run.exit_code else ""
        return ProbeFailure(f"probe stdout is not JSON: {_preview(run.stdout)}{exit_hint}"), None
    if not isinstance(value, dict):
        return ProbeFailure(f"probe stdout must be a JSON object, got {type(value).__name__}"), None
    probe_class = value.get("class")
    if probe_class is not None and probe_class not in PROBE_CLASSES:
        allowed = ", ".join(PROBE_CLASSES)
        return ProbeFailure(f"probe class {probe_class!r} is not one of {allowed} (or absent)"), None
    digest = value.get("digest")
    if digest is None:
        digest = hashlib.sha256(run.stdout).hexdigest()
    elif not isinstance(digest, str):
        digest = canonical_json(digest)
    return ProbeReport(probe_class=probe_class, digest=digest), value


def _preview(stdout: bytes) -> str:
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        return "(empty)"
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _stderr_hint(run: ProbeRun) -> str:
    first = run.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return f"; stderr: {first[-1][:200]}" if first else ""


def create(watcher: CommandWatcher, context: StrategyContext) -> CommandProbe:
    """The probe strategy for a ``command`` watcher."""
    return CommandProbe(watcher, context)
