"""How the synchronous client turns courier's output into messages, fed
from a stream whose reads return chosen pieces."""

from __future__ import annotations

import json
import sys
from typing import Any, List

import pytest

from courier_client import Courier


class Pieces:
    """A stream whose successive reads return the given pieces, then EOF."""

    def __init__(self, pieces: List[bytes]):
        self.pieces = list(pieces)
        self.sizes: List[int] = []

    def read1(self, size: int) -> bytes:
        self.sizes.append(size)
        return self.pieces.pop(0) if self.pieces else b""


@pytest.fixture
def client():
    """A client whose process has ended, so only the test feeds its reader."""
    c = Courier(sys.executable, ["-c", "pass"], stderr=None, record=True)
    c._reader.join(timeout=30)
    assert not c._reader.is_alive()
    assert c.messages == []
    yield c
    c.close(wait_timeout=5)


def note(method: str, **params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode()


def answer(id_: int, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}).encode()


def test_lines_split_across_reads_arrive_whole(client: Courier) -> None:
    # Given three messages cut at arbitrary bytes, the last without its newline
    text = note("a", x=1) + b"\n" + answer(1, 2) + b"\r\n" + note("b", y="é")
    pieces = [text[:10], text[10:11], text[11:40], text[40:-3], text[-3:]]

    # When the reader reads them
    client._read_ndjson(Pieces(pieces))

    # Then each message arrives once, whole and in order
    assert [m.message for m in client.messages] == [
        {"jsonrpc": "2.0", "method": "a", "params": {"x": 1}},
        {"jsonrpc": "2.0", "id": 1, "result": 2},
        {"jsonrpc": "2.0", "method": "b", "params": {"y": "é"}},
    ]
    assert [(n.method, n.params) for n in client.notifications()] == [("a", {"x": 1}), ("b", {"y": "é"})]
    assert client.response(1) == {"jsonrpc": "2.0", "id": 1, "result": 2}
    assert client.stdout_garbage == []


def test_a_message_longer_than_many_reads_arrives_whole(client: Courier) -> None:
    # Given a 3 MiB message delivered in 64 KiB reads
    big = note("big", data="x" * (3 << 20)) + b"\n"
    pieces = [big[i:i + 65536] for i in range(0, len(big), 65536)]

    # When the reader reads it
    client._read_ndjson(Pieces(pieces))

    # Then it is one message with every byte
    assert len(client.messages) == 1
    assert client.notifications()[0].params == {"data": "x" * (3 << 20)}


def test_a_line_that_is_not_json_is_kept_as_it_was_read(client: Courier) -> None:
    # Given a line of garbage and a blank line between two messages, in one read
    text = note("a") + b"\nnot json\n  \n" + answer(7, None) + b"\n"

    # When the reader reads it
    client._read_ndjson(Pieces([text]))

    # Then the garbage keeps its newline, blank lines are skipped, and the
    # messages around it arrive in order
    assert client.stdout_garbage == [b"not json\n"]
    assert [m.message.get("method", m.message.get("id")) for m in client.messages] == ["a", 7]


def test_a_callback_runs_before_later_messages_become_visible(client: Courier) -> None:
    # Given a callback that looks for the response sent after its notification
    seen: List[Any] = []
    client.on_notification(lambda method, params: seen.append((method, client.response(1), len(client.messages))))

    # When the notification and the response arrive in one read
    client._read_ndjson(Pieces([note("first") + b"\n" + answer(1, "r") + b"\n" + note("second") + b"\n"]))

    # Then each callback ran while only the messages up to its notification
    # were visible, as when messages arrive one read each
    assert seen == [("first", None, 1), ("second", {"jsonrpc": "2.0", "id": 1, "result": "r"}, 3)]


def test_reads_take_what_is_there_in_large_pieces(client: Courier) -> None:
    # Given a stream of many short messages
    stream = Pieces([b"".join(answer(i, i) + b"\n" for i in range(1000))])

    # When the reader reads it
    client._read_ndjson(stream)

    # Then it asked for large reads (one per burst, not one per line) and
    # every message arrived
    assert stream.sizes and min(stream.sizes) >= 65536
    assert len(client.messages) == 1000 and client.response(999)["result"] == 999
