"""Solidity ABI for `evm-call`: a signature and YAML arguments to call data, return data to JSON.

Uses ``eth-abi`` for the encoding itself; this module adds what the watcher file needs:

- ``parse_signature("balanceOf(address owner) returns (uint256)")`` → name, input and output
  types in canonical form (``uint`` → ``uint256``, parameter names dropped), so the selector
  is keccak256 of exactly ``balanceOf(address)``.
- ``coerce_arg`` turns YAML values into what the encoder wants: integers may be written as
  decimal or ``0x`` strings (YAML has no big-int literal everyone agrees on), ``bytes``/
  ``bytesN`` as ``0x`` hex strings, arrays as lists.
- ``to_json`` renders decoded outputs exactly: integers stay JSON integers (no float rounding,
  whatever their size), addresses become EIP-55 checksummed strings, bytes ``0x`` hex, tuples
  and arrays lists.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eth_abi import grammar
from eth_abi.abi import decode, encode
from eth_abi.exceptions import ABITypeError, DecodingError, EncodingError, ParseError
from eth_abi.grammar import ABIType, BasicType, TupleType, parse
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

_SIGNATURE = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\((?P<inputs>[^()]*)\)\s*(?:returns\s*)?\((?P<outputs>[^()]*)\)\s*$"
)
# eth-abi leaves ``normalize`` unannotated; this is its documented shape.
normalize: Callable[[str], str] = grammar.normalize
_INT_TEXT = re.compile(r"^\s*(-?)(0x[0-9a-fA-F]+|[0-9]+)\s*$")


class AbiError(ValueError):
    """A signature, argument or return value that does not fit the ABI (names what and why)."""


@dataclass(frozen=True)
class Signature:
    """A function's name and canonical input and output types."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def canonical(self) -> str:
        """``name(type,…)``: the text whose keccak256 starts with the selector."""
        return f"{self.name}({','.join(self.inputs)})"

    @property
    def selector(self) -> bytes:
        """The 4-byte function selector."""
        return keccak(text=self.canonical)[:4]


def parse_signature(text: str) -> Signature:
    """The ``Signature`` in ``text`` (``name(in,…)(out,…)`` or ``name(in,…) returns (out,…)``)."""
    found = _SIGNATURE.match(text)
    if found is None:
        raise AbiError(f"signature {text!r} must look like 'balanceOf(address)(uint256)'")
    return Signature(found["name"], _types(found["inputs"]), _types(found["outputs"]))


def _types(listed: str) -> tuple[str, ...]:
    types: list[str] = []
    for part in listed.split(","):
        if not part.strip():
            continue
        written = part.split()[0]  # "address owner" → "address"
        try:
            canonical = normalize(written)
            parse(canonical).validate()
        except (ParseError, ABITypeError) as exc:
            raise AbiError(f"{written!r} is not a Solidity ABI type ({exc})") from exc
        types.append(canonical)
    return tuple(types)


@dataclass(frozen=True)
class ArgProblem:
    """One argument that does not fit its input type, and why (in words a user can act on)."""

    index: int
    abi_type: str
    value: Any
    reason: str

    @property
    def message(self) -> str:
        """``'nope' does not fit address: expected 0x and 40 hex digits``."""
        return f"{self.value!r} does not fit {self.abi_type}: {self.reason}"

    def __str__(self) -> str:
        return f"args[{self.index}] ({self.abi_type}): {self.value!r} does not fit: {self.reason}"


def arg_count_problem(signature: Signature, args: list[Any]) -> str | None:
    """Why ``args`` cannot be the arguments of ``signature`` by their number, or None."""
    if len(args) == len(signature.inputs):
        return None
    return f"{signature.canonical} takes {len(signature.inputs)} argument(s), got {len(args)}"


def arg_problems(signature: Signature, args: list[Any]) -> list[ArgProblem]:
    """Every argument that does not fit its input type (checked when the watcher is loaded)."""
    problems: list[ArgProblem] = []
    for index, (abi_type, value) in enumerate(zip(signature.inputs, args, strict=False)):
        try:
            _encodable(abi_type, coerce_arg(parse(abi_type), value))
        except AbiError as exc:
            problems.append(ArgProblem(index, abi_type, value, str(exc)))
    return problems


def call_data(signature: Signature, args: list[Any]) -> bytes:
    """Selector + ABI-encoded ``args`` (``AbiError`` naming the argument that does not fit)."""
    count = arg_count_problem(signature, args)
    if count is not None:
        raise AbiError(count)
    problems = arg_problems(signature, args)
    if problems:
        raise AbiError(str(problems[0]))
    coerced = [coerce_arg(parse(t), v) for t, v in zip(signature.inputs, args, strict=True)]
    return signature.selector + encode(list(signature.inputs), coerced)


_ENCODER_PREFIX = re.compile(r"^Value .* cannot be encoded by \w+:?\s*", re.DOTALL)


def _encodable(abi_type: str, value: Any) -> None:
    """The encoder's own check, for what ``coerce_arg`` does not word itself (e.g. fixed types)."""
    try:
        encode([abi_type], [value])
    except (EncodingError, ValueError, TypeError, OverflowError) as exc:
        reason = _ENCODER_PREFIX.sub("", str(exc)).strip()
        raise AbiError(reason or f"cannot be encoded as {abi_type}") from exc


_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


def coerce_arg(abi_type: ABIType, value: Any) -> Any:
    """``value`` from YAML in the form the encoder takes for ``abi_type``; ``AbiError`` says why not."""
    if abi_type.is_array:
        return _coerce_list(abi_type, value)
    if isinstance(abi_type, TupleType):
        if not isinstance(value, list) or len(value) != len(abi_type.components):
            raise AbiError(f"expected a list of {len(abi_type.components)} values")
        return tuple(coerce_arg(part, item) for part, item in zip(abi_type.components, value, strict=True))
    assert isinstance(abi_type, BasicType)  # the grammar has only basic, tuple and array types
    base = abi_type.base
    if base in ("uint", "int"):
        return _integer(abi_type, value)
    if base == "address" and not (isinstance(value, str) and _ADDRESS.match(value)):
        raise AbiError("expected 0x and 40 hex digits")
    if base == "bool" and not isinstance(value, bool):
        raise AbiError("expected true or false")
    if base == "string" and not isinstance(value, str):
        raise AbiError("expected a string")
    if base == "bytes":
        return _bytes(abi_type, value)
    return value


def _coerce_list(abi_type: ABIType, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise AbiError("expected a list")
    dimension = abi_type.arrlist[-1] if abi_type.arrlist else ()
    if dimension and len(value) != dimension[0]:
        raise AbiError(f"expected a list of {dimension[0]} items, got {len(value)}")
    items = []
    for index, item in enumerate(value):
        try:
            items.append(coerce_arg(abi_type.item_type, item))
        except AbiError as exc:
            raise AbiError(f"item {index} ({item!r}): {exc}") from exc
    return items


def _integer(abi_type: BasicType, value: Any) -> int:
    if isinstance(value, str) and (found := _INT_TEXT.match(value)) is not None:
        sign, digits = found.groups()
        value = (-1 if sign else 1) * int(digits, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise AbiError("expected an integer (a number, or a decimal or 0x string)")
    bits = int(abi_type.sub or 256)
    low, high = (0, 2**bits - 1) if abi_type.base == "uint" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        shown = (str(low), str(high)) if bits <= 64 else _powers(abi_type.base, bits)
        raise AbiError(f"out of range ({shown[0]} to {shown[1]})")
    return value


def _powers(base: str, bits: int) -> tuple[str, str]:
    return ("0", f"2**{bits}-1") if base == "uint" else (f"-2**{bits - 1}", f"2**{bits - 1}-1")


def _bytes(abi_type: BasicType, value: Any) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise AbiError("expected 0x-prefixed hex")
    try:
        data = bytes.fromhex(value[2:])
    except ValueError as exc:
        raise AbiError("expected 0x-prefixed hex") from exc
    if abi_type.sub and len(data) > int(abi_type.sub):
        raise AbiError(f"{len(data)} bytes, at most {abi_type.sub}")
    return data


def decode_outputs(signature: Signature, result: bytes) -> list[Any]:
    """The outputs in ``result`` as JSON values (``AbiError`` when they do not decode)."""
    try:
        values = decode(list(signature.outputs), result)
    except (DecodingError, ValueError, TypeError) as exc:
        shown = f"{len(result)} bytes" if result else "no data (is `to` a contract? right signature?)"
        raise AbiError(
            f"return data ({shown}) does not decode as ({','.join(signature.outputs)}): {exc}"
        ) from exc
    return [to_json(parse(t), v) for t, v in zip(signature.outputs, values, strict=True)]


def to_json(abi_type: ABIType, value: Any) -> Any:
    """A decoded ``value`` of ``abi_type`` as JSON (see the module docstring)."""
    if abi_type.is_array:
        return [to_json(abi_type.item_type, item) for item in value]
    if isinstance(abi_type, TupleType):
        return [to_json(part, item) for part, item in zip(abi_type.components, value, strict=True)]
    if isinstance(abi_type, BasicType) and abi_type.base == "address":
        return to_checksum_address(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value
