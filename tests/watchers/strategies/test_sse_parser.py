"""The Server-Sent Events parser, rule by rule (pure, fed byte chunks)."""

from __future__ import annotations

import pytest

from sentinel_hooks.watchers.strategies.sse_parser import SseEvent, SseParser, SseTooLarge


def parse(*chunks: bytes | str, parser: SseParser | None = None) -> list[SseEvent]:
    parser = parser or SseParser()
    events: list[SseEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk.encode() if isinstance(chunk, str) else chunk)
    return events


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (["data: hello\n\n"], [SseEvent("hello")]),
        (["data: a\ndata: b\n\n"], [SseEvent("a\nb")]),
        (["event: price\ndata: 1\n\n"], [SseEvent("1", type="price")]),
        (["data: x\n\ndata: y\n\n"], [SseEvent("x"), SseEvent("y")]),
        ([": keepalive\n\n"], []),
        (["data: a\n: note\ndata: b\n\n"], [SseEvent("a\nb")]),
        (["data: x\r\n\r\n"], [SseEvent("x")]),
        (["data: x\r\r"], [SseEvent("x")]),
        (["data: a\rdata: b\r\n\n"], [SseEvent("a\nb")]),
        (["data: a\r", "\ndata: b\n\n"], [SseEvent("a\nb")]),
        (["data: a\r", "\r"], [SseEvent("a")]),
        ([b"\xef\xbb\xbfdata: x\n\n"], [SseEvent("x")]),
        ([b"\xef", b"\xbb\xbfdata: x\n\n"], [SseEvent("x")]),
        ([b"data: a\n\n\xef\xbb\xbfdata: b\n\n"], [SseEvent("a")]),
        (["data\n\n"], [SseEvent("")]),
        (["data:\n\n"], [SseEvent("")]),
        (["event\ndata: x\n\n"], [SseEvent("x", type="message")]),
        (["data:x\n\n"], [SseEvent("x")]),
        (["data:  x\n\n"], [SseEvent(" x")]),
        (["data: x\n"], []),
        (["data: x\n", "\n"], [SseEvent("x")]),
        (["data: x"], []),
        (["event: ping\n\n"], []),
        (["event: a\n\ndata: x\n\n"], [SseEvent("x")]),
        (["foo: bar\ndata: x\n\n"], [SseEvent("x")]),
        ([b"data: caf\xc3", b"\xa9\n\n"], [SseEvent("café")]),
        (["id: 7\ndata: x\n\n"], [SseEvent("x", id="7")]),
        (["id: 7\ndata: x\n\ndata: y\n\n"], [SseEvent("x", id="7"), SseEvent("y", id="7")]),
        (["id: 7\ndata: x\n\nid\ndata: y\n\n"], [SseEvent("x", id="7"), SseEvent("y", id="")]),
        (["id: 7\ndata: x\n\nid: a\0b\ndata: y\n\n"], [SseEvent("x", id="7"), SseEvent("y", id="7")]),
    ],
)
def test_event_stream_rules(chunks: list[bytes | str], expected: list[SseEvent]) -> None:
    """Fields, comments, line endings (split CRLF too), BOM, dispatch on blank lines only."""
    assert expected == parse(*chunks)


def test_blank_line_updates_last_event_id_without_dispatch() -> None:
    """An id with no data dispatches nothing but still becomes the last event ID."""
    parser = SseParser()
    events = parse("id: 42\n\n", parser=parser)
    assert ([], "42") == (events, parser.last_event_id)


def test_last_event_id_waits_for_the_blank_line() -> None:
    """The last event ID changes when the event is dispatched, not when the id line arrives."""
    parser = SseParser(last_event_id="1")
    parse("id: 2\ndata: x\n", parser=parser)
    assert "1" == parser.last_event_id


def test_resumed_parser_keeps_the_previous_id() -> None:
    """A parser started with a last event ID reports it for events that carry none."""
    assert [SseEvent("x", id="9")] == parse("data: x\n\n", parser=SseParser(last_event_id="9"))


@pytest.mark.parametrize(
    ("line", "expected"), [("retry: 3000", 3000), ("retry: 3s", None), ("retry: \uff13", None)]
)
def test_retry_takes_ascii_digits_only(line: str, expected: int | None) -> None:
    """retry: sets the reconnection time only when the value is ASCII digits."""
    parser = SseParser()
    parse(f"{line}\n\n", parser=parser)
    assert expected == parser.retry_ms


def test_oversized_event_data_is_refused() -> None:
    """Data past max_chars raises instead of growing without bound."""
    with pytest.raises(SseTooLarge, match="data passed 10 characters"):
        parse("data: 0123456789abc\n", parser=SseParser(max_chars=10))


def test_endless_line_is_refused() -> None:
    """A line that never ends cannot grow past max_chars."""
    with pytest.raises(SseTooLarge, match="line passed 10 characters"):
        parse("data: 01234", "56789", parser=SseParser(max_chars=10))
