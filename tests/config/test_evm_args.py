"""`evm-call` arguments are checked against the ABI signature when the watcher is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.errors import ConfigError, ConfigIssue
from tests.conftest import Writer


def issues_of(config: Path) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as caught:
        load_config(config, environ={})
    return caught.value.issues


EVM = """\
id: balance
strategy: evm-call
endpoint: https://api.example.com/rpc
intervalMs: 15000
evmCall:
  to: "0x1111111111111111111111111111111111111111"
  signature: f(address,uint8,bool,bytes4,uint256[2])(uint256)
  args:
    - nope
    - 300
    - "yes"
    - "0x0102030405"
    - [1]
"""


def test_evm_call_args_are_checked_at_load(project: Writer) -> None:
    """Each argument that does not fit its ABI type is an error at its line, in plain words."""
    found = issues_of(project(watchers__w_yaml=EVM))
    assert [
        (9, "evmCall.args[0]"),
        (10, "evmCall.args[1]"),
        (11, "evmCall.args[2]"),
        (12, "evmCall.args[3]"),
        (13, "evmCall.args[4]"),
    ] == [(i.line, i.key) for i in found]
    assert [
        "'nope' does not fit address: expected 0x and 40 hex digits",
        "300 does not fit uint8: out of range (0 to 255)",
        "'yes' does not fit bool: expected true or false",
        "'0x0102030405' does not fit bytes4: 5 bytes, at most 4",
        "[1] does not fit uint256[2]: expected a list of 2 items, got 1",
    ] == [i.message for i in found]


def test_evm_call_signature_types_are_checked_at_load(project: Writer) -> None:
    """A type the ABI does not have is refused at load, at the signature's line."""
    text = EVM.split("  args:")[0].replace("f(address,uint8,bool,bytes4,uint256[2])", "f(uint257)")
    found = issues_of(project(watchers__w_yaml=text))
    assert [(7, "evmCall.signature", True)] == [
        (i.line, i.key, "'uint257' is not a Solidity ABI type" in i.message) for i in found
    ]


def test_evm_call_arg_count_is_checked_at_the_args_line(project: Writer) -> None:
    """Too few arguments for the signature is an error at `args`."""
    text = EVM.replace(
        "f(address,uint8,bool,bytes4,uint256[2])", "f(address,address,uint8,bool,bytes4,uint256[2])"
    )
    text = text.replace("    - nope\n", "")
    found = issues_of(project(watchers__w_yaml=text))
    assert ("evmCall.args", 8) == (found[0].key, found[0].line)
    assert "f(address,address,uint8,bool,bytes4,uint256[2]) takes 6 argument(s), got 4" in found[0].message


def test_evm_call_args_that_fit_load(project: Writer) -> None:
    """Addresses, integers as text, 0x bytes, booleans and lists that fit are accepted."""
    text = EVM.replace("    - nope\n", "    - '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed'\n")
    text = text.replace("- 300", "- '255'").replace('- "yes"', "- true").replace("0x0102030405", "0x01")
    text = text.replace("- [1]", "- [1, '0x2']")
    loaded = load_config(project(watchers__w_yaml=text), environ={})
    assert ["balance"] == [w.spec.id for w in loaded.watchers]
