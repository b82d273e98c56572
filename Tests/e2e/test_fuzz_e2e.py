"""Malformed messages through the real binary, in both framings.

10,000 messages per framing, mutated from the conformance cases with a
seeded mutator (Fuzz/seeds.py), interleaved with valid requests. courier
must stay alive, answer every valid request, write only well-formed
messages, and keep its memory flat between the first and the last thousand.
Mutants that would end the session or reach the network (exit, shutdown,
download, …) are left out: they would be obeyed, as they should.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "Fuzz"))

from seeds import Mutator, lsp, messages  # noqa: E402

COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")
MALFORMED = 10_000
VALID_EVERY = 10
RSS_GROWTH_LIMIT = 32 << 20
OBEYED = {"exit", "shutdown", "download", "initialize", "cache/clear", "cache/remove", "indicator/configure",
          "indicator/increment", "indicator/decrement", "bind", "cancel", "suspend", "resume"}


def _obeyed(body: bytes) -> bool:
    """Whether the message names a method that would change courier's state."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        # jansson reads no more than Python does; a text Python refuses is
        # no request. Still, a method name in it is kept out.
        return any(name.encode() in body for name in OBEYED)
    elements = value if isinstance(value, list) else [value]
    return any(isinstance(item, dict) and isinstance(item.get("method"), str) and item["method"] in OBEYED
               for item in elements)


def _mutants(count: int, seed: int) -> list[bytes]:
    mutator = Mutator(messages(), seed)
    result: list[bytes] = []
    while len(result) < count:
        body = mutator.mutate()
        if body and not _obeyed(body):
            result.append(body)
    return result


def _vm_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _problem(message: Any) -> str | None:
    """Why `message` is not a JSON-RPC 2.0 response or notification."""
    if isinstance(message, list):
        if not message:
            return "an empty batch response"
        return next((p for p in map(_problem, message) if p), None)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return "not a JSON-RPC 2.0 object"
    if "method" in message:
        return None if isinstance(message["method"], str) and "id" not in message else "a malformed notification"
    if "id" not in message or not isinstance(message["id"], (str, int, float, type(None))):
        return "a response without a valid id"
    if ("result" in message) == ("error" in message):
        return "a response needs exactly one of result and error"
    error = message.get("error")
    if error is not None and not (isinstance(error.get("code"), int) and isinstance(error.get("message"), str)):
        return "a malformed error"
    return None


class Reader(threading.Thread):
    def __init__(self, stream, framing: str):
        super().__init__(daemon=True)
        self.stream = stream
        self.framing = framing
        self.answered: set[str] = set()
        self.problems: list[str] = []
        self.count = 0
        self.cv = threading.Condition()

    def run(self) -> None:
        while True:
            body = self._next()
            if body is None:
                return
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            with self.cv:
                self.count += 1
                problem = _problem(message)
                if problem:
                    self.problems.append(f"{problem}: {body[:200]!r}")
                for item in message if isinstance(message, list) else [message]:
                    if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"].startswith("valid-"):
                        self.answered.add(item["id"])
                self.cv.notify_all()

    def _next(self) -> bytes | None:
        if self.framing == "ndjson":
            line = self.stream.readline()
            return line or None
        length = None
        while True:
            line = self.stream.readline()
            if not line:
                return None
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            self.problems.append("a header block without Content-Length")
            return None
        return self.stream.read(length)

    def wait_for(self, ids: set[str], timeout: float) -> set[str]:
        deadline = time.monotonic() + timeout
        with self.cv:
            while not ids <= self.answered and time.monotonic() < deadline:
                self.cv.wait(deadline - time.monotonic())
            return ids - self.answered


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
def test_malformed_messages_leave_courier_answering(framing, tmp_path):
    seed = 1 if framing == "ndjson" else 2
    mutants = _mutants(MALFORMED, seed)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.Popen([COURIER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env)
    reader = Reader(proc.stdout, framing)
    reader.start()

    def frame(body: bytes) -> bytes:
        return lsp(body) if framing == "lsp" else body + b"\n"

    def valid(name: str) -> bytes:
        return frame(json.dumps({"jsonrpc": "2.0", "id": name, "method": "indicator/state"}).encode())

    try:
        # The framing is chosen by the first message: a valid one.
        proc.stdin.write(valid("valid-start"))
        proc.stdin.flush()
        assert not reader.wait_for({"valid-start"}, 10), "courier did not answer its first request"

        expected = {"valid-start"}
        rss: list[int] = []
        started = time.monotonic()
        for index, body in enumerate(mutants):
            chunk = frame(body)
            if index % VALID_EVERY == 0:
                name = f"valid-{index}"
                expected.add(name)
                chunk += valid(name)
            proc.stdin.write(chunk)
            if index % 1000 == 999:
                proc.stdin.flush()
                # Let courier catch up so memory is measured in a steady state.
                missing = reader.wait_for(expected, 20)
                assert not missing, f"unanswered after {index + 1} messages: {sorted(missing)[:5]}"
                assert proc.poll() is None, f"courier exited with {proc.returncode} after {index + 1} messages"
                rss.append(_vm_rss(proc.pid))
        proc.stdin.flush()
        missing = reader.wait_for(expected, 20)
        elapsed = time.monotonic() - started

        assert proc.poll() is None, f"courier exited with {proc.returncode}"
        assert not missing, f"{len(missing)} valid requests unanswered, e.g. {sorted(missing)[:5]}"
        assert not reader.problems, f"{len(reader.problems)} malformed messages, e.g. {reader.problems[:3]}"
        growth = rss[-1] - rss[0]
        print(f"\n{framing}: {len(mutants)} malformed + {len(expected)} valid messages in {elapsed:.1f} s, "
              f"{reader.count} answers, VmRSS {rss[0] >> 20} MiB after the first thousand, "
              f"{rss[-1] >> 20} MiB after the last")
        assert growth < RSS_GROWTH_LIMIT, f"VmRSS grew by {growth >> 20} MiB: {[r >> 20 for r in rss]}"
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
