"""openclaw-sentinel's ``evm-call`` watchers → Sentinel's: the signature and the observation's shape.

Upstream writes abitype's human-readable form (``function balanceOf(address) view returns
(uint256)``) and observes ``{result: [...], resultNamed: {name: value}, raw, blockTag, to,
signature}`` with big integers as decimal strings. Sentinel reads ``balanceOf(address) returns
(uint256)`` and observes ``{value, outputs: [...]}`` with integers as JSON numbers. So paths are
rewritten (``result.1`` → ``outputs.1``, ``resultNamed.settled`` → ``outputs.<its position>``),
the constants upstream echoed (``to``, ``signature``, ``blockTag``) become literal text in
templates, and ``raw`` has no counterpart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from sentinel_hooks.config.openclaw.templates import Constant, Unmapped
from sentinel_hooks.core.evm_abi import AbiError, parse_signature

_MODIFIERS: Final = re.compile(r"\b(view|pure|payable|nonpayable|external|public)\b")
_SHAPE: Final = re.compile(
    r"^\s*(?:function\s+)?(?P<head>\w+\s*\([^()]*\))(?P<mods>[^()]*?)(?:returns\s*(?P<outs>\([^()]*\)))?\s*$"
)
_DECIMAL: Final = re.compile(r"^-?[0-9]+$")


@dataclass(frozen=True)
class EvmShape:
    """What an upstream ``evmCall`` becomes: Sentinel's signature, output names and types."""

    signature: str
    names: tuple[str | None, ...]
    types: tuple[str, ...]
    constants: dict[str, Any]

    def observation_path(self, path: str) -> str | Constant | Unmapped:
        """An upstream observation path (as in a condition) in Sentinel's observation."""
        head, _, rest = path.partition(".")
        tail = f".{rest}" if rest else ""
        if head == "result":
            return f"outputs{tail}"
        if head == "resultNamed":
            name, _, below = rest.partition(".")
            if name in self.names:
                return f"outputs.{self.names.index(name)}" + (f".{below}" if below else "")
            return Unmapped(f"no output named {name!r} in the signature (Sentinel has outputs by position)")
        if head == "raw":
            return Unmapped("Sentinel's evm-call does not observe the raw return data")
        if head in self.constants and not rest:
            return Constant(self.constants[head])
        return path

    def template_path(self, path: str) -> str | Constant | Unmapped:
        """An upstream template path (``payload.result.0``) in Sentinel's terms."""
        if not path.startswith("payload."):
            return path
        mapped = self.observation_path(path.removeprefix("payload."))
        return f"payload.{mapped}" if isinstance(mapped, str) else mapped

    def condition_path(self, path: str) -> str | Unmapped:
        """A condition's path; the echoed constants cannot be conditions (they never change)."""
        mapped = self.observation_path(path)
        if isinstance(mapped, Constant):
            return Unmapped(f"{path!r} is the watcher's own evmCall.{path}, not observed by Sentinel")
        return mapped

    def output_type(self, path: str) -> str | None:
        """The ABI type at a Sentinel observation path ``outputs.N`` (or ``value``), if known."""
        parts = path.split(".")
        if parts[0] == "value" and len(parts) == 1 and self.types:
            return self.types[0]
        if (
            parts[0] == "outputs"
            and len(parts) == 2
            and parts[1].isdigit()
            and int(parts[1]) < len(self.types)
        ):
            return self.types[int(parts[1])]
        return None


def integer_value(abi_type: str | None, value: Any) -> int | None:
    """``value`` as the JSON integer Sentinel observes, when upstream compared a decimal string."""
    if abi_type is None or not abi_type.startswith(("uint", "int")) or abi_type.endswith("]"):
        return None
    if isinstance(value, str) and _DECIMAL.match(value):
        return int(value)
    return None


def evm_shape(evm_call: dict[str, Any]) -> EvmShape:
    """Sentinel's form of an upstream ``evmCall``; ``ValueError`` when it has none."""
    text = evm_call.get("signature")
    if not isinstance(text, str):
        raise ValueError("evmCall.signature is missing")
    found = _SHAPE.match(text)
    if found is None or _MODIFIERS.sub("", found["mods"]).strip():
        raise ValueError(
            f"signature {text!r} is not one Sentinel can read (tuple or struct types are not supported)"
        )
    outputs = found["outs"] or "()"
    signature = f"{found['head']} returns {outputs}"
    try:
        parsed = parse_signature(signature)
    except AbiError as exc:
        raise ValueError(str(exc)) from exc
    names = tuple(_output_name(part) for part in outputs[1:-1].split(",") if part.strip())
    constants = {
        "to": evm_call.get("to"),
        "signature": text,
        "blockTag": evm_call.get("blockTag", "latest"),
    }
    return EvmShape(signature, names, parsed.outputs, constants)


def _output_name(part: str) -> str | None:
    words = part.split()
    return words[-1] if len(words) > 1 else None
