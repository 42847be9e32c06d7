"""One openclaw-sentinel watcher definition → one Sentinel watcher, and what did not carry over.

Upstream's shape is its ``src/types.ts`` ``WatcherDefinition`` (read from the project, not
copied): ``{id, skillId, enabled, strategy, endpoint, method, headers, body, intervalMs,
timeoutMs, match, conditions, fire, retry, fireOnce, deliveryTargets, evmCall, metadata,
tags}``. Each key is mapped to its Sentinel counterpart (SPEC.md §2.2) or reported as a
:class:`Note`; the result is then validated with Sentinel's own watcher model, and anything
it still refuses is dropped and reported too, so the file written is one ``validate`` accepts
(given the hosts in ``allowedHosts``). Before that, values Sentinel would not read as the text
they are (``safety``: an ``${env:…}`` reference, an over-long text) are dropped and reported.
A watcher that loses a condition is written disabled: fewer conditions would fire on
observations the original ignored.

It is one module past 500 lines because it is one mapping with one list of notes: ``_Builder``
takes upstream's keys in order and the passes after it drop and note what the model, the safety
check and the condition limit refuse; the parts whose syntax differs live beside it
(``templates``, ``evm``, ``targets``, ``safety``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import ValidationError

from sentinel_hooks.config.hosts import url_host
from sentinel_hooks.config.issues import format_loc, validation_issues
from sentinel_hooks.config.linemap import LineMap, Loc
from sentinel_hooks.config.openclaw.evm import EvmShape, evm_shape, integer_value
from sentinel_hooks.config.openclaw.safety import unsafe_value
from sentinel_hooks.config.openclaw.targets import target_hint
from sentinel_hooks.config.openclaw.templates import (
    Constant,
    PathMapper,
    TemplateProblem,
    Unmapped,
    convert_text,
    convert_value,
)
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, WATCHER_ID, WatcherSpec

NoteKind = Literal["dropped", "changed", "hint"]

STRATEGIES: Final = ("http-poll", "http-long-poll", "sse", "websocket", "evm-call")
WATCHER_KEYS: Final = frozenset(
    (
        "id",
        "skillId",
        "enabled",
        "strategy",
        "endpoint",
        "method",
        "headers",
        "body",
        "intervalMs",
        "timeoutMs",
        "match",
        "conditions",
        "fire",
        "retry",
        "fireOnce",
        "deliveryTargets",
        "evmCall",
        "metadata",
        "tags",
    )
)
FIRE_KEYS: Final = frozenset(
    (
        "webhookPath",
        "eventName",
        "payloadTemplate",
        "intent",
        "contextTemplate",
        "priority",
        "deadlineTemplate",
        "dedupeKeyTemplate",
        "notificationPayloadMode",
        "sessionGroup",
        "operatorGoal",
        "operatorGoalFile",
        "model",
    )
)
HOOK_ROUTE: Final = "/hooks/sentinel"
ORIGIN_METADATA: Final = "openclaw.sentinel.origin."
DEFAULT_INTERVAL_MS: Final = 30000  # upstream's http-poll and evm-call default
DEFAULT_TIMEOUT_MS: Final = {"http-poll": 15000, "evm-call": 15000}  # upstream's, where Sentinel's differs
HTTP_STRATEGIES: Final = ("http-poll", "http-long-poll")
FATAL_KEYS: Final = frozenset({"id", "strategy", "endpoint", "evmCall"})
_KEY_PART: Final = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@dataclass(frozen=True)
class Note:
    """One thing about a watcher the user should know: ``path`` is the upstream field."""

    path: str
    kind: NoteKind
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


@dataclass
class Conversion:
    """The Sentinel watcher (camelCase keys, in the order of the docs), or None when skipped."""

    source_id: str
    watcher: dict[str, Any] | None
    notes: list[Note] = field(default_factory=list)

    @property
    def host(self) -> str | None:
        """The host the watcher reaches (it must be in sentinel.yaml's allowedHosts)."""
        endpoint = (self.watcher or {}).get("endpoint")
        return url_host(endpoint) if isinstance(endpoint, str) else None


class Skip(Exception):
    """The watcher cannot be carried over at all; the message says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


def to_intent(event_name: str) -> str:
    """Upstream's default intent: the event name in lower snake case."""
    words = re.sub(r"[^a-zA-Z0-9]+", " ", event_name).strip().lower()
    return re.sub(r"\s+", "_", words) or "sentinel_event"


def convert_watcher(
    raw: dict[str, Any],
    *,
    skills: Collection[str] = (),
    min_interval_ms: int = 1000,
    max_goal_chars: int = 12000,
    max_conditions: int = 25,
) -> Conversion:
    """``raw`` as a Sentinel watcher; ``skills`` are the skill ids the project has, the limits
    its ``limits.minIntervalMs``, ``maxOperatorGoalChars`` and ``limits.maxConditionsPerWatcher``."""
    source_id = str(raw.get("id", "?"))
    builder = _Builder(copy.deepcopy(raw), skills=skills, min_interval_ms=min_interval_ms)
    try:
        watcher = builder.build()
        watcher = _text_only(watcher, builder.notes, max_goal_chars=max_goal_chars)
        watcher = _within_conditions(watcher, builder.notes, max_conditions)
        watcher = _validated(watcher, builder.notes)
    except Skip as exc:
        return Conversion(
            source_id, None, [*builder.notes, Note(exc.path, "dropped", f"not imported: {exc.reason}")]
        )
    return Conversion(source_id, watcher, builder.notes)


class _Builder:
    """Maps the keys of one upstream watcher, collecting notes."""

    def __init__(self, raw: dict[str, Any], *, skills: Collection[str], min_interval_ms: int) -> None:
        self.raw = raw
        self.skills = skills
        self.min_interval_ms = min_interval_ms
        self.notes: list[Note] = []
        self.evm: EvmShape | None = None
        self.constants: dict[str, Any] = {}
        self.disable = False

    def note(self, path: str, kind: NoteKind, reason: str) -> None:
        self.notes.append(Note(path, kind, reason))

    def template_path(self, path: str) -> str | Constant | Unmapped:
        if path in self.constants:
            return Constant(self.constants[path])
        return self.evm.template_path(path) if self.evm is not None else path

    def build(self) -> dict[str, Any]:
        raw = self.raw
        watcher_id = raw.get("id")
        if not isinstance(watcher_id, str) or not re.match(WATCHER_ID, watcher_id):
            raise Skip("id", f"{watcher_id!r} is not a watcher id (letters, digits, '_' and '-', 1-128)")
        strategy = raw.get("strategy")
        if strategy not in STRATEGIES:
            raise Skip("strategy", f"{strategy!r} is not one of {', '.join(STRATEGIES)}")
        for key in sorted(set(raw) - WATCHER_KEYS):
            self.note(key, "dropped", "not a field of openclaw-sentinel watchers (nor of Sentinel's)")
        out: dict[str, Any] = {"id": watcher_id}
        self._skill(out)
        if "enabled" in raw:
            out["enabled"] = raw["enabled"]
        out["strategy"] = strategy
        out["endpoint"] = self._endpoint(str(strategy))
        if strategy == "evm-call":
            out["evmCall"] = self._evm_call()
        self._request(out, str(strategy))
        self._timing(out, str(strategy))
        if "match" in raw:
            out["match"] = raw["match"]
        conditions = self._conditions()
        if conditions is not None:
            out["conditions"] = conditions
        out["fire"] = self._fire()
        self._delivery_targets()
        for key in ("retry", "fireOnce"):
            if key in raw:
                out[key] = raw[key]
        tags = self._tags()
        if tags:
            out["tags"] = tags
        if self.disable:
            out["enabled"] = False
            self.note("enabled", "changed", "written disabled: a condition was not carried over (see above)")
        return _ordered(out)

    def _skill(self, out: dict[str, Any]) -> None:
        skill = self.raw.get("skillId")
        if skill is None:
            return
        if isinstance(skill, str) and skill in self.skills:
            out["skillId"] = skill
            return
        self.constants["watcher.skillId"] = skill
        self.note(
            "skillId",
            "dropped",
            f"the project has no skill {skill!r}: write skills/{skill}/SKILL.md and set skillId "
            "to inject it into this watcher's hook sessions",
        )

    def _endpoint(self, strategy: str) -> Any:
        endpoint = self.raw.get("endpoint")
        if not isinstance(endpoint, str):
            raise Skip("endpoint", "missing or not text")
        if strategy == "websocket" and endpoint.startswith(("http://", "https://")):
            converted = "ws" + endpoint.removeprefix("http")
            self.note(
                "endpoint",
                "changed",
                f"{endpoint} written as {converted} (Sentinel's websocket takes ws/wss)",
            )
            return converted
        return endpoint

    def _evm_call(self) -> dict[str, Any]:
        evm_call = self.raw.get("evmCall")
        if not isinstance(evm_call, dict):
            raise Skip("evmCall", "an evm-call watcher needs evmCall {to, signature}")
        try:
            self.evm = evm_shape(evm_call)
        except ValueError as exc:
            raise Skip("evmCall.signature", str(exc)) from exc
        if self.evm.signature != evm_call["signature"]:
            self.note("evmCall.signature", "changed", f"written as {self.evm.signature!r} (Sentinel's form)")
        self.note(
            "evmCall",
            "changed",
            "Sentinel observes {value, outputs: [...]} with integers as JSON numbers; paths are "
            "rewritten (result.N → outputs.N, resultNamed.<name> → outputs.<position>)",
        )
        out: dict[str, Any] = {"to": evm_call.get("to"), "signature": self.evm.signature}
        if "args" in evm_call:
            out["args"] = evm_call["args"]
        if "blockTag" in evm_call:
            out["blockTag"] = evm_call["blockTag"]
        for key in sorted(set(evm_call) - {"to", "signature", "args", "blockTag"}):
            self.note(f"evmCall.{key}", "dropped", "not a field of evmCall")
        return out

    def _request(self, out: dict[str, Any], strategy: str) -> None:
        raw = self.raw
        for key in ("method", "body"):
            if key not in raw:
                continue
            if strategy in HTTP_STRATEGIES:
                out[key] = raw[key]
            else:
                self.note(key, "dropped", f"Sentinel's {strategy} watchers send no {key}")
        headers = raw.get("headers")
        if headers is None:
            return
        if strategy == "evm-call":
            self.note(
                "headers",
                "dropped",
                "Sentinel's evm-call sends no custom headers; put an API key in the endpoint URL "
                "as ${env:NAME}",
            )
            return
        out["headers"] = headers
        if isinstance(headers, dict):
            for name, value in headers.items():
                if isinstance(value, str) and re.search(r"\$\{(?!env:)", value):
                    self.note(
                        f"headers.{name}",
                        "hint",
                        "the placeholder is sent as written (as upstream did); write ${env:NAME} to "
                        "take a secret from the environment",
                    )

    def _timing(self, out: dict[str, Any], strategy: str) -> None:
        raw = self.raw
        if strategy in ("http-poll", "evm-call"):
            interval = raw.get("intervalMs", DEFAULT_INTERVAL_MS)
            if (
                isinstance(interval, int)
                and not isinstance(interval, bool)
                and interval < self.min_interval_ms
            ):
                self.note(
                    "intervalMs",
                    "changed",
                    f"{interval} raised to {self.min_interval_ms}, the floor of limits.minIntervalMs",
                )
                interval = self.min_interval_ms
            out["intervalMs"] = interval
            out["timeoutMs"] = raw.get("timeoutMs", DEFAULT_TIMEOUT_MS[strategy])
            return
        if "intervalMs" in raw:
            why = (
                "upstream waited this long before reconnecting; Sentinel reconnects with the retry backoff"
                if strategy == "sse"
                else f"upstream's {strategy} does not use it either"
            )
            self.note("intervalMs", "dropped", why)
        if "timeoutMs" not in raw:
            return
        if strategy == "http-long-poll":
            out["timeoutMs"] = raw["timeoutMs"]
        else:
            self.note(
                "timeoutMs", "dropped", f"Sentinel's {strategy} has no timeoutMs (it keeps the stream open)"
            )

    def _conditions(self) -> list[Any] | None:
        conditions = self.raw.get("conditions")
        if conditions is None:
            return None
        if not isinstance(conditions, list):
            raise Skip("conditions", "not a list")
        kept: list[Any] = []
        for index, condition in enumerate(conditions):
            converted = self._condition(condition, f"conditions[{index}]")
            if converted is None:
                self.disable = True
            else:
                kept.append(converted)
        return kept

    def _condition(self, condition: Any, where: str) -> dict[str, Any] | None:
        if not isinstance(condition, dict) or not isinstance(condition.get("path"), str):
            self.note(where, "dropped", "not a {path, op, value} condition")
            return None
        extra = sorted(set(condition) - {"path", "op", "value"})
        if extra:
            self.note(where, "dropped", f"unknown key(s) {', '.join(extra)} in the condition")
            return None
        path = condition["path"]
        out = dict(condition)
        if self.evm is not None:
            mapped = self.evm.condition_path(path)
            if isinstance(mapped, Unmapped):
                self.note(where, "dropped", mapped.reason)
                return None
            out["path"] = mapped
            number = integer_value(self.evm.output_type(mapped), condition.get("value"))
            if number is not None and condition.get("op") in ("eq", "neq"):
                out["value"] = number
                self.note(
                    f"{where}.value", "changed", f"{condition['value']!r} written as the number {number}"
                )
        return out

    def _fire(self) -> dict[str, Any]:
        fire = self.raw.get("fire")
        if fire is None:
            return {}
        if not isinstance(fire, dict):
            raise Skip("fire", "not an object")
        out: dict[str, Any] = {}
        for key in sorted(set(fire) - FIRE_KEYS):
            self.note(f"fire.{key}", "dropped", "not a field of openclaw-sentinel's fire")
        for key in ("eventName", "intent", "priority", "operatorGoal", "sessionGroup"):
            if key in fire:
                out[key] = fire[key]
        event_name = fire.get("eventName")
        if "intent" not in fire and isinstance(event_name, str) and to_intent(event_name) != event_name:
            out["intent"] = to_intent(event_name)  # upstream's default; Sentinel's is eventName itself
        for key in ("payloadTemplate", "contextTemplate"):
            if key in fire:
                out[key] = self._template_value(fire[key], f"fire.{key}")
        if "dedupeKeyTemplate" in fire:
            text = self._template_text(fire["dedupeKeyTemplate"], "fire.dedupeKeyTemplate")
            if text is not None:
                out["dedupeKeyTemplate"] = text
        if "notificationPayloadMode" in fire:
            out["notificationPayloadMode"] = fire["notificationPayloadMode"]
        self._fire_dropped(fire)
        return out

    def _fire_dropped(self, fire: dict[str, Any]) -> None:
        route = fire.get("webhookPath")
        if route is not None and route != HOOK_ROUTE:
            self.note(
                "fire.webhookPath",
                "dropped",
                f"{route!r}: Sentinel hands every fire to a hook session (upstream's {HOOK_ROUTE}) "
                "and fans out to deliveryTargets; it does not post to other gateway routes",
            )
        if "deadlineTemplate" in fire:
            self.note(
                "fire.deadlineTemplate",
                "dropped",
                "Sentinel has no per-fire deadline; the hook session's deadline is hookResponseTimeoutMs "
                "in sentinel.yaml",
            )
        if "operatorGoalFile" in fire:
            self.note(
                "fire.operatorGoalFile",
                "dropped",
                f"{fire['operatorGoalFile']!r} is outside the project; copy the file next to sentinel.yaml "
                "and set fire.operatorGoalFile to its relative path",
            )
        if "model" in fire:
            self.note(
                "fire.model",
                "dropped",
                f"{fire['model']!r}: Sentinel's models are named in sentinel.yaml `models` "
                "(e.g. claude: {type: anthropic, model: …}); set fire.model to that name",
            )

    def _template_value(self, template: Any, where: str) -> Any:
        mapper: PathMapper = self.template_path
        result = convert_value(template, mapper)
        for path, reason in result.dropped:
            self.note(f"{where}.{path}" if path else where, "dropped", reason)
        for path, reason in result.changed:
            self.note(f"{where}.{path}" if path else where, "changed", reason)
        return result.value

    def _template_text(self, template: Any, where: str) -> Any:
        if not isinstance(template, str):
            return template  # Sentinel's validation reports it
        try:
            return convert_text(template, self.template_path, interpolates=True).text
        except TemplateProblem as exc:
            self.note(where, "dropped", str(exc))
            return None

    def _delivery_targets(self) -> None:
        targets = self.raw.get("deliveryTargets")
        if targets is None:
            return
        if not isinstance(targets, list):
            self.note("deliveryTargets", "dropped", "not a list")
            return
        for index, target in enumerate(targets):
            self.note(f"deliveryTargets[{index}]", "dropped", target_hint(target))

    def _tags(self) -> list[Any]:
        tags = list(self.raw.get("tags") or []) if isinstance(self.raw.get("tags"), list) else []
        metadata = self.raw.get("metadata")
        if metadata is None:
            return tags
        if not isinstance(metadata, dict):
            self.note("metadata", "dropped", "not an object")
            return tags
        for key, value in metadata.items():
            if str(key).startswith(ORIGIN_METADATA):
                self.note(
                    f"metadata.{key}",
                    "dropped",
                    "the OpenClaw chat the watcher was created from; Sentinel delivers to the "
                    "targets in deliveryTargets",
                )
                continue
            tags.append(f"{key}={value}")
            self.note(f"metadata.{key}", "changed", f"carried as the tag '{key}={value}'")
        return tags


ORDER: Final[tuple[str, ...]] = (
    "id",
    "skillId",
    "enabled",
    "strategy",
    "endpoint",
    "evmCall",
    "method",
    "headers",
    "body",
    "intervalMs",
    "timeoutMs",
    "match",
    "conditions",
    "fire",
    "deliveryTargets",
    "retry",
    "fireOnce",
    "tags",
)
FIRE_ORDER: Final[tuple[str, ...]] = (
    "eventName",
    "intent",
    "priority",
    "operatorGoal",
    "sessionGroup",
    "payloadTemplate",
    "contextTemplate",
    "dedupeKeyTemplate",
    "notificationPayloadMode",
)


def _ordered(watcher: dict[str, Any]) -> dict[str, Any]:
    """Keys in the order of SPEC.md §2.2's example watcher."""
    out = {key: watcher[key] for key in ORDER if key in watcher}
    fire = out.get("fire")
    if isinstance(fire, dict):
        out["fire"] = {key: fire[key] for key in FIRE_ORDER if key in fire}
    return out


def _loc(key: str) -> tuple[str | int, ...]:
    return tuple(int(index) if index else name for name, index in _KEY_PART.findall(key))


def _validated(watcher: dict[str, Any], notes: list[Note]) -> dict[str, Any]:
    """``watcher`` once Sentinel's model accepts it, minus (and reporting) what it refuses.

    One refused key is dropped per round (dropping a condition renumbers the others), and
    the rest validated again.
    """
    for _ in range(100):
        try:
            WATCHER_ADAPTER.validate_python(watcher)
        except ValidationError as exc:
            issue = validation_issues(exc, display="", data=watcher, lines=LineMap(), root=WatcherSpec)[0]
            try:
                watcher = _dropped(watcher, _loc(issue.key), f"Sentinel refuses it: {issue.message}", notes)
            except Skip as skip:
                raise skip from exc
            continue
        return watcher
    raise Skip("", "Sentinel's validation did not settle")  # pragma: no cover - each round drops a key


def _text_only(watcher: dict[str, Any], notes: list[Note], *, max_goal_chars: int) -> dict[str, Any]:
    """``watcher`` without (and reporting) the values ``safety`` refuses: an env reference
    Sentinel would fill in, an over-long text."""
    while (found := unsafe_value(watcher, max_goal_chars=max_goal_chars)) is not None:
        watcher = _dropped(watcher, *found, notes)
    return watcher


def _within_conditions(watcher: dict[str, Any], notes: list[Note], limit: int) -> dict[str, Any]:
    """The first ``limit`` conditions (limits.maxConditionsPerWatcher); the rest reported."""
    conditions = watcher.get("conditions")
    if not isinstance(conditions, list) or len(conditions) <= limit:
        return watcher
    reason = f"over limits.maxConditionsPerWatcher ({limit}) of the project"
    for index in reversed(range(limit, len(conditions))):
        watcher = _dropped(watcher, ("conditions", index), reason, notes)
    return watcher


def _dropped(watcher: dict[str, Any], loc: Loc, reason: str, notes: list[Note]) -> dict[str, Any]:
    """``watcher`` without what ``loc`` names, reported; a watcher that loses a condition is
    written disabled. Raises Skip when the watcher cannot do without it."""
    key = format_loc(loc)
    if not loc or loc[0] in FATAL_KEYS or not _drop(watcher, loc):
        raise Skip(key, reason)
    notes.append(Note(key, "dropped", reason))
    if loc[0] == "conditions" and watcher.get("enabled") is not False:
        watcher = _ordered({**watcher, "enabled": False})
        notes.append(Note("enabled", "changed", "written disabled: a condition was not carried over"))
    return watcher


def _drop(watcher: dict[str, Any], loc: tuple[str | int, ...]) -> bool:
    """Remove what ``loc`` names: a condition, a template's entry, a fire key or a top key."""
    if loc[0] == "conditions":
        depth = 2
    elif loc[:2] in (("fire", "payloadTemplate"), ("fire", "contextTemplate")):
        depth = len(loc)
    elif loc[0] in ("fire", "headers", "tags"):
        depth = 2
    else:
        depth = 1
    if len(loc) < depth:
        return False
    parent: Any = watcher
    for part in loc[: depth - 1]:
        if not _holds(parent, part):
            return False
        parent = parent[part]
    last = loc[depth - 1]
    if not _holds(parent, last):
        return False
    del parent[last]
    return True


def _holds(node: Any, part: str | int) -> bool:
    """Whether ``node[part]`` exists (an object's key, or a list's index)."""
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
