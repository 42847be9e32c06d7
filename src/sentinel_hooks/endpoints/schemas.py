"""JSON Schemas of the declared types, as pydantic writes them (``model_json_schema`` and
``TypeAdapter.json_schemas``), for the OpenAPI document and the MCP tools alike.

Two adjustments, both to what pydantic writes rather than schemas written by hand: fields get no
``title`` (pydantic derives ``"Callbackid"`` from ``callbackId``: noise where the key is its own
name), and a parameter that may be left out is not said to be ``null`` — a query string or a
header has no null, only absence (``parameters``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import CoreSchema

Schema = dict[str, Any]
NULL: Schema = {"type": "null"}


class FieldsWithoutTitles(GenerateJsonSchema):
    """pydantic's generator, without a title on every field."""

    def field_title_should_be_set(self, schema: CoreSchema) -> bool:
        return False


ID_SCHEMA: Schema = TypeAdapter(Annotated[str, Field(min_length=1)]).json_schema()
"""A path segment: any non-empty text (the route answers 404 for an id nothing has)."""


def json_schemas(
    inputs: Sequence[tuple[str, JsonSchemaMode, Any]], ref_template: str
) -> tuple[dict[str, Schema], dict[str, Schema]]:
    """The schema of each ``(key, mode, type)`` by key (a ``$ref`` for a model) and the named
    schemas they refer to, with ``$ref`` s made by ``ref_template`` (``{model}`` is the name)."""
    adapters = [(key, mode, TypeAdapter(kind)) for key, mode, kind in inputs]
    tops, definitions = TypeAdapter.json_schemas(
        adapters, by_alias=True, ref_template=ref_template, schema_generator=FieldsWithoutTitles
    )
    return {key: schema for (key, _), schema in tops.items()}, dict(definitions.get("$defs", {}))


def model_schema(model: type[BaseModel], mode: JsonSchemaMode, ref_template: str) -> Schema:
    """One model's schema, the models it refers to under ``$defs``."""
    return model.model_json_schema(
        by_alias=True, ref_template=ref_template, schema_generator=FieldsWithoutTitles, mode=mode
    )


@dataclass(frozen=True)
class Parameter:
    """One query or header parameter: its name as sent, schema, whether it is required, and
    what it is for."""

    name: str
    schema: Schema
    required: bool
    about: str


def without_null(schema: Schema) -> Schema:
    """An optional parameter's schema without its ``null`` alternative (and null default)."""
    options = schema.get("anyOf")
    if not options or NULL not in options:
        return schema
    rest = [option for option in options if option != NULL]
    kept = {k: v for k, v in schema.items() if k != "anyOf" and not (k == "default" and v is None)}
    return {**rest[0], **kept} if len(rest) == 1 else {**kept, "anyOf": rest}


def parameters(model: type[BaseModel]) -> list[Parameter]:
    """The parameters a parameters model declares, one per field (simple types only: a query
    string has no room for a referenced object)."""
    schema = model_schema(model, "validation", "#/$defs/{model}")
    if "$defs" in schema:
        raise TypeError(f"{model.__name__}: a parameter cannot be an object ({sorted(schema['$defs'])})")
    required = set(schema.get("required", ()))
    found = []
    for name, field in schema["properties"].items():
        field = dict(field)
        about = field.pop("description", "")
        found.append(Parameter(name, without_null(field), name in required, about))
    return found
