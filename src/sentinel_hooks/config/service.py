"""sentinel.yaml: the service configuration (SPEC.md §2.1), every default and limit in one place."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Discriminator, Field, SecretStr, Tag, ValidationInfo, field_validator

from sentinel_hooks.config.base import Name, NonNegativeMs, PositiveMs, Spec
from sentinel_hooks.config.budgets import Budgets, Pricing
from sentinel_hooks.config.escalation import EscalationPolicySpec
from sentinel_hooks.config.grouping import GroupingSpec
from sentinel_hooks.config.maintenance import MaintenanceWindow, check_unique_names
from sentinel_hooks.config.mcp import McpServerSpec, ServerName
from sentinel_hooks.config.people import PersonSpec, SlackSpec, check_unique_slack_ids
from sentinel_hooks.config.targets import TargetSpec
from sentinel_hooks.config.tokens import TokenSpec, check_distinct, check_length
from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.conditions import AllGroup, AnyGroup, Condition, ConditionNode
from sentinel_hooks.core.envelope import FallbackMode

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class ServerSpec(Spec):
    """Where the API listens and how it is protected.

    ``api_token`` and ``tokens`` are declared before ``host`` so that the host's check sees them
    validated. ``api_token`` is one ``admin`` token named ``admin`` (SPEC §21).
    """

    api_token: SecretStr | None = None
    tokens: list[TokenSpec] = Field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    metrics_auth: bool = False
    allow_command_watchers: bool = False
    mcp_approvals: bool = False  # offer approve/deny to MCP clients (SPEC §17): a person's call by default
    public_url: str | None = None  # base URL of the web page, linked from messages (…/#inbox/{id})

    @property
    def has_tokens(self) -> bool:
        """Whether calls need a bearer token (``apiToken`` or ``tokens``)."""
        return self.api_token is not None or bool(self.tokens)

    @field_validator("api_token")
    @classmethod
    def _token_long_enough(cls, token: SecretStr | None) -> SecretStr | None:
        return None if token is None else check_length(token)

    @field_validator("tokens")
    @classmethod
    def _tokens_distinct(cls, tokens: list[TokenSpec], info: ValidationInfo) -> list[TokenSpec]:
        check_distinct(tokens, info.data.get("api_token"))
        return tokens

    @field_validator("public_url")
    @classmethod
    def _public_url_is_a_base_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{url!r} is not an http(s) URL with a host; write the address people open the web "
                "page at, e.g. https://sentinel.example.com"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"{url!r} has a query or fragment; give the page's base URL only")
        return url.rstrip("/")

    @field_validator("host")
    @classmethod
    def _token_required_off_loopback(cls, host: str, info: ValidationInfo) -> str:
        # api_token is absent from info.data when it was refused: its own error says why
        refused = "api_token" not in info.data or "tokens" not in info.data
        if (
            host not in LOOPBACK_HOSTS
            and not refused
            and info.data["api_token"] is None
            and not info.data["tokens"]
        ):
            raise ValueError(
                f"{host!r} is not loopback, so server.apiToken or server.tokens is required "
                "(set it, e.g. apiToken: ${env:SENTINEL_API_TOKEN}, or listen on 127.0.0.1)"
            )
        return host


class OpenAIModel(Spec):
    """Any OpenAI-compatible chat-completions server with tool calling."""

    type: Literal["openai"]
    base_url: str = "https://api.openai.com/v1"
    model: str
    api_key: SecretStr | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout_ms: PositiveMs = 60000
    max_turns: int = Field(default=8, ge=1, le=100)
    pricing: Pricing | None = None  # USD per million tokens (SPEC §20)


class AnthropicModel(Spec):
    """The Anthropic Messages API with tool use."""

    type: Literal["anthropic"]
    model: str
    api_key: SecretStr | None = None
    base_url: str = "https://api.anthropic.com"
    temperature: float | None = Field(default=None, ge=0, le=1)
    timeout_ms: PositiveMs = 60000
    max_turns: int = Field(default=8, ge=1, le=100)
    pricing: Pricing | None = None  # USD per million tokens (SPEC §20)


class ScriptedModel(Spec):
    """No LLM: notify with the rendered messageTemplate (or escalate)."""

    type: Literal["scripted"]

    @property
    def pricing(self) -> Pricing | None:
        """The scripted backend calls no model: it costs nothing."""
        return None


ModelSpec = Annotated[OpenAIModel | AnthropicModel | ScriptedModel, Field(discriminator="type")]


class DeliverySpec(Spec):
    max_attempts: int = Field(default=5, ge=1, le=50)
    base_ms: PositiveMs = 1000
    max_ms: PositiveMs = 60000
    max_elapsed_ms: PositiveMs = 600000


class ClusterSpec(Spec):
    lease_ms: int = Field(default=10000, ge=1000)


POLICY_PATHS = ("action", "command", "argv0", "args", "tool", "watcherId", "skillId")
ARGUMENTS_PATH = "arguments"  # ``arguments.<path>``: into an MCP call's arguments


def is_policy_path(path: str) -> bool:
    """Whether a policy condition may test ``path``: one of ``POLICY_PATHS`` or ``arguments.<path>``."""
    return path in POLICY_PATHS or path == ARGUMENTS_PATH or path.startswith(ARGUMENTS_PATH + ".")


def walk_leaves(nodes: Sequence[ConditionNode]) -> Iterator[Condition]:
    """The leaf conditions of a condition tree, in document order."""
    for node in nodes:
        if isinstance(node, AnyGroup):
            yield from walk_leaves(node.any)
        elif isinstance(node, AllGroup):
            yield from walk_leaves(node.all)
        else:
            yield node


def _policy_paths(nodes: list[ConditionNode]) -> list[ConditionNode]:
    """Every leaf condition of a policy rule tests one of ``POLICY_PATHS``."""
    for leaf in walk_leaves(nodes):
        if not is_policy_path(leaf.path):
            raise ValueError(
                f"policy condition path {leaf.path!r} is not one of {', '.join(POLICY_PATHS)} "
                "or arguments.<path>"
            )
    return nodes


Decision = Literal["auto", "needs_approval", "deny"]
"""What the action policy says of an action: run it, ask a person first, or refuse it."""


class PolicyRule(Spec):
    """One plain action-policy rule; the first enabled match by descending priority decides."""

    id: Name
    kind: Literal["plain"] = "plain"
    priority: int = 0
    enabled: bool = True
    decision: Decision
    conditions: list[ConditionNode] = Field(default_factory=list)
    match: MatchMode = "all"

    _paths_are_policy_fields = field_validator("conditions")(_policy_paths)


JudgedAction = Literal["run_command", "mcp", "notify"]
JUDGED_BY_DEFAULT: tuple[JudgedAction, ...] = ("run_command", "mcp")
"""What a judge rule checks when it names no ``appliesTo``: the actions a session proposes
(``notify`` messages only when asked for: most rules are about what an action does)."""


class JudgeRule(Spec):
    """A semantic rule (SPEC §5.4): one small model call asks whether the action breaks ``prompt``.

    Asked only once the plain rules allowed the action, and only when its ``conditions`` (its
    scope) match. A ``notify`` cannot wait for a person (its contract's deadline runs), so a rule
    that checks notifies must ``deny``.
    """

    id: Name
    kind: Literal["judge"]
    priority: int = 0  # orders the reasons when several judge rules object
    enabled: bool = True
    model: str = Field(min_length=1)
    prompt: str = Field(min_length=1, max_length=4000)
    decision: Literal["needs_approval", "deny"]
    conditions: list[ConditionNode] = Field(default_factory=list)
    match: MatchMode = "all"
    confidence_threshold: float = Field(default=0.7, ge=0, le=1)
    timeout_ms: int = Field(default=5000, ge=100, le=120000)
    fail_open: bool = False
    applies_to: list[JudgedAction] = Field(default_factory=lambda: list(JUDGED_BY_DEFAULT), min_length=1)

    _paths_are_policy_fields = field_validator("conditions")(_policy_paths)

    @field_validator("applies_to")
    @classmethod
    def _notify_is_denied_or_allowed(
        cls, kinds: list[JudgedAction], info: ValidationInfo
    ) -> list[JudgedAction]:
        if "notify" in kinds and info.data.get("decision") == "needs_approval":
            raise ValueError(
                "a judge rule that checks notify messages must have decision: deny "
                "(a message cannot wait for an approval: its response deadline runs)"
            )
        return kinds


def _rule_kind(value: object) -> str:
    if isinstance(value, dict):
        kind = value.get("kind", "plain")
        return kind if isinstance(kind, str) else "plain"
    return str(getattr(value, "kind", "plain"))


AnyPolicyRule = Annotated[
    Annotated[PolicyRule, Tag("plain")] | Annotated[JudgeRule, Tag("judge")],
    Discriminator(
        _rule_kind,
        custom_error_type="rule_kind",
        custom_error_message="kind must be plain (the default) or judge",
    ),
]


class ActionPolicySpec(Spec):
    default: Decision = "needs_approval"
    rules: list[AnyPolicyRule] = Field(default_factory=list)
    loop_guard: int = Field(default=3, ge=2)  # the loopGuard-th identical request in a row is refused
    approval_timeout_ms: PositiveMs = 900000
    circuit_breaker: int = Field(default=5, ge=1)  # this many denials in a row stop the session

    @field_validator("rules")
    @classmethod
    def _unique_rule_ids(cls, rules: list[PolicyRule | JudgeRule]) -> list[PolicyRule | JudgeRule]:
        seen: set[str] = set()
        for rule in rules:
            if rule.id in seen:
                raise ValueError(f"rule id {rule.id!r} is used twice")
            seen.add(rule.id)
        return rules

    @property
    def plain_rules(self) -> list[PolicyRule]:
        """The enabled plain rules, in file order."""
        return [r for r in self.rules if isinstance(r, PolicyRule) and r.enabled]

    @property
    def judge_rules(self) -> list[JudgeRule]:
        """The enabled judge rules, in file order."""
        return [r for r in self.rules if isinstance(r, JudgeRule) and r.enabled]


class LimitsSpec(Spec):
    max_watchers: int = Field(default=100000, ge=1)
    max_conditions_per_watcher: int = Field(default=25, ge=1)
    min_interval_ms: PositiveMs = 1000
    max_response_bytes: int = Field(default=1048576, ge=1024)
    max_payload_chars: int = Field(default=2500, ge=100)
    request_timeout_ms: PositiveMs = 10000
    max_alerts_per_request: int = Field(default=1000, ge=1)  # an Alertmanager POST with more: 413
    # /metrics: above this many watchers, the per-watcher poll series only of those failing or firing
    per_watcher_metrics_max: int = Field(default=10000, ge=0)


def _otlp_endpoint(url: str) -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        raise ValueError("must be an http(s) URL, e.g. http://collector:4318")
    return url


OtlpEndpoint = Annotated[str, AfterValidator(_otlp_endpoint)]


class TelemetrySpec(Spec):
    events_file: str | None = None
    otlp_endpoint: OtlpEndpoint | None = None  # OTLP/HTTP collector base URL: traces (SPEC §22)


KeptFor = Annotated[int, Field(ge=0)]  # days or records; 0: no limit


class RetentionSpec(Spec):
    """How long settled work is kept (SPEC.md §18); 0 disables a limit (kept for ever)."""

    callbacks_days: KeptFor = 30
    inbox_closed_days: KeptFor = 90
    observations_per_watcher: KeptFor = 500
    transcripts_days: KeptFor = 30
    audit_days: KeptFor = 365


class ServiceConfig(Spec):
    """The whole of sentinel.yaml. Every key is optional; defaults are SPEC.md §2.1's."""

    store: str = "sqlite:///.sentinel/state.db"
    watchers_dir: str = "watchers"
    skills_dir: str = "skills"
    server: ServerSpec = Field(default_factory=ServerSpec)
    allowed_hosts: list[str] = Field(default_factory=list)
    allow_private_networks: bool = False
    hook_session_prefix: str = Field(default="sentinel:hooks", min_length=1)
    hook_session_group: str | None = None
    hook_response_timeout_ms: PositiveMs = 30000
    hook_session_max_ms: PositiveMs = 600000  # how long a session may investigate (SPEC §6.4)
    hook_response_fallback_mode: FallbackMode = "concise"
    hook_response_dedupe_window_ms: NonNegativeMs = 120000
    notification_payload_mode: Literal["none", "concise", "debug"] = "concise"
    max_operator_goal_chars: int = Field(default=12000, ge=500, le=20000)
    hook_concurrency: int = Field(default=8, ge=1, le=1024)
    default_hook_model: str | None = None
    models: dict[Name, ModelSpec] = Field(default_factory=dict)
    targets: dict[Name, TargetSpec] = Field(default_factory=dict)
    escalation_targets: list[str] = Field(default_factory=list)
    escalation_policies: dict[Name, EscalationPolicySpec] = Field(default_factory=dict)
    default_escalation_policy: str | None = None
    delivery: DeliverySpec = Field(default_factory=DeliverySpec)
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    action_policy: ActionPolicySpec = Field(default_factory=ActionPolicySpec)
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    telemetry: TelemetrySpec = Field(default_factory=TelemetrySpec)
    retention: RetentionSpec = Field(default_factory=RetentionSpec)
    maintenance_windows: list[MaintenanceWindow] = Field(default_factory=list)
    mcp_servers: dict[ServerName, McpServerSpec] = Field(default_factory=dict)
    grouping: GroupingSpec = Field(default_factory=GroupingSpec)  # storms: one page per group (§19)
    budgets: Budgets = Field(default_factory=Budgets)
    people: dict[Name, PersonSpec] = Field(default_factory=dict)  # who may act from Slack (§21)
    slack: SlackSpec = Field(default_factory=SlackSpec)

    @field_validator("people")
    @classmethod
    def _unique_slack_ids(cls, people: dict[str, PersonSpec]) -> dict[str, PersonSpec]:
        return check_unique_slack_ids(people)

    @field_validator("maintenance_windows")
    @classmethod
    def _unique_window_names(cls, windows: list[MaintenanceWindow]) -> list[MaintenanceWindow]:
        return check_unique_names(windows)

    @field_validator("store")
    @classmethod
    def _known_store_scheme(cls, url: str) -> str:
        schemes = ("sqlite:///", "redis://", "rediss://", "memory://")
        if not url.startswith(schemes):
            raise ValueError(
                f"store {url!r} is not supported: use sqlite:///relative/path.db, "
                "sqlite:////absolute/path.db or redis://host:6379/0"
            )
        return url
