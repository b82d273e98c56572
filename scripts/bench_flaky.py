#!/usr/bin/env python3
"""W6, a flaky link: one large file from an origin that ends every
connection cleanly after a fixed number of body bytes, and the tools that
must finish it by resuming.

The origin (`FlakyOrigin`) serves one file with a strong ETag and a
Last-Modified, honours `Range: bytes=N-` (and `N-M`) when `If-Range` is
absent or names either validator, and on every connection sends at most
`cut` bytes of body in all: then, in the middle of a response whose header
announced the full Content-Length, it shuts its side down (a FIN, not a
reset), reads what the client still sends and closes. No byte is lost in
flight, so a tool that continues where it stopped needs the file's size and
no more. The origin counts the body bytes it sent and the requests it
answered.

Each tool is measured on its own output under --dir (tmpfs by default) and
checked by SHA-256 against the file:

- curl: `curl --retry 20 --retry-all-errors --retry-delay 1 -C - -o OUT URL`
  (`-C -` continues from the output's size; curl's shortest fixed wait is
  1 s, its default backoff starts there and doubles);
- curl run again: `curl -C - -o OUT URL` run anew after each failure, up to
  20 more times, as a user of curl finishes such a download (curl 7.88's
  `--retry` throws the failed attempt's bytes away and asks again from where
  the command began, so on this link it never gets past the first cut);
- aria2c: `aria2c -c --max-tries 20 --retry-wait 0 -x 1 -s 1`;
- courier: one `download` through a raw pipe client, `--retries 20
  --retry-delay 0` (the same budget as the others, no wait), and once more
  at its default settings.

    scripts/bench_flaky.py [--courier PATH] [--runs N] [--size 256MiB]
        [--cut 32MiB] [--dir /dev/shm]

scripts/bench_compare.py runs it as workload `w6` (`scripts/bench --only w6`).
"""

from __future__ import annotations

import argparse
import email.utils
import hashlib
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_compare  # noqa: E402

SIZE = 256 << 20
CUT = 32 << 20
RETRIES = 20
SUBJECTS = ("curl", "curl-rerun", "aria2c", "courier", "courier-defaults")


# ---------------------------------------------------------------- the origin


class FlakyOrigin:
    """An HTTP/1.1 origin on 127.0.0.1 for one file that cuts every
    connection after `cut` body bytes; counts what it sent."""

    def __init__(self, path: str, cut: int):
        self.path = path
        self.size = os.path.getsize(path)
        self.cut = cut
        stat = os.stat(path)
        self.etag = f'"w6-{self.size:x}-{stat.st_mtime_ns:x}"'
        self.last_modified = email.utils.formatdate(stat.st_mtime, usegmt=True)
        self._lock = threading.Lock()
        self.body_bytes = 0
        self.requests = 0
        self.ranged = 0
        origin = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                origin._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/w6/{os.path.basename(self.path)}"

    def __enter__(self) -> "FlakyOrigin":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def take_counts(self) -> tuple[int, int, int]:
        """(body bytes, requests, ranged requests) since the last call."""
        with self._lock:
            counts = (self.body_bytes, self.requests, self.ranged)
            self.body_bytes = self.requests = self.ranged = 0
        return counts

    def _serve(self, sock: socket.socket) -> None:
        left = self.cut  # body bytes this connection may still carry
        reader = sock.makefile("rb")
        with open(self.path, "rb") as file:
            while True:
                request = _read_head(reader)
                if request is None:
                    return
                method, headers = request
                first, last, status = self._range(headers)
                length = last - first + 1
                head = [f"HTTP/1.1 {status} {'Partial Content' if status == 206 else 'OK'}",
                        "Content-Type: application/octet-stream", "Accept-Ranges: bytes",
                        f"ETag: {self.etag}", f"Last-Modified: {self.last_modified}",
                        f"Content-Length: {length}"]
                if status == 206:
                    head.append(f"Content-Range: bytes {first}-{last}/{self.size}")
                sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                with self._lock:
                    self.requests += 1
                    self.ranged += status == 206
                if method == "HEAD":
                    continue
                allowed = min(length, left)
                sent = 0
                while sent < allowed:
                    n = os.sendfile(sock.fileno(), file.fileno(), first + sent, allowed - sent)
                    if n == 0:
                        break
                    sent += n
                    with self._lock:
                        self.body_bytes += n
                left -= sent
                if sent < length:
                    _close_cleanly(sock, reader)
                    return

    def _range(self, headers: dict[str, str]) -> tuple[int, int, int]:
        """(first, last, status) of the answer to a request's Range and
        If-Range."""
        whole = (0, self.size - 1, 200)
        asked = headers.get("range", "")
        if_range = headers.get("if-range")
        if not asked.startswith("bytes=") or (if_range is not None and if_range not in (self.etag, self.last_modified)):
            return whole
        spec = asked[len("bytes="):].strip()
        start, dash, end = spec.partition("-")
        if not dash or not start.isdigit() or (end and not end.isdigit()) or "," in spec:
            return whole
        first, last = int(start), min(int(end) if end else self.size - 1, self.size - 1)
        if first >= self.size or last < first:
            return whole
        return first, last, 206


def _read_head(reader) -> tuple[str, dict[str, str]] | None:
    """A request's method and headers (names in lower case), or None at the
    end of the connection."""
    line = reader.readline(65536)
    while line in (b"\r\n", b"\n"):
        line = reader.readline(65536)
    if not line:
        return None
    method = line.split(b" ", 1)[0].decode("latin-1")
    headers: dict[str, str] = {}
    while True:
        line = reader.readline(65536)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, headers


def _close_cleanly(sock: socket.socket, reader) -> None:
    """Ends the connection with a FIN: shut the sending side down, then read
    until the client closes (bounded), so that no unread byte turns the close
    into a reset."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(10)
        while reader.read1(65536):
            pass
    except OSError:
        pass
    finally:
        reader.close()
        sock.close()


# ---------------------------------------------------------------- the tools


@dataclass
class Result:
    seconds: float
    body_bytes: int
    requests: int
    ranged: int
    correct: bool
    failure: str = ""


def sha256_of(path: str) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def subjects(binary: str, origin: FlakyOrigin, digest: str, work: str,
             tools: tuple[str, ...] = SUBJECTS) -> dict[str, Callable[[int], Result]]:
    """One callable per tool: a fresh output directory, one download of the
    origin's file, its figures and whether the output is the file."""

    def run(tool: str, index: int) -> Result:
        out_dir = bench_compare.fresh_dir(f"{work}/w6-{tool}-{index}")
        out = f"{out_dir}/file"
        origin.take_counts()
        failure = ""
        start = time.perf_counter()
        try:
            if tool == "curl":
                bench_compare.run_command(
                    ["curl", "--silent", "--show-error", "--fail", "--retry", str(RETRIES), "--retry-all-errors",
                     "--retry-delay", "1", "-C", "-", "-o", out, origin.url])
            elif tool == "curl-rerun":
                for invocation in range(RETRIES + 1):
                    try:
                        bench_compare.run_command(["curl", "--silent", "--fail", "-C", "-", "-o", out, origin.url])
                        break
                    except RuntimeError:
                        if invocation == RETRIES:
                            raise
            elif tool == "aria2c":
                bench_compare.run_command(
                    ["aria2c", "--no-conf", "--quiet", "--continue=true", f"--max-tries={RETRIES}", "--retry-wait=0",
                     "--max-connection-per-server=1", "--split=1", "--file-allocation=none",
                     "--allow-overwrite=true", "--auto-file-renaming=false", "--summary-interval=0",
                     f"--dir={out_dir}", "--out=file", origin.url])
            else:
                cache = bench_compare.fresh_dir(f"{work}/w6-{tool}-cache-{index}")
                extra = () if tool == "courier-defaults" else ("--retries", str(RETRIES), "--retry-delay", "0")
                bench_compare.courier_transfers(binary, [(origin.url, out)], 1, cache, extra)
            seconds = time.perf_counter() - start
        except RuntimeError as exc:
            seconds = time.perf_counter() - start
            failure = _failure(str(exc))
        body_bytes, requests, ranged = origin.take_counts()
        correct = not failure and os.path.exists(out) and sha256_of(out) == digest
        if not failure and not correct:
            failure = "the output is not the file"
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(f"{work}/w6-{tool}-cache-{index}", ignore_errors=True)
        return Result(seconds, body_bytes, requests, ranged, correct, failure)

    return {tool: (lambda index, tool=tool: run(tool, index)) for tool in tools}


def _failure(text: str) -> str:
    """A failed run in a few words: an exit status, or the error code and
    attempts of courier's failed outcome."""
    code = re.search(r"'code': '([a-z_]+)'", text)
    if code is None:
        return text[:120]
    attempts = re.search(r"'attempts': (\d+)", text)
    return f"{code.group(1)} after {attempts.group(1)} attempts" if attempts else code.group(1)


def measure(binary: str, runs: int, size: int, cut: int, work: str,
            tools: tuple[str, ...] = SUBJECTS) -> dict[str, list[Result]]:
    """`runs` rounds in which every tool takes a turn (the order rotating,
    each turn after `sync`) against one FlakyOrigin."""
    source = f"{work}/w6-source"
    bench_compare.write_random(source, size)
    digest = sha256_of(source)
    results: dict[str, list[Result]] = {}
    with FlakyOrigin(source, cut) as origin:
        turns = subjects(binary, origin, digest, work, tools)
        names = list(turns)
        for run in range(runs):
            shift = run % len(names)
            for name in names[shift:] + names[:shift]:
                os.sync()
                result = turns[name](run)
                results.setdefault(name, []).append(result)
                state = "correct" if result.correct else f"FAILED: {result.failure}"
                print(f"  w6 run {run + 1}/{runs}: {name:16} {result.seconds * 1000:9.1f} ms, "
                      f"{result.body_bytes / (1 << 20):8.1f} MiB sent in {result.requests} requests "
                      f"({result.ranged} ranged), {state}   (load {os.getloadavg()[0]:.2f})",
                      file=sys.stderr, flush=True)
    os.remove(source)
    return results


# ---------------------------------------------------------------- report

NAMES = {
    "curl": "curl --retry 20 --retry-all-errors --retry-delay 1 -C -",
    "curl-rerun": "curl -C -, run again after each failure",
    "aria2c": "aria2c -c --max-tries 20 --retry-wait 0",
    "courier": "courier --retries 20 --retry-delay 0",
    "courier-defaults": "courier, default settings",
}


class SentRow(bench_compare.Row):
    """The bytes the origin sent, in MiB: met when courier's median is
    within `limit` × the file's size and every courier run was correct."""

    def __init__(self, name: str, size: int, limit: float, courier_correct: bool):
        super().__init__(name, "MiB", f"≤ {limit:g} × {bench_compare.human(size)}", anchor="curl-rerun")
        self.size, self.limit, self.courier_correct = size, limit, courier_correct

    def met(self) -> bool | None:
        sent = self.median("courier")
        if sent is None:
            return None
        return self.courier_correct and sent * (1 << 20) <= self.limit * self.size


def rows(results: dict[str, list[Result]], size: int, cut: int) -> dict[str, bench_compare.Row]:
    """The main table's W6 rows: time, and bytes sent against the 1.05 ×
    size target, for courier with the others' retry budget and at its
    defaults; curl's column is curl run again, the way curl finishes."""
    def all_correct(tool: str) -> bool:
        return bool(results.get(tool)) and all(r.correct for r in results[tool])

    time_row = bench_compare.Row(f"W6 {bench_compare.human(size)}, a clean close every {bench_compare.human(cut)}: "
                                 "time (curl: run again with -C -; courier: --retries 20 --retry-delay 0)", "ms",
                                 anchor="curl-rerun")
    sent_row = SentRow("W6 bytes the origin sent (the same tools)", size, 1.05, all_correct("courier"))
    defaults_row = SentRow("W6 bytes the origin sent, courier at its default settings (3 retries; curl, aria2c "
                           "from the row above)", size, 1.05, all_correct("courier-defaults"))
    for tool in ("curl-rerun", "aria2c", "courier"):
        for result in results.get(tool, []):
            time_row.figures.setdefault(tool, []).append(result.seconds * 1000)
            sent_row.figures.setdefault(tool, []).append(result.body_bytes / (1 << 20))
    defaults_row.figures = {tool: list(figures) for tool, figures in sent_row.figures.items() if tool != "courier"}
    for result in results.get("courier-defaults", []):
        defaults_row.figures.setdefault("courier", []).append(result.body_bytes / (1 << 20))
    return {"w6": time_row, "w6sent": sent_row, "w6defaults": defaults_row}


def detail(results: dict[str, list[Result]], size: int, cut: int) -> list[list[str]]:
    """Every tool's medians: time, bytes sent, requests, and how many runs
    ended with the right bytes."""
    body = [["W6 tool", "time", "sent by the origin", "× size", "requests (ranged)", "correct"]]
    for tool, runs in results.items():
        seconds = sorted(r.seconds for r in runs)[len(runs) // 2]
        sent = sorted(r.body_bytes for r in runs)[len(runs) // 2]
        requests = sorted(r.requests for r in runs)[len(runs) // 2]
        ranged = sorted(r.ranged for r in runs)[len(runs) // 2]
        failures = sorted({r.failure for r in runs if not r.correct})
        correct = f"{sum(r.correct for r in runs)}/{len(runs)}" + (f" ({failures[0]})" if failures else "")
        body.append([NAMES.get(tool, tool), f"{seconds * 1000:,.0f} ms", f"{sent / (1 << 20):,.1f} MiB",
                     f"{sent / size:.3f}×", f"{requests} ({ranged})", correct])
    return body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--courier", help="the courier binary (default: .build-release/release/courier)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=bench_compare.parse_size, default=SIZE)
    parser.add_argument("--cut", type=bench_compare.parse_size, default=CUT)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--tools", default=",".join(SUBJECTS))
    args = parser.parse_args(argv)
    binary = os.path.abspath(args.courier or HERE.parent / ".build-release/release/courier")
    work = tempfile.mkdtemp(prefix="courier-bench-w6-", dir=args.dir)
    try:
        results = measure(binary, args.runs, args.size, args.cut, work, tuple(args.tools.split(",")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(bench_compare.render_text(detail(results, args.size, args.cut)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
