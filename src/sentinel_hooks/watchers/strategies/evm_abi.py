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


def call_data(signature: Signature, args: list[Any]) -> bytes:
    """Selector + ABI-encoded ``args`` (``AbiError`` naming the argument that does not fit)."""
    if len(args) != len(signature.inputs):
        raise AbiError(f"{signature.canonical} takes {len(signature.inputs)} argument(s), got {len(args)}")
    coerced = []
    for index, (abi_type, value) in enumerate(zip(signature.inputs, args, strict=True)):
        try:
            coerced.append(coerce_arg(parse(abi_type), value))
            encode([abi_type], [coerced[-1]])
        except (AbiError, EncodingError, ValueError, TypeError) as exc:
            raise AbiError(f"args[{index}] ({abi_type}): {value!r} does not fit: {exc}") from exc
    return signature.selector + encode(list(signature.inputs), coerced)


def coerce_arg(abi_type: ABIType, value: Any) -> Any:
    """``value`` from YAML in the form the encoder takes for ``abi_type``."""
    if abi_type.is_array:
        if not isinstance(value, list):
            raise AbiError(f"expected a list, got {type(value).__name__}")
        return [coerce_arg(abi_type.item_type, item) for item in value]
    if isinstance(abi_type, TupleType):
        if not isinstance(value, list) or len(value) != len(abi_type.components):
            raise AbiError(f"expected a list of {len(abi_type.components)} values")
        return tuple(coerce_arg(part, item) for part, item in zip(abi_type.components, value, strict=True))
    assert isinstance(abi_type, BasicType)  # the grammar has only basic, tuple and array types
    if abi_type.base in ("uint", "int") and isinstance(value, str):
        found = _INT_TEXT.match(value)
        if found is None:
            raise AbiError("expected an integer (a number, or a decimal or 0x string)")
        sign, digits = found.groups()
        return (-1 if sign else 1) * int(digits, 0)
    if abi_type.base == "bytes" and isinstance(value, str):
        if not value.startswith("0x"):
            raise AbiError("expected 0x-prefixed hex")
        try:
            return bytes.fromhex(value[2:])
        except ValueError as exc:
            raise AbiError("expected 0x-prefixed hex") from exc
    return value


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
