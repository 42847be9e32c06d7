"""The base of every configuration model: frozen, camelCase keys, unknown keys refused."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Spec(BaseModel):
    """A piece of user-written configuration.

    Keys are the camelCase names of SPEC.md; only those are accepted (``extra="forbid"``),
    and the Python attributes are their snake_case forms.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
    )


PositiveMs = Annotated[int, Field(gt=0)]
NonNegativeMs = Annotated[int, Field(ge=0)]
Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
