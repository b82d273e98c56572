#!/usr/bin/env python3
"""Transport throughput of courier: messages per second on a stream of small
requests for an unknown method, whose -32601 answers exercise reading,
parsing, dispatch and writing.

For each framing (ndjson, lsp) the whole input is built in memory, courier is
started and warmed up with one request, then a thread writes the stream while
the main thread reads and counts the answers. The time runs from the first
byte written to the last answer read. Each figure is the median of --runs runs;
the runs of every subject are alternated.

The anchor is a minimal JSON-RPC loop in Python (stdlib json, one ndjson line
in, one -32601 line out) fed the same ndjson stream; courier's figures are
also given as a ratio to it, which makes them comparable across machines.

    python3 scripts/bench_transport.py [--count N] [--runs R] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
METHOD = "bench/no-such-method"
FRAMINGS = ("ndjson", "lsp")

ANCHOR = r"""
import json, sys
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    if not line.strip():
        continue
    try:
        message = json.loads(line)
    except ValueError:
        out.write(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n')
        continue
    if isinstance(message, dict) and "id" in message:
        out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {
            "code": -32601, "message": "Method not found",
            "data": {"method": message.get("method")}}}, separators=(",", ":")).encode() + b"\n")
out.flush()
"""


# ---------------------------------------------------------------- input


def request(id: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"%s"}' % (id, METHOD.encode())


def frame(body: bytes, framing: str) -> bytes:
    if framing == "ndjson":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def build_input(count: int, framing: str) -> bytes:
    """Requests with ids 1..count."""
    return b"".join(frame(request(i), framing) for i in range(1, count + 1))


# ---------------------------------------------------------------- counting


class NdjsonCounter:
    """Counts complete messages in a stream of compact JSON lines."""

    def __init__(self) -> None:
        self.complete = 0

    def feed(self, chunk: bytes) -> None:
        self.complete += chunk.count(b"\n")


class LspCounter:
    """Counts complete messages in a Content-Length framed stream (compact
    JSON bodies hold no CR LF CR LF, so each one ends a header block)."""

    TERMINATOR = b"\r\n\r\n"
    HEADER = b"Content-Length: "

    def __init__(self) -> None:
        self.headers = 0
        self.remaining = 0  # bytes of the last body not yet read
        self.tail = b""

    def feed(self, chunk: bytes) -> None:
        data = self.tail + chunk
        found = data.count(self.TERMINATOR, max(0, len(self.tail) - 3))
        if found:
            self.headers += found
            end = data.rfind(self.TERMINATOR)
            start = data.rfind(self.HEADER, 0, end)
            length = int(data[start + len(self.HEADER):end])
            self.remaining = length - (len(data) - end - len(self.TERMINATOR))
        else:
            self.remaining -= len(chunk)
        self.tail = data[-64:]

    @property
    def complete(self) -> int:
        return self.headers - (1 if self.remaining > 0 else 0)


def parse_output(data: bytes, framing: str) -> list[dict]:
    if framing == "ndjson":
        return [json.loads(line) for line in data.split(b"\n") if line]
    messages, pos = [], 0
    header = re.compile(rb"Content-Length: (\d+)\r\n\r\n")
    while pos < len(data):
        m = header.match(data, pos)
        if not m:
            raise RuntimeError(f"unframed output at byte {pos}: {data[pos:pos + 60]!r}")
        end = m.end() + int(m.group(1))
        messages.append(json.loads(data[m.end():end]))
        pos = end
    return messages


# ---------------------------------------------------------------- one run


def run_once(argv: list[str], framing: str, data: bytes, count: int, timeout: float) -> float:
    """Messages per second for one server process on one input."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, bufsize=0)
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout

        def read_until(counter, target: int) -> None:
            while counter.complete < target:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{counter.complete} of {target} answers within {timeout} s")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"output ended after {counter.complete} of {target} answers "
                                       f"(exit code {proc.poll()})")
                chunks.append(chunk)
                counter.feed(chunk)

        # Warm-up: the server is running and has chosen its framing.
        proc.stdin.write(frame(request(0), framing))
        counter: NdjsonCounter | LspCounter = NdjsonCounter() if framing == "ndjson" else LspCounter()
        read_until(counter, 1)

        started = [0.0]
        failure: list[BaseException] = []

        def write() -> None:
            try:
                started[0] = time.perf_counter()
                view = memoryview(data)
                while view:
                    written = proc.stdin.write(view[:1 << 20])
                    view = view[written:]
                proc.stdin.close()
            except BaseException as e:  # noqa: BLE001
                failure.append(e)

        writer = threading.Thread(target=write, name="bench-writer", daemon=True)
        writer.start()
        read_until(counter, count + 1)
        elapsed = time.perf_counter() - started[0]
        writer.join(timeout=max(1.0, deadline - time.monotonic()))
        if failure:
            raise RuntimeError(f"writing failed: {failure[0]!r}")

        messages = parse_output(b"".join(chunks), framing)
        ids = [m.get("id") for m in messages]
        if ids != list(range(count + 1)):
            raise RuntimeError(f"answers out of order or missing: got {len(ids)} answers")
        if any(m.get("error", {}).get("code") != -32601 for m in messages):
            bad = next(m for m in messages if m.get("error", {}).get("code") != -32601)
            raise RuntimeError(f"unexpected answer: {bad!r}")
        return count / elapsed
    finally:
        if proc.poll() is None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()


# ---------------------------------------------------------------- driver


def find_courier(explicit: str | None) -> tuple[str, str]:
    """The binary to measure and its build ("release", "debug" or "given")."""
    if explicit:
        return explicit, "given"
    for build in ("release", "debug"):
        candidate = REPO / ".build" / build / "courier"
        if candidate.exists():
            return str(candidate), build
    raise SystemExit("no courier binary: run `swift build -c release` (or pass --courier)")


def measure(runs: int, subjects: dict[str, Callable[[], float]]) -> dict[str, dict]:
    """Runs every subject once per round, rounds alternated so that a change
    in the machine's load touches every subject alike."""
    figures: dict[str, list[float]] = {name: [] for name in subjects}
    for i in range(runs):
        for name, once in subjects.items():
            figures[name].append(once())
            print(f"  round {i + 1}/{runs}: {name}: {figures[name][-1]:,.0f} msg/s",
                  file=sys.stderr, flush=True)
    return {name: {"runs": f, "median": statistics.median(f)} for name, f in figures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200_000, help="requests per run (default 200000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported")
    parser.add_argument("--courier", help="binary to measure (default: .build/release/courier, "
                                          "else .build/debug/courier)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per run")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = parser.parse_args(argv)
    if args.count < 1 or args.runs < 1:
        parser.error("--count and --runs must be at least 1")

    binary, build = find_courier(args.courier)
    print(f"courier: {binary} ({build} build)", flush=True)
    print(f"stream: {args.count:,} requests for an unknown method, {args.runs} runs each, median",
          flush=True)

    inputs = {framing: build_input(args.count, framing) for framing in FRAMINGS}
    subjects: dict[str, Callable[[], float]] = {
        f"courier {framing}": (lambda f=framing: run_once([binary], f, inputs[f], args.count, args.timeout))
        for framing in FRAMINGS
    }
    subjects["anchor (python ndjson)"] = lambda: run_once(
        [sys.executable, "-c", ANCHOR], "ndjson", inputs["ndjson"], args.count, args.timeout)
    results = measure(args.runs, subjects)
    anchor = results["anchor (python ndjson)"]
    for figures in results.values():
        figures["ratio_to_anchor"] = figures["median"] / anchor["median"]

    print()
    print(f"{'':24} {'median msg/s':>14} {'vs anchor':>10}   runs (msg/s)")
    for name, figures in results.items():
        runs = ", ".join(f"{r:,.0f}" for r in figures["runs"])
        print(f"{name:24} {figures['median']:>14,.0f} {figures['ratio_to_anchor']:>9.2f}x   {runs}")

    if args.json:
        document = {
            "benchmark": "transport",
            "courier": binary,
            "build": build,
            "count": args.count,
            "runs": args.runs,
            "method": METHOD,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "results": {
                name.split(" (")[0].replace(" ", "_"): {
                    "runs_msgs_per_s": figures["runs"],
                    "median_msgs_per_s": figures["median"],
                    "ratio_to_anchor": figures["ratio_to_anchor"],
                }
                for name, figures in results.items()
            },
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
