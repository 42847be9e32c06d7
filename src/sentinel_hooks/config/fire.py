"""The ``fire:`` block of a watcher: what a match produces (SPEC.md §2.2, §4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from sentinel_hooks.config.base import PositiveMs, Spec, key_problems
from sentinel_hooks.config.budgets import WatcherBudget
from sentinel_hooks.config.grouping import FireGroupSpec
from sentinel_hooks.config.linemap import Loc
from sentinel_hooks.config.mcp import check_tool_pattern
from sentinel_hooks.core.envelope import Priority
from sentinel_hooks.errors import TemplateError

if TYPE_CHECKING:
    from sentinel_hooks.core.templates.render import CompiledText, CompiledValue

# The template engine (Jinja2) is imported where a template is compiled, not with this module:
# the watcher models are imported by pure modules (the probe's state machine, the envelope
# builder) that must not load it (tests/test_architecture.py).

TriggerMode = Literal["edge", "level"]
"""Fire when the conditions become true (and again after they were false), or on every match."""


def _reason(exc: TemplateError, where: str) -> str:
    """The error without the key path it starts with (the issue names the key)."""
    return str(exc).removeprefix(f"{where}: ")


def _checked_value(template: Any, name: str) -> Any:
    """``template`` when every string inside compiles; else every failing one, at its key."""
    from sentinel_hooks.core.templates.render import compile_value

    problems: list[tuple[Loc, str]] = []

    def walk(node: Any, loc: Loc) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                walk(item, (*loc, key))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, (*loc, index))
        else:
            where = name + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
            try:
                compile_value(node, name=where)
            except TemplateError as exc:
                problems.append((loc, _reason(exc, where)))

    walk(template, ())
    if problems:
        raise key_problems(name, problems)
    return template


def _checked_text(template: str | None, name: str) -> str | None:
    if template is None:
        return None
    from sentinel_hooks.core.templates.render import compile_text

    try:
        compile_text(template, name=name)
    except TemplateError as exc:
        raise ValueError(_reason(exc, name)) from exc
    return template


class FireSpec(Spec):
    """What a watcher sends when it fires."""

    event_name: str | None = Field(default=None, min_length=1, max_length=200)
    intent: str | None = Field(default=None, min_length=1, max_length=200)
    priority: Priority = "normal"
    operator_goal: str = ""
    operator_goal_file: str | None = None
    model: str | None = None
    session_group: str | None = Field(default=None, min_length=1)
    session_max_ms: PositiveMs | None = None  # this watcher's hookSessionMaxMs (SPEC §6.4)
    payload_template: dict[str, Any] | None = None
    context_template: dict[str, Any] | None = None
    dedupe_key_template: str | None = Field(default=None, min_length=1)
    trigger: TriggerMode | None = None
    repeat_interval_ms: PositiveMs | None = None
    notify_resolved: bool = False
    message_template: str | None = Field(default=None, min_length=1)
    escalate: bool = False
    notification_payload_mode: Literal["inherit", "none", "concise", "debug"] = "inherit"
    tools: list[str] = Field(default_factory=list)  # MCP tools offered: "server.tool" patterns (§17)
    budget: WatcherBudget | None = None  # the watcher's model budgets (§20)
    group: FireGroupSpec | None = None  # how its fires are grouped (§19; null: sentinel.yaml's grouping)

    _payload: CompiledValue | None = PrivateAttr(default=None)
    _context: CompiledValue | None = PrivateAttr(default=None)
    _dedupe: CompiledText | None = PrivateAttr(default=None)
    _message: CompiledText | None = PrivateAttr(default=None)

    @field_validator("payload_template")
    @classmethod
    def _payload_template_compiles(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _checked_value(value, "fire.payloadTemplate") if value is not None else None

    @field_validator("context_template")
    @classmethod
    def _context_template_compiles(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _checked_value(value, "fire.contextTemplate") if value is not None else None

    @field_validator("dedupe_key_template")
    @classmethod
    def _dedupe_template_compiles(cls, value: str | None) -> str | None:
        return _checked_text(value, "fire.dedupeKeyTemplate")

    @field_validator("tools")
    @classmethod
    def _tool_patterns(cls, patterns: list[str]) -> list[str]:
        problems = []
        for index, pattern in enumerate(patterns):
            try:
                check_tool_pattern(pattern)
            except ValueError as exc:
                problems.append(((index,), str(exc)))
        if problems:
            raise key_problems("fire.tools", problems)
        return patterns

    @field_validator("message_template")
    @classmethod
    def _message_template_compiles(cls, value: str | None) -> str | None:
        return _checked_text(value, "fire.messageTemplate")

    @model_validator(mode="after")
    def _repeat_needs_edge(self) -> FireSpec:
        if self.repeat_interval_ms is not None and self.trigger == "level":
            raise ValueError("repeatIntervalMs applies to edge triggers; remove it or use trigger: edge")
        return self

    def model_post_init(self, context: Any, /) -> None:
        templates = (
            self.payload_template,
            self.context_template,
            self.dedupe_key_template,
            self.message_template,
        )
        if templates == (None, None, None, None):
            return
        from sentinel_hooks.core.templates.render import compile_text, compile_value

        if self.payload_template is not None:
            self._payload = compile_value(self.payload_template, name="fire.payloadTemplate")
        if self.context_template is not None:
            self._context = compile_value(self.context_template, name="fire.contextTemplate")
        if self.dedupe_key_template is not None:
            self._dedupe = compile_text(self.dedupe_key_template, name="fire.dedupeKeyTemplate")
        if self.message_template is not None:
            self._message = compile_text(self.message_template, name="fire.messageTemplate")

    @property
    def compiled_payload(self) -> CompiledValue | None:
        compiled: CompiledValue | None = _private(self, "_payload")
        return compiled

    @property
    def compiled_context(self) -> CompiledValue | None:
        compiled: CompiledValue | None = _private(self, "_context")
        return compiled

    @property
    def compiled_dedupe_key(self) -> CompiledText | None:
        compiled: CompiledText | None = _private(self, "_dedupe")
        return compiled

    @property
    def compiled_message(self) -> CompiledText | None:
        compiled: CompiledText | None = _private(self, "_message")
        return compiled


def _private(spec: FireSpec, name: str) -> Any:
    """A private attribute read straight from pydantic's dict of them: ``spec._payload`` goes
    through ``BaseModel.__getattr__``, which costs ~2 µs (it catches an AttributeError), and a
    fire reads three or four of them."""
    private = spec.__pydantic_private__
    assert private is not None  # pydantic makes it for a model with private attributes
    return private[name]
