"""The console target: one flushed line per message, never a stray exception."""

from __future__ import annotations

import io

import pytest

from sentinel_hooks.delivery.targets.base import DeliveryError, TargetContext
from tests.delivery.conftest import MakeTarget, message

CONSOLE = {"type": "console"}


async def test_prints_the_line(make_target: MakeTarget, console: io.StringIO) -> None:
    """``[sentinel] <priority> <eventName> on <watcherId>: <text>``."""
    await make_target(CONSOLE).send(message(), idempotency_key="k")
    assert "[sentinel] high gas_high on eth-gas: Gas is 182 gwei (over 150).\n" == console.getvalue()


async def test_multi_line_text_is_indented(make_target: MakeTarget, console: io.StringIO) -> None:
    """Later lines of the text are indented under the first."""
    await make_target(CONSOLE).send(message(text="first\nsecond\nthird"), idempotency_key="k")
    expected = "[sentinel] high gas_high on eth-gas: first\n    second\n    third\n"
    assert expected == console.getvalue()


async def test_control_characters_are_shown_not_sent(make_target: MakeTarget, console: io.StringIO) -> None:
    """A terminal escape in observed text is printed as \\x1b, not sent to the terminal."""
    await make_target(CONSOLE).send(message(text="red \x1b[31malert"), idempotency_key="k")
    assert "[sentinel] high gas_high on eth-gas: red \\x1b[31malert\n" == console.getvalue()


async def test_each_message_is_one_write(make_target: MakeTarget, console: io.StringIO) -> None:
    """Two messages give two lines, in order."""
    target = make_target(CONSOLE)
    await target.send(message(text="one"), idempotency_key="k1")
    await target.send(message(text="two"), idempotency_key="k2")
    assert ["one", "two"] == [line.rsplit(": ", 1)[1] for line in console.getvalue().splitlines()]


async def test_standard_output_when_no_stream(
    make_target: MakeTarget, context: TargetContext, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``context.console`` the line goes to sys.stdout."""
    ctx = TargetContext(http=context.http, clock=context.clock, base_dir=context.base_dir)
    await make_target(CONSOLE, ctx=ctx).send(message(), idempotency_key="k")
    assert "[sentinel] high gas_high on eth-gas: Gas is 182 gwei (over 150).\n" == capsys.readouterr().out


async def test_closed_stream_is_a_delivery_error(make_target: MakeTarget, console: io.StringIO) -> None:
    """A closed stream → DeliveryError, not retryable, naming the target."""
    console.close()
    with pytest.raises(DeliveryError, match="console target 'stdout'") as caught:
        await make_target(CONSOLE, name="stdout").send(message(), idempotency_key="k")
    assert caught.value.retryable is False
