"""End-to-end tests of courier's memory bounds, read as the peak resident set
(VmHWM in /proc/<pid>/status): a batch's answers, a body held as `text` or
`base64`, and a message of very many values stay within their limits, whether
the client reads its answers or not.

Every wait polls the peak, so a courier that passes the bound fails the test
(and is killed) as soon as it does, not after it has taken the machine's
memory."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Callable

import pytest

from test_backpressure import SlowClient, peak_rss_kib, unread_bytes

RSS_LIMIT_KIB = 100 * 1024
BATCH_LENGTH_LIMIT = 10_000
BATCH_ANSWER_LIMIT = 8 << 20
MESSAGE_VALUE_LIMIT = 100_000
MEMORY_BODY_LIMIT = 64 << 20
BATCH_TOO_LARGE = -32002
INVALID_REQUEST = -32600


def check_peak(pid: int, what: str, kill: Callable[[], None]) -> int:
    """The peak RSS so far; past the bound, kills courier and fails."""
    peak = peak_rss_kib(pid)
    if peak > RSS_LIMIT_KIB:
        kill()
        raise AssertionError(f"courier's peak RSS reached {peak / 1024:.1f} MiB "
                             f"(bound {RSS_LIMIT_KIB >> 10} MiB) while {what}")
    return peak


def discover_batch(count: int) -> bytes:
    return json.dumps([{"jsonrpc": "2.0", "id": n, "method": "rpc.discover"} for n in range(count)],
                      separators=(",", ":")).encode() + b"\n"


class Lines:
    """Lines courier writes, collected by `SlowClient.read` once reading starts."""

    def __init__(self, client: SlowClient):
        self.client = client
        self.items: list[bytes] = []

    def start(self) -> None:
        def on_line(line: bytes) -> None:
            self.items.append(line)
            self.client.notify_waiters()

        self.client.read(on_line)

    def wait(self, count: int, what: str, timeout: float = 60) -> list:
        """The first ``count`` messages, polling the peak RSS meanwhile."""
        self.wait_until(lambda lines: len(lines) >= count, what, timeout)
        return [json.loads(line) for line in self.items[:count]]

    def wait_until(self, condition: Callable[[list[bytes]], bool], what: str, timeout: float = 60) -> None:
        """Waits until ``condition`` holds for the lines so far, polling the
        peak RSS meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            check_peak(self.client.proc.pid, what, self.client.kill)
            try:
                self.client.wait_for(lambda: condition(self.items), timeout=0.05, what=what)
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise


def wait_until_answered_unread(client: SlowClient, what: str, timeout: float = 60) -> int:
    """Waits, reading nothing, until courier has written what it could and sits
    idle with answers in its stdout pipe; returns the peak RSS by then."""
    deadline = time.monotonic() + timeout
    window = (time.monotonic(), client.cpu_seconds())
    while time.monotonic() < deadline:
        peak = check_peak(client.proc.pid, what, client.kill)
        client.wrote_all.wait(0.05)
        now, cpu = time.monotonic(), client.cpu_seconds()
        if cpu - window[1] > 0.05:
            window = (now, cpu)
        elif now - window[0] >= 1.0 and client.wrote_all.is_set() and unread_bytes(client.proc.stdout.fileno()) > 0:
            return peak
    raise TimeoutError(f"courier did not settle within {timeout} s while {what}")


@pytest.fixture
def pipes(cache_dir, tmp_path):
    started: list[SlowClient] = []

    def start(*args: str) -> SlowClient:
        client = SlowClient(cache_dir, tmp_path / f"stderr-{len(started)}.log", *args)
        started.append(client)
        return client

    yield start
    for client in started:
        client.kill()


def check_still_serving(client: SlowClient, lines: Lines, seen: int) -> None:
    client.wrote_all.clear()
    client.write_in_background(b'{"jsonrpc":"2.0","id":"after","method":"indicator/state"}\n')
    after = lines.wait(seen + 1, "answering the request after the batch")[seen]
    assert after["id"] == "after" and "result" in after, after


# -- batches ----------------------------------------------------------------------


@pytest.mark.parametrize("reads", [True, False], ids=["read", "unread"])
def test_a_batch_of_twenty_thousand_discover_requests_is_refused_whole(pipes, reads, capsys):
    client = pipes()
    lines = Lines(client)
    # Given a client that reads its answers as they come, or not at all
    if reads:
        lines.start()

    # When it sends 20,000 rpc.discover in one batch (each answer is the whole
    # OpenRPC document: some 1.6 GB in all)
    client.write_in_background(discover_batch(20_000))
    if not reads:
        unread_peak = wait_until_answered_unread(client, "holding the answer to 20,000 rpc.discover")
        lines.start()

    # Then the batch is refused with one error object, before anything in it runs
    [answer] = lines.wait(1, "answering a batch of 20,000 rpc.discover")
    assert isinstance(answer, dict), str(answer)[:200]
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST, answer
    assert answer["error"]["data"] == {"limit": BATCH_LENGTH_LIMIT, "size": 20_000}
    check_still_serving(client, lines, 1)
    peak = check_peak(client.proc.pid, "serving after the batch", client.kill)
    with capsys.disabled():
        print(f"\npeak RSS of courier over a batch of 20,000 rpc.discover, "
              f"{'read' if reads else 'unread'}: {peak / 1024:.1f} MiB"
              + ("" if reads else f" ({unread_peak / 1024:.1f} MiB before reading)"))


@pytest.mark.parametrize("reads", [True, False], ids=["read", "unread"])
def test_a_batch_at_the_length_limit_keeps_its_answers_within_the_batch_limit(pipes, reads, capsys):
    count = BATCH_LENGTH_LIMIT
    client = pipes()
    lines = Lines(client)
    if reads:
        lines.start()

    # When a client sends as many rpc.discover as a batch may hold (some 800 MB
    # of answers)
    client.write_in_background(discover_batch(count))
    if not reads:
        unread_peak = wait_until_answered_unread(client, f"holding the answers to {count:,} rpc.discover")
        lines.start()

    # Then the answers that fit in 8 MiB come as results; the first that did
    # not is replaced by -32002, and every later request gets -32002 without
    # being run: one entry per request, in order
    [answer] = lines.wait(1, f"answering a batch of {count:,} rpc.discover")
    assert isinstance(answer, list), str(answer)[:200]
    assert [entry["id"] for entry in answer] == list(range(count))
    results = [entry for entry in answer if "result" in entry]
    refused = [entry for entry in answer if "error" in entry]
    assert results and answer[:len(results)] == results
    assert all(entry["result"]["openrpc"] for entry in results)
    assert len(json.dumps(results, separators=(",", ":"))) <= BATCH_ANSWER_LIMIT
    assert refused and all(entry["error"]["code"] == BATCH_TOO_LARGE for entry in refused)
    assert refused[0]["error"]["data"] == {"limit": BATCH_ANSWER_LIMIT, "ran": True}
    assert all(entry["error"]["data"]["ran"] is False for entry in refused[1:])
    check_still_serving(client, lines, 1)
    peak = check_peak(client.proc.pid, "serving after the batch", client.kill)
    with capsys.disabled():
        print(f"\npeak RSS of courier over a batch of {count:,} rpc.discover, "
              f"{'read' if reads else 'unread'}: {peak / 1024:.1f} MiB, {len(results)} answered"
              + ("" if reads else f" ({unread_peak / 1024:.1f} MiB before reading)"))


def test_a_batch_of_a_million_invalid_entries_is_refused_whole(pipes, capsys):
    # Given a 2 MB batch of a million entries that are not requests (each
    # would get a -32600 of some 100 bytes)
    client = pipes()
    lines = Lines(client)
    lines.start()
    client.write_in_background(b"[" + b",".join([b"1"] * 1_000_000) + b"]\n")

    # Then it is refused with one error object
    [answer] = lines.wait(1, "answering a batch of a million entries")
    assert isinstance(answer, dict), str(answer)[:200]
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST, answer
    assert answer["error"]["data"]["limit"] == MESSAGE_VALUE_LIMIT
    check_still_serving(client, lines, 1)
    peak = check_peak(client.proc.pid, "serving after the batch", client.kill)
    with capsys.disabled():
        print(f"\npeak RSS of courier over a batch of a million entries: {peak / 1024:.1f} MiB")


def test_a_message_of_half_a_million_headers_is_refused_before_it_is_parsed(pipes, capsys):
    # Given one download whose headers object holds half a million members
    # (8 MB, within the message size limit)
    client = pipes()
    lines = Lines(client)
    lines.start()
    headers = {f"x-h{n}": "v" for n in range(500_000)}
    message = {"jsonrpc": "2.0", "id": "many", "method": "download",
               "params": {"url": "http://127.0.0.1:9/", "headers": headers}}
    client.write_in_background(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    # Then it gets -32600 (its id unread) with the limit
    [answer] = lines.wait(1, "answering a message of half a million headers")
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST, answer
    assert answer["error"]["data"] == {"limit": MESSAGE_VALUE_LIMIT}
    check_still_serving(client, lines, 1)
    peak = check_peak(client.proc.pid, "serving after the message", client.kill)
    with capsys.disabled():
        print(f"\npeak RSS of courier over a message of half a million headers: {peak / 1024:.1f} MiB")


# -- bodies held in memory ------------------------------------------------------------


def wait_outcomes(session, receipts: list[str], what: str, timeout: float = 60) -> dict[str, dict]:
    """Each receipt's outcome, polling the peak RSS meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        check_peak(session.pid, what, session.kill)
        try:
            return session.wait_all(receipts, timeout=0.05)
        except TimeoutError:
            if time.monotonic() > deadline:
                raise


def test_a_text_body_that_escapes_past_the_memory_limit_is_too_large(courier, origin, capsys):
    # Given a 58 KB gzip that decodes to 60 MB of 0x01: within --max-memory-body
    # as bytes, 360 MB as JSON text (each byte is written \u0001)
    url = origin.url("/gzip-fill?size=60000000&byte=1")
    c = courier()

    # When one receipt asks for it as text
    receipt = c.download(url, body="text")["receipt"]

    # Then it fails too_large, naming the limit, and courier never held it
    outcome = wait_outcomes(c, [receipt], "delivering 60 MB of 0x01 as text")[receipt]
    assert outcome["ok"] is False and outcome["error"]["code"] == "too_large", outcome
    assert "maxMemoryBody" in outcome["error"]["message"] and "JSON" in outcome["error"]["message"]
    assert "text" not in outcome
    peak = check_peak(c.pid, "after the outcome", c.kill)
    with capsys.disabled():
        print(f"\npeak RSS of courier over 60 MB of 0x01 as text, one receipt: {peak / 1024:.1f} MiB")


def test_eight_coalesced_text_receipts_of_a_body_that_escapes_past_the_limit(courier, origin, capsys):
    url = origin.url("/gzip-fill?size=60000000&byte=1")
    c = courier()

    # When eight receipts (eight slots) ask for the same body as text at once
    results = c.batch([("download", {"url": url, "body": "text", "slot": f"s{n}"}) for n in range(8)])
    assert len({r["result"]["task"] for r in results}) == 1, results
    receipts = [r["result"]["receipt"] for r in results]

    # Then the origin is asked once, each fails too_large, and courier's memory
    # stayed bounded
    outcomes = wait_outcomes(c, receipts, "delivering 60 MB of 0x01 as text to eight receipts")
    assert all(o["error"]["code"] == "too_large" for o in outcomes.values()), outcomes
    assert origin.hits("/gzip-fill") == 1
    peak = check_peak(c.pid, "after the outcomes", c.kill)
    with capsys.disabled():
        print(f"\npeak RSS of courier over 60 MB of 0x01 as text, eight coalesced receipts: "
              f"{peak / 1024:.1f} MiB")


def test_the_memory_limit_counts_text_as_escaped_json(courier, origin):
    # Given a limit of 1 MiB: 150,000 bytes of 0x01 are 900,000 bytes of JSON,
    # 200,000 are 1,200,000
    c = courier("--max-memory-body", "1MiB")

    fits = c.fetch(origin.url("/gzip-fill?size=150000&byte=1"), body="text")
    passes = c.fetch(origin.url("/gzip-fill?size=200000&byte=1"), body="text")
    quotes = c.fetch(origin.url("/gzip-fill?size=600000&byte=34"), body="text")

    assert fits["ok"] and fits["text"] == "\x01" * 150_000, {k: v for k, v in fits.items() if k != "text"}
    assert passes["error"]["code"] == "too_large", passes
    assert quotes["error"]["code"] == "too_large", {k: v for k, v in quotes.items() if k != "text"}


def test_the_memory_limit_counts_base64_as_four_bytes_for_three(courier, origin):
    # Given a limit of 1 MiB: 780,000 bytes are 1,040,000 in base64, 790,000
    # are 1,053,336
    c = courier("--max-memory-body", "1MiB")

    fits = c.fetch(origin.url("/bytes/780000?seed=b64"), body="base64")
    passes = c.fetch(origin.url("/bytes/790000?seed=b64"), body="base64")
    chunked = c.fetch(origin.url("/bytes/790000?seed=b64&chunked=1"), body="base64")

    assert fits["ok"] and len(base64.b64decode(fits["base64"])) == 780_000
    assert passes["error"]["code"] == "too_large" and "base64" in passes["error"]["message"], passes
    assert chunked["error"]["code"] == "too_large", {k: v for k, v in chunked.items() if k != "base64"}


def test_text_outcomes_wait_for_a_client_that_does_not_read(pipes, origin, capsys):
    # Given a client that reads nothing, and asks for eighty 2 MB bodies as
    # text (each within --max-memory-body: 160 MB in all)
    count, size = 80, 2_000_000
    client = pipes("--memory-capacity", "0")
    client.write_in_background(b"".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "download",
                    "params": {"url": origin.url(f"/gzip-fill?size={size}&byte=97&n={n}"), "body": "text"}}).encode()
        + b"\n" for n in range(count)))

    # Then courier makes no more text than the output backlog holds
    unread_peak = wait_until_answered_unread(client, f"holding {count} text outcomes for a client that does not read")

    # And when the client reads, every outcome comes whole
    lines = Lines(client)
    lines.start()
    lines.wait_until(lambda items: sum(b'"download/finished"' in line for line in items) >= count,
                     "reading the outcomes")
    outcomes = [m["params"]["outcome"] for m in map(json.loads, lines.items) if m.get("method") == "download/finished"]
    assert all(o["ok"] and o["text"] == "a" * size for o in outcomes)
    with capsys.disabled():
        print(f"\npeak RSS of courier holding {count} text outcomes of {size:,} bytes for a client "
              f"that does not read: {unread_peak / 1024:.1f} MiB")
