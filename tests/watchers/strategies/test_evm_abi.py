"""Signatures, argument coercion and output rendering for `evm-call` (no network)."""

from __future__ import annotations

from typing import Any

import pytest
from eth_abi.abi import encode

from sentinel_hooks.core.evm_abi import AbiError, call_data, decode_outputs, parse_signature

ADDRESS = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
CHECKSUMMED = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # EIP-55's first example


@pytest.mark.parametrize(
    ("text", "canonical", "selector"),
    [
        ("balanceOf(address)(uint256)", "balanceOf(address)", "70a08231"),
        ("balanceOf(address owner) returns (uint256 balance)", "balanceOf(address)", "70a08231"),
        ("transfer(address,uint)(bool)", "transfer(address,uint256)", "a9059cbb"),
        ("totalSupply()(uint256)", "totalSupply()", "18160ddd"),
    ],
)
def test_selector_is_keccak_of_the_canonical_signature(text: str, canonical: str, selector: str) -> None:
    """Names are dropped and uint/int widened before hashing (the well-known ERC-20 selectors)."""
    signature = parse_signature(text)
    assert (canonical, selector) == (signature.canonical, signature.selector.hex())


def test_unknown_type_is_an_abi_error() -> None:
    """A type the ABI does not have is refused with its name."""
    with pytest.raises(AbiError, match="'uint257' is not a Solidity ABI type"):
        parse_signature("f(uint257)(bool)")


@pytest.mark.parametrize(
    ("abi_type", "written", "meant"),
    [
        ("uint256", "1000000000000000000000000", 10**24),
        ("uint256", "0xff", 255),
        ("int256", "-5", -5),
        ("int256", -5, -5),
        ("bytes32", "0x" + "ab" * 32, bytes.fromhex("ab" * 32)),
        ("bytes", "0x0102", b"\x01\x02"),
        ("uint256[]", ["1", 2], [1, 2]),
        ("address", ADDRESS, ADDRESS),
        ("bool", True, True),
        ("string", "hi", "hi"),
    ],
)
def test_yaml_args_are_coerced_before_encoding(abi_type: str, written: Any, meant: Any) -> None:
    """Integers as strings, bytes as 0x hex and lists encode like the values they stand for."""
    signature = parse_signature(f"f({abi_type})()")
    assert signature.selector + encode([abi_type], [meant]) == call_data(signature, [written])


@pytest.mark.parametrize(
    ("abi_type", "written", "why"),
    [
        ("address", "nope", r"args\[0\] \(address\): 'nope' does not fit"),
        ("uint8", 300, r"args\[0\] \(uint8\): 300 does not fit"),
        ("uint256", "12abc", "expected an integer"),
        ("bytes32", "abcd", "expected 0x-prefixed hex"),
        ("bytes", "0xzz", "expected 0x-prefixed hex"),
        ("uint256[]", "1", "expected a list"),
    ],
)
def test_args_that_do_not_fit_are_abi_errors(abi_type: str, written: Any, why: str) -> None:
    """Each refused argument names its index, type and the reason."""
    with pytest.raises(AbiError, match=why):
        call_data(parse_signature(f"f({abi_type})()"), [written])


def test_wrong_arg_count_is_an_abi_error() -> None:
    """The number of args must match the signature."""
    with pytest.raises(AbiError, match=r"balanceOf\(address\) takes 1 argument\(s\), got 0"):
        call_data(parse_signature("balanceOf(address)(uint256)"), [])


def test_outputs_render_as_exact_json() -> None:
    """Ints exact, addresses checksummed, bytes as 0x hex, arrays as lists, strings as is."""
    types = ["int256", "uint256", "bytes2", "bytes", "address[]", "string", "bool"]
    values = [-(2**255), 2**256 - 1, b"\x00\xff", b"\x01", [ADDRESS], "ok", False]
    signature = parse_signature(f"f()({','.join(types)})")
    expected = [-(2**255), 2**256 - 1, "0x00ff", "0x01", [CHECKSUMMED], "ok", False]
    assert expected == decode_outputs(signature, encode(types, values))


def test_function_without_outputs_decodes_to_an_empty_list() -> None:
    """A signature with no outputs gives no values (and no error on empty return data)."""
    assert [] == decode_outputs(parse_signature("poke()()"), b"")


def test_short_return_data_is_an_abi_error() -> None:
    """Return data shorter than the outputs need is refused, saying how much came back."""
    with pytest.raises(AbiError, match=r"return data \(3 bytes\) does not decode as \(uint256\)"):
        decode_outputs(parse_signature("f()(uint256)"), b"abc")
