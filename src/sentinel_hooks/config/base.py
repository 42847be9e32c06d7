"""The base of every configuration model: frozen, strict, camelCase keys, unknown keys refused."""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from sentinel_hooks.config.envvars import EnvText, yaml_scalar

KEY_PROBLEM = "config"
"""The pydantic error type of :func:`key_problems` (its message is shown as written)."""


class Spec(BaseModel):
    """A piece of user-written configuration.

    Keys are the camelCase names of SPEC.md; only those are accepted (``extra="forbid"``),
    and the Python attributes are their snake_case forms. Values are never converted
    (``strict``): ``"2000"`` is not a number and ``"no"`` or ``1`` not a boolean. The one
    exception is a whole ``${env:…}`` value, which the environment can only give as text:
    it is read as the number or boolean its key expects (``intervalMs: ${env:EVERY}``).

    Validators are built when first used (``defer_build``): importing the config models costs
    no schema build, a command builds only what it validates (``sentinel test``: sentinel.yaml's
    model and one strategy's), and a model nested in another is built as part of it only.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        defer_build=True,  # a model's validator is built at its first use, not at import
    )

    @model_validator(mode="before")
    @classmethod
    def _env_values_take_the_key_type(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for value in data.values():  # most mappings hold no ${env:} value: a plain loop is quickest
            if isinstance(value, EnvText):
                break
        else:
            return data
        typed = {
            key: yaml_scalar(value)
            for key, value in data.items()
            if isinstance(value, EnvText) and not _takes_text(_annotation(cls, key))
        }
        found = {key: value for key, value in typed.items() if value is not None}
        return {**data, **found} if found else data


def _annotation(model: type[BaseModel], key: str) -> Any:
    field = next((f for name, f in model.model_fields.items() if key in (f.alias, name)), None)
    return Any if field is None else field.annotation


def _takes_text(annotation: Any) -> bool:
    """Whether a key of this type accepts text (then a value from the environment stays text)."""
    if annotation is Any or annotation is str or annotation is SecretStr:
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _takes_text(get_args(annotation)[0])
    if origin is Literal:
        return any(isinstance(choice, str) for choice in get_args(annotation))
    if origin is Union or origin is types.UnionType:
        return any(_takes_text(member) for member in get_args(annotation))
    return False


def key_problems(model: str, problems: Sequence[tuple[tuple[str | int, ...], str]]) -> ValidationError:
    """One error per ``(key path, message)``, the path relative to the value being validated.

    Raised from a validator, it reports several problems at once, each at its own key and
    line (a plain ``ValueError`` gives one message at the validated value's own key).
    """
    return ValidationError.from_exception_data(
        model,
        [
            InitErrorDetails(
                type=PydanticCustomError(KEY_PROBLEM, "{message}", {"message": message}),
                loc=loc,
                input=None,
            )
            for loc, message in problems
        ],
    )


PositiveMs = Annotated[int, Field(gt=0)]
NonNegativeMs = Annotated[int, Field(ge=0)]
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
