"""Watcher files (SPEC.md §2.2, §3): one model per strategy, discriminated by ``strategy``.

Everything that can be checked from the watcher alone is checked here (id, shape, cron,
timezone, regexes and templates); checks that need sentinel.yaml (allowed hosts, limits,
named targets and models) live in ``config.crosscheck``.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from typing import Annotated, Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter, field_validator, model_validator

from sentinel_hooks.config.base import NonNegativeMs, PositiveMs, Spec, key_problems
from sentinel_hooks.config.cron import check_cron, check_timezone
from sentinel_hooks.config.fire import FireSpec, TriggerMode
from sentinel_hooks.config.hosts import url_origin
from sentinel_hooks.config.ingest import IngestAuth, IngestAuthSpec, check_include_headers
from sentinel_hooks.config.shared_values import shared_value
from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.conditions import ConditionNode
from sentinel_hooks.core.envelope import Autonomy, Environment

WATCHER_ID = r"^[A-Za-z0-9_-]{1,128}$"
SHARED_MAX = 4096  # distinct shared parts remembered (per kind); past that the memo starts over
POLLED = frozenset({"http-poll", "http-long-poll", "command", "evm-call"})
SUBSCRIPTIONS = frozenset({"sse", "websocket", "redis-pubsub", "redis-stream", "webhook"})
PING_KEY_MIN = 16


class RetrySpec(Spec):
    max_retries: int = Field(default=8, ge=0, le=1000)
    base_ms: PositiveMs = 500
    max_ms: PositiveMs = 30000


class WatcherBase(Spec):
    """Keys every watcher has, whatever its strategy."""

    id: Annotated[str, Field(pattern=WATCHER_ID)]
    skill_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    enabled: bool = True
    match: MatchMode = "all"
    conditions: list[ConditionNode] = Field(default_factory=list)
    fire: FireSpec = Field(default_factory=lambda: shared_default(FireSpec))
    delivery_targets: list[str] = Field(default_factory=list)
    escalation_policy: str | None = None  # a name in sentinel.yaml's escalationPolicies
    retry: RetrySpec = Field(default_factory=lambda: shared_default(RetrySpec))
    fire_once: bool = False
    cooldown_ms: NonNegativeMs = 0
    misfire: Literal["skip", "runOnce"] = "skip"
    expect_event_within_ms: PositiveMs | None = None
    environment: Environment = "prod"
    autonomy: Autonomy = "act"
    tags: list[str] = Field(default_factory=list)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Unpickled (the compiled cache) as pydantic does, then ``keep_compact`` when kept."""
        super().__setstate__(state)
        if KEEPING.get():
            keep_compact(self)

    @property
    def strategy_name(self) -> str:
        return str(getattr(self, "strategy"))  # noqa: B009 - every subclass defines it

    @property
    def event_name(self) -> str:
        """``fire.eventName``, defaulting to the watcher id."""
        return self.fire.event_name or self.id

    @property
    def intent(self) -> str:
        return self.fire.intent or self.event_name

    @property
    def trigger_mode(self) -> TriggerMode:
        """Edge for polled states, level for discrete events, unless ``fire.trigger`` says."""
        if self.fire.trigger is not None:
            return self.fire.trigger
        return "edge" if self.strategy_name in POLLED else "level"

    def endpoint_urls(self) -> list[str]:
        """URLs this watcher connects to (checked against allowedHosts)."""
        return []

    @model_validator(mode="after")
    def _quiet_timer_is_for_subscriptions(self) -> WatcherBase:
        if self.expect_event_within_ms is not None and self.strategy_name not in SUBSCRIPTIONS:
            raise ValueError(
                f"expectEventWithinMs applies to subscriptions ({', '.join(sorted(SUBSCRIPTIONS))}), "
                f"not to {self.strategy_name}"
            )
        return self

    @model_validator(mode="after")
    def _share_common_parts(self) -> WatcherBase:
        """Keep what many watchers have alike once (``share_parts``)."""
        share_parts(self)
        return self


_field_sets: dict[frozenset[str], set[str]] = {}
_defaults: dict[type[BaseModel], BaseModel] = {}
_M = TypeVar("_M", bound=BaseModel)
_condition_lists: dict[str, list[ConditionNode]] = {}


def _remembered(memo: dict[Any, Any], key: Any, value: Any) -> Any:
    """``memo[key]``, or ``value`` remembered under ``key`` (the memo is bounded)."""
    found = memo.get(key)
    if found is None:
        if len(memo) >= SHARED_MAX:
            memo.clear()
        found = memo[key] = value
    return found


def _share_field_set(model: BaseModel) -> None:
    """One set object per distinct set of written keys (a set of six names is 0.7 KiB)."""
    written = model.__pydantic_fields_set__
    object.__setattr__(
        model, "__pydantic_fields_set__", _remembered(_field_sets, frozenset(written), written)
    )


def shared_default(model: type[_M]) -> _M:
    """The one default instance of a sub-model, which every watcher leaving its key out shares.

    Models are frozen, so sharing cannot change what any watcher sees; its ``model_fields_set``
    is empty, as a default's is. With 10,000 watchers, one ``fire``, ``retry`` and ``probe``
    each instead of one per watcher saves memory and a model construction per default.
    """
    found = _defaults.get(model)
    if found is None:
        found = _defaults[model] = model()
    return cast("_M", found)


KEEPING: ContextVar[bool] = ContextVar("keeping_watchers", default=True)
"""Whether the watchers made now are kept (and so made compact: ``keep_compact``). ``sentinel
validate`` only checks them and sets it False: compacting was 2.5 % of its CPU."""


def share_parts(watcher: WatcherBase) -> None:
    """Replace parts of a validated watcher by equal ones other watchers already hold.

    With 10,000 watchers the models are the largest share of the service's memory, and most of
    it repeats: the set of keys each model was written with and, often, whole condition lists.
    Models are frozen, so sharing an equal part cannot change what any watcher sees: a condition
    list is shared only with one of the same key (``_conditions_key``: every field and value,
    with its type: ``1``, ``1.0``, ``'1'`` and ``True`` differ), from which the compiled parts
    follow. Sub-models left at their defaults are shared from the start (``shared_default``), and
    the watcher's own fields take the key table of its strategy (``keep_compact``).
    """
    if watcher.conditions:
        key = _conditions_key(watcher.conditions)
        object.__setattr__(watcher, "conditions", _remembered(_condition_lists, key, watcher.conditions))
    written = watcher.__pydantic_fields_set__
    for name in written.intersection(("fire", "retry", "probe")):
        part = watcher.__dict__[name]
        if isinstance(part, BaseModel):
            _share_field_set(part)
    _share_field_set(watcher)
    if KEEPING.get():
        keep_compact(watcher)


def keep_compact(watcher: WatcherBase) -> None:
    """Give ``watcher`` an attribute dict whose key table it shares with the other watchers of
    its strategy.

    Validation and unpickling give each model a dict with a key table of its own: for the 25
    fields of an http-poll watcher about 830 bytes, a quarter of what an idle watcher holds
    (issue 34.5). CPython shares one key table among the instances of a class whose attributes
    are set in the same order, leaving each instance its values (about 270 bytes): so the fields
    are set in order into a fresh instance's dict, which the watcher then takes. The same values
    in the same order: only the layout changes (on another interpreter, nothing does). Done as
    each watcher is made (``share_parts``, ``__setstate__``), so the next one reuses the memory
    of the dict given up, instead of a whole project's dicts given up at once and kept by the
    allocator. Values many watchers hold alike (empty lists and dicts, ints) are taken shared
    on the way (``shared_values``).
    """
    fields = object.__new__(type(watcher)).__dict__
    for name, value in watcher.__dict__.items():
        fields[name] = shared_value(value)
    object.__setattr__(watcher, "__dict__", fields)


def _conditions_key(conditions: list[ConditionNode]) -> str:
    """What tells two condition lists apart: the class and field values of every node, as text.

    The repr of a dict of plain values is built in C and names each value's type by its
    spelling; a model's own repr, which pydantic builds field by field in Python, cost a
    quarter of validating a watcher.
    """
    return repr([(type(node).__name__, node.__dict__) for node in conditions])


def _check_url(url: str, schemes: tuple[str, ...]) -> str:
    """``url`` if it has one of ``schemes`` and a host, else ``ValueError`` saying which is wrong
    (the verdict on a plain origin is remembered: ``hosts.url_origin``)."""
    origin = url_origin(url)
    if origin is not None and _good_origin(origin, schemes):
        return url
    parts = urlsplit(url)
    if parts.scheme not in schemes:
        raise ValueError(f"{url!r} must start with {' or '.join(s + '://' for s in schemes)}")
    if not parts.hostname:
        raise ValueError(f"{url!r} has no host")
    return url


@functools.lru_cache(maxsize=1024)
def _good_origin(origin: str, schemes: tuple[str, ...]) -> bool:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in schemes and bool(parts.hostname)


class OnSchedule(WatcherBase):
    """A cron ``schedule`` read in ``timezone``, checked once for the watchers that take one."""

    schedule: str | None = None
    timezone: str = "UTC"

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        return check_timezone(value)


class Scheduled(OnSchedule):
    """Watchers that run every ``intervalMs`` or on a cron ``schedule``."""

    interval_ms: PositiveMs | None = None
    timeout_ms: PositiveMs = 10000

    @model_validator(mode="after")
    def _interval_or_schedule(self) -> Scheduled:
        if (self.interval_ms is None) == (self.schedule is None):
            raise ValueError(f"a {self.strategy_name} watcher needs exactly one of intervalMs or schedule")
        return self


class HttpRequestKeys(Spec):
    endpoint: str
    method: Literal["GET", "POST"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | dict[str, Any] | list[Any] | None = None

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_url(value, ("http", "https"))


class HttpPollWatcher(Scheduled, HttpRequestKeys):
    strategy: Literal["http-poll"]

    def endpoint_urls(self) -> list[str]:
        return [self.endpoint]


class HttpLongPollWatcher(WatcherBase, HttpRequestKeys):
    strategy: Literal["http-long-poll"]
    timeout_ms: PositiveMs = 60000

    def endpoint_urls(self) -> list[str]:
        return [self.endpoint]


class SseWatcher(WatcherBase):
    strategy: Literal["sse"]
    endpoint: str
    headers: dict[str, str] = Field(default_factory=dict)
    event_types: list[str] | None = None

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_url(value, ("http", "https"))

    def endpoint_urls(self) -> list[str]:
        return [self.endpoint]


class WebSocketWatcher(WatcherBase):
    strategy: Literal["websocket"]
    endpoint: str
    headers: dict[str, str] = Field(default_factory=dict)
    subscribe_message: Any = None

    @field_validator("endpoint")
    @classmethod
    def _ws_url(cls, value: str) -> str:
        return _check_url(value, ("ws", "wss"))

    def endpoint_urls(self) -> list[str]:
        return [self.endpoint]


class RedisKeys(Spec):
    redis_url: str

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        return _check_url(value, ("redis", "rediss"))


class RedisPubSubWatcher(WatcherBase, RedisKeys):
    strategy: Literal["redis-pubsub"]
    channel: str = Field(min_length=1)

    def endpoint_urls(self) -> list[str]:
        return [self.redis_url]


class RedisStreamWatcher(WatcherBase, RedisKeys):
    strategy: Literal["redis-stream"]
    stream: str = Field(min_length=1)
    group: str = Field(default="sentinel", min_length=1)

    def endpoint_urls(self) -> list[str]:
        return [self.redis_url]


class WebhookWatcher(WatcherBase):
    """A push watcher: sources POST to ``/hooks/ingest/{id}`` (SPEC.md §3, §16).

    ``format`` says what the body is (``json``: the observation; ``alertmanager``: a Prometheus
    Alertmanager or Grafana alerting notification, one observation per alert). A source proves
    itself with the HMAC ``secret`` or with ``auth``; ``auth: none`` says in writing that pushes
    are unauthenticated (refused off loopback when nothing is written: ``config.crosscheck``).
    """

    strategy: Literal["webhook"]
    format: Literal["json", "alertmanager"] = "json"
    secret: SecretStr | None = None
    signature_header: str = Field(default="X-Sentinel-Signature", min_length=1)
    auth: IngestAuth | None = None
    include_headers: list[str] = Field(default_factory=list)

    @field_validator("auth", mode="before")
    @classmethod
    def _auth_shape(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "none":
            raise ValueError(
                f"{value!r} is not an auth; write `auth: none`, `auth: {{bearerToken: ...}}` "
                "or `auth: {basic: {username: ..., password: ...}}`"
            )
        return value

    @field_validator("secret")
    @classmethod
    def _secret_given(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError(
                "is empty (an unset ${env:…:-} default?): anyone can sign with an empty key; give it "
                "from the environment, e.g. ${env:HOOK_SECRET}, or leave secret out"
            )
        return value

    @field_validator("include_headers")
    @classmethod
    def _header_names(cls, names: list[str]) -> list[str]:
        return check_include_headers(names)

    @model_validator(mode="after")
    def _one_way_in(self) -> WebhookWatcher:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.secret is not None and self.auth is not None:
            problems.append(
                (
                    ("auth",),
                    "give either secret (an HMAC signature of the body) or auth, not both "
                    "(auth: none with a secret says two different things)",
                )
            )
        if self.format == "alertmanager" and self.fire.trigger is not None:
            problems.append(
                (
                    ("fire", "trigger"),
                    "does not apply to format: alertmanager: each alert fires once, when it first "
                    "arrives firing (Alertmanager's repeats of it do not fire again); remove it",
                )
            )
        if self.format == "alertmanager" and self.fire.repeat_interval_ms is not None:
            problems.append(
                (
                    ("fire", "repeatIntervalMs"),
                    "does not apply to format: alertmanager: each alert fires once; Alertmanager's "
                    "own repeat_interval decides how often it is sent again; remove it",
                )
            )
        if problems:
            raise key_problems("webhook", problems)
        return self

    @property
    def authenticated(self) -> bool:
        """Whether a push must prove itself (HMAC secret, bearer token or basic credentials)."""
        return self.secret is not None or isinstance(self.auth, IngestAuthSpec)

    @property
    def notifies_resolved(self) -> bool:
        """``fire.notifyResolved``; for ``format: alertmanager`` true unless written false."""
        if self.format == "alertmanager" and "notify_resolved" not in self.fire.model_fields_set:
            return True
        return self.fire.notify_resolved


class HeartbeatWatcher(OnSchedule):
    """A job that checks in (SPEC.md §23): pings to ``/hooks/ping/{pingKey}`` due every
    ``periodMs`` or on ``schedule``, ``graceMs`` late at most (``watchers.strategies.heartbeat``)."""

    strategy: Literal["heartbeat"]
    ping_key: SecretStr
    period_ms: PositiveMs | None = None
    grace_ms: NonNegativeMs = 0
    max_run_ms: PositiveMs | None = None

    @field_validator("ping_key")
    @classmethod
    def _long_key(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < PING_KEY_MIN:
            raise ValueError(
                f"has fewer than {PING_KEY_MIN} characters: the key is the only secret of the ping URL; "
                "give a long random one from the environment, e.g. ${env:BACKUP_PING_KEY} "
                "(`openssl rand -hex 16`)"
            )
        return value

    @model_validator(mode="after")
    def _period_or_schedule(self) -> HeartbeatWatcher:
        if (self.period_ms is None) == (self.schedule is None):
            which = "both" if self.period_ms is not None else "neither"
            raise ValueError(
                f"a heartbeat watcher needs exactly one of periodMs (every so long) or schedule "
                f"(a cron expression of when a ping is due); {which} given"
            )
        return self

    @property
    def notifies_resolved(self) -> bool:
        """``fire.notifyResolved``; true for a heartbeat unless written false (SPEC §23)."""
        if "notify_resolved" not in self.fire.model_fields_set:
            return True
        return self.fire.notify_resolved


class ProbeSpec(Spec):
    stall_threshold: int = Field(default=3, ge=1)
    on_probe_error: Literal["ignore", "stall", "terminal"] = "ignore"
    probe_error_threshold: int = Field(default=3, ge=1)
    require_zero_exit: bool = False
    timeout_ms: PositiveMs | None = None


class CommandWatcher(Scheduled):
    strategy: Literal["command"]
    command: list[str] = Field(min_length=1)
    probe: ProbeSpec = Field(default_factory=lambda: shared_default(ProbeSpec))

    @field_validator("command")
    @classmethod
    def _program_named(cls, argv: list[str]) -> list[str]:
        if not argv[0].strip():
            raise ValueError("command[0] must name the program to run")
        return argv


class EvmCallSpec(Spec):
    to: str = Field(pattern=r"^0x[0-9a-fA-F]{40}$")
    signature: str
    args: list[Any] = Field(default_factory=list)
    block_tag: str = "latest"

    @field_validator("signature")
    @classmethod
    def _signature_parses(cls, value: str) -> str:
        # eth-abi costs ~90 ms to import: only projects with evm-call watchers pay for it
        from sentinel_hooks.core.evm_abi import AbiError, parse_signature

        try:
            parse_signature(value)
        except AbiError as exc:
            raise ValueError(
                f"{exc} (e.g. 'balanceOf(address)(uint256)' or 'balanceOf(address) returns (uint256)')"
            ) from exc
        return value

    @model_validator(mode="after")
    def _args_fit_the_signature(self) -> EvmCallSpec:
        from sentinel_hooks.core.evm_abi import arg_count_problem, arg_problems, parse_signature

        signature = parse_signature(self.signature)
        count = arg_count_problem(signature, self.args)
        if count is not None:
            raise key_problems("evmCall", [(("args",), count)])
        problems = arg_problems(signature, self.args)
        if problems:
            raise key_problems("evmCall", [(("args", p.index), p.message) for p in problems])
        return self


class EvmCallWatcher(Scheduled):
    strategy: Literal["evm-call"]
    endpoint: str
    evm_call: EvmCallSpec

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_url(value, ("http", "https"))

    def endpoint_urls(self) -> list[str]:
        return [self.endpoint]


WatcherSpec = Annotated[
    HttpPollWatcher
    | HttpLongPollWatcher
    | SseWatcher
    | WebSocketWatcher
    | RedisPubSubWatcher
    | RedisStreamWatcher
    | WebhookWatcher
    | CommandWatcher
    | EvmCallWatcher
    | HeartbeatWatcher,
    Field(discriminator="strategy"),
]
AnyWatcher = (
    HttpPollWatcher
    | HttpLongPollWatcher
    | SseWatcher
    | WebSocketWatcher
    | RedisPubSubWatcher
    | RedisStreamWatcher
    | WebhookWatcher
    | CommandWatcher
    | EvmCallWatcher
    | HeartbeatWatcher
)
WATCHER_ADAPTER: TypeAdapter[AnyWatcher] = TypeAdapter(WatcherSpec, config=ConfigDict(defer_build=True))
WATCHER_MODELS: dict[str, type[AnyWatcher]] = {
    "http-poll": HttpPollWatcher,
    "http-long-poll": HttpLongPollWatcher,
    "sse": SseWatcher,
    "websocket": WebSocketWatcher,
    "redis-pubsub": RedisPubSubWatcher,
    "redis-stream": RedisStreamWatcher,
    "webhook": WebhookWatcher,
    "command": CommandWatcher,
    "evm-call": EvmCallWatcher,
    "heartbeat": HeartbeatWatcher,
}
"""The model of each ``strategy``, as ``WatcherSpec``'s discriminator picks it."""
STRATEGIES = tuple(WATCHER_MODELS)


def _share_key_table(model: type[BaseModel]) -> None:
    """Put ``model``'s field names in the key table its instances share (``keep_compact``).

    Done once, before any instance exists: CPython gives that table less room with every new
    instance, so after a few dozen made by validation or unpickling (which bring dicts of their
    own and add no names) no name could be added any more, and ``keep_compact`` would save
    nothing.
    """
    first = object.__new__(model)
    for name in model.model_fields:
        object.__setattr__(first, name, None)


for _model in WATCHER_MODELS.values():
    _share_key_table(_model)


def watcher_model(data: dict[str, Any]) -> type[AnyWatcher] | None:
    """The model ``WatcherSpec``'s discriminator picks for ``data``, when its ``strategy`` is
    text naming one; None otherwise (no strategy, an unknown one, not plain text).

    Validating ``data`` with that model directly is what the union does once it has read the
    tag: the same checks and errors (without the tag at the head of their locations, so the
    model, not ``WatcherSpec``, is their root), but only that model's validator is ever built:
    ``sentinel test`` of an http-poll watcher builds no other strategy's. For None, the union
    validates and words what is wrong with ``strategy``.
    """
    strategy = data.get("strategy")
    return WATCHER_MODELS.get(strategy) if type(strategy) is str else None
