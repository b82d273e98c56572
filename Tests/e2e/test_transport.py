"""End-to-end tests of courier's transport: framing, JSON-RPC 2.0 rules, limits.

Every case runs in both framings (the `framing` fixture), is followed by a
normal request that must still get its answer, and every message courier
writes is checked against protocol/openrpc.json.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import Session, checked_sessions
from courier_client import Courier, CourierExited
from schema import validate_message

REPO = Path(__file__).resolve().parents[2]
COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")
FRAMINGS = ("ndjson", "lsp")
DEFAULT_LIMIT = 16 * 1024 * 1024
SMALL_LIMIT = 64 * 1024


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch, tmp_path):
    """Every courier started here keeps its cache in the test's own directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


# ---------------------------------------------------------------- the client


class RawCourier(Session):
    """A Courier session that also keeps the exact bytes of every message body
    courier wrote, and wakes waiters when stderr grows."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._raw: collections.deque[bytes] = collections.deque()
        self._stderr_done = False
        super().__init__(*args, **kwargs)

    def _parse(self, data: bytes) -> None:
        try:
            json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            pass
        else:
            with self._cv:
                self._raw.append(data.rstrip(b"\r\n") if self.framing == "ndjson" else data)
        super()._parse(data)

    def next_raw(self, timeout: float = 10) -> tuple[bytes, Any]:
        """The next message, with the bytes of its body as courier wrote them."""
        message = self.next_message(timeout)
        with self._cv:
            return self._raw.popleft(), message

    def _drain_stderr(self) -> None:
        stream = self.proc.stderr
        try:
            while True:
                try:
                    data = stream.read1(65536)
                except (OSError, ValueError):
                    break
                if not data:
                    break
                with self._cv:
                    self._stderr_buf += data
                    self._cv.notify_all()
        finally:
            with self._cv:
                self._stderr_done = True
                self._cv.notify_all()

    def wait_stderr(self, predicate: Callable[[str], bool], timeout: float = 5) -> str:
        """Waits until `predicate(stderr so far)` holds; returns the text."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                text = self._stderr_buf.decode("utf-8", "replace")
                if predicate(text):
                    return text
                remaining = deadline - time.monotonic()
                if self._stderr_done or remaining <= 0:
                    raise AssertionError(f"stderr never matched; it holds:\n{text[-3000:]}")
                self._cv.wait(remaining)


@pytest.fixture(params=FRAMINGS)
def framing(request) -> str:
    return request.param


@pytest.fixture
def sessions():
    """Starts courier sessions; stops and checks them at teardown."""
    yield from checked_sessions(lambda *args, framing: RawCourier(COURIER, list(args), framing=framing))


@pytest.fixture
def spawn(sessions, framing):
    """Starts courier sessions in the test's framing."""
    return lambda *args: sessions(*args, framing=framing)


@pytest.fixture
def c(spawn) -> RawCourier:
    return spawn()


# ---------------------------------------------------------------- helpers


def framed(body: bytes | str, framing: str) -> bytes:
    """Frames raw body bytes (which need not be valid JSON)."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    if framing == "ndjson":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def send_body(c: Courier, body: bytes | str) -> None:
    c.send_raw(framed(body, c.framing))


def same(a: Any, b: Any) -> bool:
    """JSON equality that tells integers, reals and booleans apart."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def expect_error(c: Courier, code: int, id: Any = None, timeout: float = 10) -> dict:
    """The next message must be one error response with this code and id."""
    message = c.next_message(timeout)
    assert validate_message(message) == "error", message
    assert message["error"]["code"] == code, message
    assert same(message["id"], id), f"id {message['id']!r} != {id!r}"
    return message


_follow_ups = iter(range(1, 1 << 30))


def follow_up(c: Courier, timeout: float = 10) -> dict:
    """A normal request whose answer must be the very next message."""
    id = f"follow-up-{next(_follow_ups)}"
    c.send_message({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {}})
    message = c.next_message(timeout)
    assert isinstance(message, dict) and message.get("id") == id, \
        f"expected the answer to {id!r} next, got {message!r}"
    assert validate_message(message, request_method="initialize") == "result", message
    assert message["result"]["serverInfo"]["name"] == "courier"
    return message["result"]


def split_frames(data: bytes, framing: str) -> list[Any]:
    """Strictly splits courier's whole stdout into parsed messages."""
    bodies: list[bytes] = []
    if framing == "ndjson":
        assert data == b"" or data.endswith(b"\n"), f"stdout ends mid-line: {data[-80:]!r}"
        for line in data.split(b"\n")[:-1]:
            assert line.strip(), "an empty line on stdout"
            bodies.append(line)
    else:
        header = re.compile(rb"Content-Length: (\d+)\r\n\r\n")
        pos = 0
        while pos < len(data):
            m = header.match(data, pos)
            assert m, f"not a frame header at byte {pos}: {data[pos:pos + 80]!r}"
            length = int(m.group(1))
            body = data[m.end():m.end() + length]
            assert len(body) == length, f"frame at byte {pos} is cut short"
            bodies.append(body)
            pos = m.end() + length
    messages = []
    for body in bodies:
        try:
            messages.append(json.loads(body.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as e:
            raise AssertionError(f"not a JSON message on stdout: {body[:200]!r}") from e
    return messages


def run_once(input: bytes, *args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    """Runs courier on a whole input (end of input closes the session)."""
    return subprocess.run([COURIER, *args], input=input, capture_output=True, timeout=timeout)


def request_body(id_text: str, method: str = "no/such/method") -> bytes:
    return b'{"jsonrpc":"2.0","id":%s,"method":"%s"}' % (id_text.encode(), method.encode())


# ---------------------------------------------------------------- batches


def test_empty_batch_is_one_invalid_request(c):
    send_body(c, "[]")
    message = expect_error(c, -32600, None)
    assert isinstance(message, dict)
    follow_up(c)


def test_batch_of_non_objects_answers_each_entry(c):
    send_body(c, "[1,2,3]")
    answer = c.next_message()
    assert validate_message(answer) == "batch"
    assert isinstance(answer, list) and len(answer) == 3, answer
    for entry in answer:
        assert entry["error"]["code"] == -32600 and entry["id"] is None, entry
    follow_up(c)


def test_batch_of_notifications_only_is_not_answered(c):
    c.send_message([
        {"jsonrpc": "2.0", "method": "no/such/method"},
        {"jsonrpc": "2.0", "method": "initialize", "params": [1]},
        {"jsonrpc": "2.0", "method": "rpc.discover", "params": None},
    ])
    follow_up(c)


def test_mixed_batch_answers_every_request_and_no_notification(c):
    c.send_message([
        {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "method": "no/such/notification"},
        {"jsonrpc": "2.0", "id": 7, "method": "no/such/method"},
        {"jsonrpc": "2.0", "method": "initialize", "params": {"options": {"maxActive": "x"}}},
        {"jsonrpc": "2.0", "id": 8.5, "method": "initialize", "params": [1]},
        {"jsonrpc": "2.0", "id": None, "method": "rpc.discover"},
        5,
    ])
    answer = c.next_message()
    assert validate_message(answer, request_method={"init": "initialize", None: "rpc.discover"}) == "batch"
    assert isinstance(answer, list) and len(answer) == 5, answer
    by_id = collections.defaultdict(list)
    for entry in answer:
        by_id[json.dumps(entry["id"])].append(entry)
    assert sorted(by_id) == sorted(['"init"', "7", "8.5", "null"]), answer
    assert by_id['"init"'][0]["result"]["serverInfo"]["name"] == "courier"
    assert by_id["7"][0]["error"]["code"] == -32601
    assert by_id["8.5"][0]["error"]["code"] == -32602
    nulls = sorted(by_id["null"], key=lambda e: "error" in e)
    assert len(nulls) == 2
    assert nulls[0]["result"] == json.loads((REPO / "protocol" / "openrpc.json").read_text())
    assert nulls[1]["error"]["code"] == -32600
    follow_up(c)


# ---------------------------------------------------------------- ids


ECHOED_IDS = [
    '"abc"', '""', '"with space and \\u00e9"', "1", "0", "-7", "0.5", "0.1", "-2.5", "1.5",
    "null", "9007199254740993", "-9223372036854775808", "9223372036854775807",
    "0.30000000000000004",
]


def _raw_numbers(text: bytes) -> Any:
    """Parses JSON keeping every number as its exact text."""
    return json.loads(text, parse_int=lambda s: ("number", s), parse_float=lambda s: ("number", s),
                      object_pairs_hook=dict)


@pytest.mark.parametrize("id_text", ECHOED_IDS)
def test_id_is_echoed_unchanged(c, id_text):
    send_body(c, request_body(id_text))
    raw, message = c.next_raw()
    assert validate_message(message) == "error" and message["error"]["code"] == -32601, message
    sent = _raw_numbers(id_text.encode())
    assert _raw_numbers(raw)["id"] == sent, f"sent id {id_text}, got {raw!r}"
    if not id_text.startswith('"') or "\\" not in id_text:
        assert b'"id":' + id_text.encode() in raw, raw
    follow_up(c)


@pytest.mark.parametrize("id_text", ["true", "false", "{}", "[]", '{"a":1}', "[1]"])
def test_id_of_another_type_is_an_invalid_request(c, id_text):
    send_body(c, request_body(id_text))
    raw, message = c.next_raw()
    assert validate_message(message) == "error"
    assert message["error"]["code"] == -32600 and message["id"] is None, message
    assert b'"id":null' in raw
    follow_up(c)


# ---------------------------------------------------------------- parse errors


PARSE_ERRORS = {
    "unterminated object": b'{"jsonrpc":"2.0","id":1,"method":"x"',
    "bare words": b"{foo}",
    "truncated literal": b"nul",
    "unterminated batch": b'[{"jsonrpc":"2.0","id":1,"method":"x"},',
    "trailing bytes": b'{"jsonrpc":"2.0","id":1,"method":"x"} x',
    "invalid UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
    "overlong UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}',
    "UTF-8 surrogate": b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',
    "cut UTF-8 sequence": b'{"jsonrpc":"2.0","id":1,"method":"\xe2\x82"}',
    "integer beyond 64 bits": b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"x"}',
}


@pytest.mark.parametrize("body", PARSE_ERRORS.values(), ids=PARSE_ERRORS.keys())
def test_parse_error(c, body):
    send_body(c, body)
    expect_error(c, -32700, None)
    follow_up(c)


def test_string_with_nul_is_accepted(c):
    send_body(c, b'{"jsonrpc":"2.0","id":"nul","method":"x\\u0000y"}')
    expect_error(c, -32601, "nul")
    follow_up(c)


# ---------------------------------------------------------------- invalid requests


INVALID_REQUESTS = {
    "jsonrpc missing": (b'{"id":1,"method":"x"}', 1),
    "jsonrpc 1.0": (b'{"jsonrpc":"1.0","id":1,"method":"x"}', 1),
    "jsonrpc a number": (b'{"jsonrpc":2.0,"id":1,"method":"x"}', 1),
    "method missing": (b'{"jsonrpc":"2.0","id":1}', 1),
    "method a number": (b'{"jsonrpc":"2.0","id":"m","method":1}', "m"),
    "method null": (b'{"jsonrpc":"2.0","id":2,"method":null}', 2),
    "method an array": (b'{"jsonrpc":"2.0","id":3,"method":["x"]}', 3),
    "params a number": (b'{"jsonrpc":"2.0","id":4,"method":"initialize","params":5}', 4),
    "params a string": (b'{"jsonrpc":"2.0","id":5,"method":"initialize","params":"x"}', 5),
    "params true": (b'{"jsonrpc":"2.0","id":6,"method":"initialize","params":true}', 6),
    "a number": (b"42", None),
    "a string": (b'"initialize"', None),
    "null": (b"null", None),
    "spec example without id": (b'{"jsonrpc":"2.0","method":1,"params":"bar"}', None),
}


@pytest.mark.parametrize("body,id", INVALID_REQUESTS.values(), ids=INVALID_REQUESTS.keys())
def test_invalid_request(c, body, id):
    send_body(c, body)
    expect_error(c, -32600, id)
    follow_up(c)


# ---------------------------------------------------------------- methods and params


@pytest.mark.parametrize("method", ["no/such/method", "rpc.nope", "", "Initialize", "initialize ", "download/"])
def test_unknown_method(c, method):
    c.send_message({"jsonrpc": "2.0", "id": 11, "method": method})
    expect_error(c, -32601, 11)
    follow_up(c)


def test_unknown_method_error_names_the_method(c):
    c.send_message({"jsonrpc": "2.0", "id": 1, "method": "cache/purge"})
    message = expect_error(c, -32601, 1)
    assert message["error"].get("data") == {"method": "cache/purge"}, message


INVALID_PARAMS = {
    "positional": ("initialize", [1]),
    "empty positional": ("initialize", []),
    "ill-typed option": ("initialize", {"options": {"maxActive": "x"}}),
    "option out of range": ("initialize", {"options": {"maxActive": 0}}),
    "options not an object": ("initialize", {"options": "x"}),
    "unknown option": ("initialize", {"options": {"noSuchOption": 1}}),
    "unknown param": ("rpc.discover", {"a": 1}),
    "positional shutdown": ("shutdown", [1]),
}


@pytest.mark.parametrize("method,params", INVALID_PARAMS.values(), ids=INVALID_PARAMS.keys())
def test_invalid_params(c, method, params):
    c.send_message({"jsonrpc": "2.0", "id": "p", "method": method, "params": params})
    expect_error(c, -32602, "p")
    follow_up(c)


def test_invalid_option_names_the_dotted_param(c):
    c.send_message({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"options": {"maxActive": "x"}}})
    message = expect_error(c, -32602, 1)
    assert message["error"].get("data") == {"param": "options.maxActive"}, message


def test_notifications_are_never_answered(c):
    for notification in (
        {"jsonrpc": "2.0", "method": "no/such/method"},
        {"jsonrpc": "2.0", "method": "no/such/method", "params": [1, 2]},
        {"jsonrpc": "2.0", "method": "initialize", "params": [1]},
        {"jsonrpc": "2.0", "method": "initialize", "params": {"options": {"maxActive": "x"}}},
        {"jsonrpc": "2.0", "method": "initialize", "params": {"options": {"noSuchOption": 1}}},
        {"jsonrpc": "2.0", "method": "rpc.discover", "params": {"a": 1}},
        {"jsonrpc": "2.0", "method": "", "params": None},
    ):
        c.send_message(notification)
    follow_up(c)


# ---------------------------------------------------------------- size limit


def _request_of_size(size: int, id: int = 1) -> bytes:
    head = b'{"jsonrpc":"2.0","id":%d,"method":"no/such/method","params":{"pad":"' % id
    tail = b'"}}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


def _oversized(kind: str, size: int, framing: str) -> bytes:
    if kind == "request":
        return _request_of_size(size)
    if kind == "junk":
        return b"x" * size
    inner = framed(request_body("1"), framing).replace(b"\n", b" " if framing == "ndjson" else b"\n")
    return (inner * (size // len(inner) + 1))[:size]


@pytest.mark.parametrize("kind", ["request", "junk", "framed requests"])
def test_message_over_the_limit_is_refused_and_reading_goes_on(spawn, kind):
    c = spawn("--max-message-bytes", "64KiB")
    send_body(c, _oversized(kind, SMALL_LIMIT + 1, c.framing))
    message = expect_error(c, -32600, None)
    assert message["error"]["data"]["limit"] == SMALL_LIMIT, message
    follow_up(c)
    send_body(c, _request_of_size(SMALL_LIMIT + 4096, id=2))
    expect_error(c, -32600, None)
    follow_up(c)


def test_message_at_the_limit_is_accepted(spawn):
    c = spawn("--max-message-bytes", "64KiB")
    body = _request_of_size(SMALL_LIMIT, id=3)
    assert len(body) == SMALL_LIMIT
    send_body(c, body)
    expect_error(c, -32601, 3)
    follow_up(c)


def test_default_limit_refuses_17_MiB(c):
    body = _request_of_size(17 * 1024 * 1024, id=4)
    send_body(c, body)
    message = expect_error(c, -32600, None, timeout=30)
    assert message["error"]["data"]["limit"] == DEFAULT_LIMIT, message
    result = follow_up(c)
    assert result["capabilities"]["maxMessageBytes"] == DEFAULT_LIMIT


# ---------------------------------------------------------------- broken framing


BROKEN_HEADERS = {
    "non-numeric": b"Content-Length: abc\r\n\r\n",
    "negative": b"Content-Length: -1\r\n\r\n",
    "exponent": b"Content-Length: 1e3\r\n\r\n",
    "missing": b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
    "conflicting": b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
}


@pytest.mark.parametrize("block", BROKEN_HEADERS.values(), ids=BROKEN_HEADERS.keys())
def test_broken_content_length_is_skipped(c, block):
    follow_up(c)
    mark = len(c.stderr_text)
    c.send_raw(block)
    if c.framing == "ndjson":
        for _ in [line for line in block.split(b"\n") if line.strip()]:
            expect_error(c, -32700, None)
        follow_up(c)
    else:
        follow_up(c)
        c.wait_stderr(lambda text: "content-length" in text[mark:].lower())


def test_broken_header_block_as_first_bytes_selects_lsp(sessions):
    c = sessions(framing="lsp")
    c.send_raw(b"Content-Length: twelve\r\n\r\n")
    result = follow_up(c)
    assert result["capabilities"]["framing"] == "lsp"
    c.wait_stderr(lambda text: "content-length" in text.lower())


def test_truncated_message_at_end_of_input(c):
    c.send_message({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"})
    if c.framing == "lsp":
        c.send_raw(b'Content-Length: 100\r\n\r\n{"jsonrpc":"2.0","id":2,')
    else:
        c.send_raw(b'{"jsonrpc":"2.0","id":2,')
    expect_error(c, -32601, 1)
    mark = len(c.stderr_text)
    c.close_stdin()
    assert c.wait_exit(5) == 0
    if c.framing == "lsp":
        c.wait_stderr(lambda text: re.search(r"ended|truncat|incomplete", text[mark:], re.I) is not None)
    else:
        expect_error(c, -32700, None)
    with pytest.raises(CourierExited):
        c.next_message(timeout=5)


def test_truncated_header_at_end_of_input(c):
    c.send_message({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"})
    c.send_raw(b"Content-Length: 10\r\n")
    expect_error(c, -32601, 1)
    mark = len(c.stderr_text)
    c.close_stdin()
    assert c.wait_exit(5) == 0
    if c.framing == "lsp":
        c.wait_stderr(lambda text: "header" in text[mark:].lower())
    else:
        expect_error(c, -32700, None)


# ---------------------------------------------------------------- framing


def _detection_inputs() -> dict[str, tuple[str, bytes]]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize"}).encode()
    then = {framing: framed(request_body("2"), framing) for framing in FRAMINGS}
    return {
        "ndjson": ("ndjson", body + b"\n" + then["ndjson"]),
        "ndjson after blank lines": ("ndjson", b"\n\r\n \n" + body + b"\r\n" + then["ndjson"]),
        "ndjson without final newline": ("ndjson", body + b"\n" + request_body("2")),
        "lsp": ("lsp", framed(body, "lsp") + then["lsp"]),
        "lsp with Content-Type": ("lsp", b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; "
                                         b"charset=utf-8\r\n\r\n" % len(body) + body + then["lsp"]),
        "lsp with Content-Type first": ("lsp", b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                                               % len(body) + body + then["lsp"]),
    }


@pytest.mark.parametrize("framing,data", _detection_inputs().values(), ids=_detection_inputs().keys())
def test_framing_is_detected_from_the_first_bytes(framing, data):
    done = run_once(data)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.startswith(b"Content-Length: " if framing == "lsp" else b"{"), done.stdout[:80]
    messages = split_frames(done.stdout, framing)
    assert len(messages) == 2, messages
    validate_message(messages[0], request_method="initialize")
    assert messages[0]["result"]["capabilities"]["framing"] == framing
    validate_message(messages[1])
    assert messages[1]["id"] == 2 and messages[1]["error"]["code"] == -32601


def test_forced_framing_takes_the_other_framing_as_junk(spawn, framing):
    """--framing forces one framing: in ndjson a header line is a parse error;
    in LSP an ndjson line is no message (only the framed request is answered)."""
    c = spawn("--framing", framing)
    if framing == "ndjson":
        c.send_raw(b"Content-Length: 5\r\n\r\n")
        expect_error(c, -32700, None)
    else:
        c.send_raw(request_body('"nd"') + b"\n")
    assert follow_up(c)["capabilities"]["framing"] == framing


def test_forced_lsp_reports_an_ndjson_line_on_stderr(sessions):
    c = sessions("--framing", "lsp", framing="lsp")
    follow_up(c)
    mark = len(c.stderr_text)
    c.send_raw(request_body('"nd"') + b"\n")
    follow_up(c)
    c.close_stdin()
    assert c.wait_exit(5) == 0
    c.wait_stderr(lambda text: text[mark:].strip() != "")


# ---------------------------------------------------------------- stdout


def test_stdout_carries_protocol_only(framing):
    bodies = [
        b"[]", b"[1,2,3]", b'[{"jsonrpc":"2.0","method":"x"}]', request_body('"s"'), request_body("0.1"),
        request_body("true"), *PARSE_ERRORS.values(), *(b for b, _ in INVALID_REQUESTS.values()),
        b'{"jsonrpc":"2.0","method":"x"}', b'{"jsonrpc":"2.0","id":9,"method":"initialize","params":[1]}',
        b'{"jsonrpc":"2.0","id":10,"method":"rpc.discover"}',
        b'{"jsonrpc":"2.0","id":11,"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":12,"method":"shutdown"}', b'{"jsonrpc":"2.0","id":13,"method":"x"}',
    ]
    data = b"".join(framed(b, framing) for b in bodies)
    if framing == "lsp":
        data += b"Content-Length: abc\r\n\r\n" + framed(request_body("14"), "lsp")
    done = run_once(data, "--log-level", "trace")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    messages = split_frames(done.stdout, framing)
    expected = len(bodies) - 2 + (1 if framing == "lsp" else 0)
    assert len(messages) == expected, [json.dumps(m)[:100] for m in messages]
    for message in messages:
        validate_message(message)
    assert done.stderr.strip(), "with --log-level trace the logs go to stderr"


# ---------------------------------------------------------------- slow reader


def _count_responses(stream, framing: str, count: int, timeout: float) -> list[Any]:
    ids: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(ids) < count:
        assert time.monotonic() < deadline, f"only {len(ids)} of {count} responses in {timeout} s"
        if framing == "ndjson":
            line = stream.readline()
            assert line, f"stdout ended after {len(ids)} responses"
            message = json.loads(line)
        else:
            header = stream.readline()
            assert header.startswith(b"Content-Length: "), header
            assert stream.readline() == b"\r\n"
            length = int(header.split(b":")[1])
            body = stream.read(length)
            assert len(body) == length, f"stdout ended after {len(ids)} responses"
            message = json.loads(body)
        assert validate_message(message) == "error" and message["error"]["code"] == -32601, message
        ids.append(message["id"])
    return ids


def test_slow_reader_loses_nothing(framing):
    count = 20_000
    data = b"".join(framed(request_body(str(i)), framing) for i in range(1, count + 1))
    proc = subprocess.Popen([COURIER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except BaseException as e:  # noqa: BLE001
            failure.append(e)

    writer = threading.Thread(target=write, daemon=True)
    try:
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive(), "courier stopped reading while its stdout was not read"
        assert not failure, failure
        ids = _count_responses(proc.stdout, framing, count, timeout=30)
        assert ids == list(range(1, count + 1))
        proc.stdin.close()
        assert proc.stdout.read() == b""
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        if not proc.stdin.closed:
            try:
                proc.stdin.close()
            except OSError:
                pass


def test_end_of_input_keeps_output_for_a_slow_reader():
    count = 20_000
    data = b"".join(framed(request_body(str(i)), "ndjson") for i in range(1, count + 1))
    proc = subprocess.Popen([COURIER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)

    def write() -> None:
        try:
            proc.stdin.write(data)
            proc.stdin.close()
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    try:
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive()
        try:
            proc.wait(timeout=6)
        except subprocess.TimeoutExpired:
            pass
        ids = _count_responses(proc.stdout, "ndjson", count, timeout=30)
        assert ids == list(range(1, count + 1))
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
