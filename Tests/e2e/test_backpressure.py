"""End-to-end tests of courier's output backpressure: a client that does not
read its answers stops being read from once 16 MiB wait, gets every answer
when it reads again, and `download/progress` notifications for one task are
merged while they wait, without breaking the rules of their order."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import termios
import threading
import time
from array import array
from pathlib import Path
from typing import Any, Callable

from conftest import COURIER, PROXY_VARIABLES
from courier_client import frame

RSS_LIMIT_KIB = 300 * 1024
DISCOVER_REQUESTS = 20_000


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def unread_bytes(fd: int) -> int:
    """Bytes in the pipe behind ``fd`` that its reader has not read yet."""
    count = array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count, True)
    return count[0]


class SlowClient:
    """courier on pipes, with a client that reads nothing until it is told to.

    Writes go through a thread of their own (they block once courier stops
    reading); ``read()`` starts a thread that hands each line of stdout to a
    callback."""

    def __init__(self, cache_dir: Path, stderr_path: Path, *args: str):
        env = {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}
        self._stderr = open(stderr_path, "wb")
        self.proc = subprocess.Popen([COURIER, "--cache-dir", str(cache_dir), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env)
        self.stderr_path = stderr_path
        self.written = 0
        self.total = 0
        self.wrote_all = threading.Event()
        self._cv = threading.Condition()
        self._eof = False

    def write_in_background(self, data: bytes) -> None:
        """Writes ``data`` to courier's stdin on a thread, counting progress."""
        self.total += len(data)

        def run() -> None:
            fd = self.proc.stdin.fileno()
            view = memoryview(data)
            offset = 0
            try:
                while offset < len(view):
                    offset += os.write(fd, view[offset:offset + 65536])
                    self.written = offset
            except OSError:
                pass
            self.wrote_all.set()

        threading.Thread(target=run, name="courier-stdin", daemon=True).start()

    def cpu_seconds(self) -> float:
        """CPU time courier has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_until_writer_blocked(self, timeout: float = 300, quiet: float = 1.0) -> bool:
        """Waits until, for ``quiet`` seconds, the writer has made no progress
        while courier sat idle with its stdin unread: courier has stopped
        reading. False when the writer wrote everything first."""
        deadline = time.monotonic() + timeout
        window = (time.monotonic(), self.written, self.cpu_seconds())
        while time.monotonic() < deadline:
            if self.wrote_all.wait(0.05):
                return False
            assert self.proc.poll() is None, "courier exited"
            now, written, cpu = time.monotonic(), self.written, self.cpu_seconds()
            if written != window[1] or cpu - window[2] > 0.1 * quiet:
                window = (now, written, cpu)
            elif now - window[0] >= quiet and unread_bytes(self.proc.stdin.fileno()) > 0:
                return True
        raise TimeoutError(f"courier kept reading for {timeout} s")

    def read(self, on_line: Callable[[bytes], None]) -> None:
        def run() -> None:
            for line in self.proc.stdout:
                on_line(line)
            with self._cv:
                self._eof = True
                self._cv.notify_all()

        threading.Thread(target=run, name="courier-stdout", daemon=True).start()

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._cv:
            while not condition():
                assert not self._eof, f"courier's output ended while waiting for {what}"
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{what} not reached within {timeout} s")
                self._cv.wait(remaining)

    def notify_waiters(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def end(self, timeout: float = 30) -> int:
        """Closes stdin (end of input) and waits for courier to exit."""
        self.wrote_all.wait(timeout)
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


def test_twenty_thousand_discover_requests_from_a_client_that_does_not_read(
        cache_dir, tmp_path, capsys, record_property):
    client = SlowClient(cache_dir, tmp_path / "stderr.log")
    try:
        # Given 20,000 rpc.discover requests (some 1.6 GB of answers) from a
        # client that reads nothing yet
        requests = b"".join(frame({"jsonrpc": "2.0", "id": n, "method": "rpc.discover"})
                            for n in range(DISCOVER_REQUESTS))
        client.write_in_background(requests)

        # Then courier stops reading them: the writer blocks before it is done
        blocked = client.wait_until_writer_blocked()
        rss_blocked = peak_rss_kib(client.proc.pid)
        assert blocked, (f"courier read all {DISCOVER_REQUESTS:,} requests without any answer being read "
                         f"(peak RSS {rss_blocked / 1024:.1f} MiB)")
        assert client.written < client.total

        # When the client reads
        ids: list[int] = []
        reference: dict[str, bytes] = {}
        bad: list[bytes] = []
        prefix = re.compile(rb'\{"id":(\d+),')

        def on_line(line: bytes) -> None:
            match = prefix.match(line)
            if match is None:
                bad.append(line[:200])
            else:
                tail = line[match.end():]
                if "tail" not in reference:
                    message = json.loads(line)
                    assert message["result"]["openrpc"], message
                    reference["tail"] = tail
                elif tail != reference["tail"]:
                    bad.append(line[:200])
                ids.append(int(match.group(1)))
            if len(ids) % 1000 == 0 or bad:
                client.notify_waiters()

        client.read(on_line)

        # Then every request gets its answer, in order, with the whole document
        client.wait_for(lambda: len(ids) >= DISCOVER_REQUESTS or bool(bad), timeout=600,
                        what=f"{DISCOVER_REQUESTS} answers")
        assert bad == []
        assert ids == list(range(DISCOVER_REQUESTS))
        assert client.wrote_all.is_set()

        # And courier's memory stayed bounded
        rss = peak_rss_kib(client.proc.pid)
        record_property("peak_rss_kib", rss)
        with capsys.disabled():
            print(f"\npeak RSS of courier over {DISCOVER_REQUESTS:,} unread rpc.discover answers: "
                  f"{rss / 1024:.1f} MiB ({rss_blocked / 1024:.1f} MiB when reading paused)")
        assert rss < RSS_LIMIT_KIB
        assert client.end() == 0
    finally:
        client.kill()


def _notifications(lines: list[bytes]) -> list[dict]:
    return [m for m in map(json.loads, lines) if "method" in m]


def _check_progress_rules(messages: list[dict], task: str, receipts: set[str]) -> list[dict]:
    """The rules of one task's notifications; returns its progress notifications."""
    finished: set[str] = set()
    progress = []
    last_received = -1
    for message in messages:
        params = message.get("params") or {}
        if message["method"] == "download/finished" and params["receipt"] in receipts:
            assert params["receipt"] not in finished
            finished.add(params["receipt"])
        elif message["method"] == "download/progress" and params["task"] == task:
            assert finished.isdisjoint(params["receipts"]), (params, finished)
            assert set(params["receipts"]) <= receipts
            assert params["received"] >= last_received, (params, last_received)
            last_received = params["received"]
            progress.append(params)
    assert finished == receipts
    return progress


def backlog() -> bytes:
    """Three rpc.discover requests: their answers (240 KB) are more than the
    pipe holds, so what courier sends after them waits in its queue."""
    return b"".join(frame({"jsonrpc": "2.0", "id": f"backlog-{n}", "method": "rpc.discover"})
                    for n in range(3))


def _read_until(client: SlowClient, lines: list[bytes], done: Callable[[list[dict]], bool]) -> list[dict]:
    def on_line(line: bytes) -> None:
        lines.append(line)
        client.notify_waiters()

    client.read(on_line)
    client.wait_for(lambda: done(_notifications(list(lines))), timeout=60, what="download/finished")
    return [json.loads(line) for line in lines]


def test_progress_is_merged_for_a_client_that_does_not_read(cache_dir, tmp_path, origin, capsys):
    size = 8 << 20
    path = f"/drip?size={size}&chunks=200&interval=0.002"
    destination = tmp_path / "dripped.bin"
    client = SlowClient(cache_dir, tmp_path / "stderr.log", "--progress-interval", "0")
    try:
        # Given a client that reads nothing while a multi-MB download runs
        client.write_in_background(backlog() + frame(
            {"jsonrpc": "2.0", "id": "d", "method": "download",
             "params": {"url": origin.url(path), "destination": str(destination)}}))
        # (the body is renamed into place just before download/finished)
        deadline = time.monotonic() + 60
        while not (destination.exists() and destination.stat().st_size == size):
            assert time.monotonic() < deadline, "the download did not finish"
            assert client.proc.poll() is None
            client.wrote_all.wait(0.02)

        # When it reads
        lines: list[bytes] = []
        messages = _read_until(client, lines, lambda notes: any(
            n["method"] == "download/finished" for n in notes))

        # Then the task's notifications keep their rules, merged into few
        response = next(m for m in messages if m.get("id") == "d")
        task, receipt = response["result"]["task"], response["result"]["receipt"]
        notes = [m for m in messages if "method" in m]
        progress = _check_progress_rules(notes, task, {receipt})
        order = [m.get("method") or m.get("id") for m in messages]
        assert order.index("d") < order.index("download/finished")
        with capsys.disabled():
            print(f"\ndownload/progress notifications of an {size >> 20} MiB download "
                  f"for a client that did not read: {len(progress)}")
        assert 1 <= len(progress) <= 3, progress
        assert progress[-1]["received"] == size
        finished = next(n["params"] for n in notes if n["method"] == "download/finished")
        assert finished["outcome"]["ok"], finished
        assert client.end() == 0
    finally:
        client.kill()


def test_merged_progress_never_names_a_receipt_after_its_end(cache_dir, tmp_path, origin):
    size = 4 << 20
    path = f"/drip?size={size}&chunks=100&interval=0.01"
    client = SlowClient(cache_dir, tmp_path / "stderr.log", "--progress-interval", "0")
    try:
        # Given two receipts on one task (two slots, one URL) for a client
        # that reads nothing
        client.write_in_background(backlog() + b"".join(
            frame({"jsonrpc": "2.0", "id": slot, "method": "download",
                   "params": {"url": origin.url(path), "slot": slot, "body": "base64"}})
            for slot in ("a", "b")))
        # When one is cancelled while the transfer runs
        deadline = time.monotonic() + 30
        while origin.hits(path) == 0:
            assert time.monotonic() < deadline, "the origin saw no request"
            client.wrote_all.wait(0.01)
        assert client.wrote_all.wait(10)
        client.wrote_all.clear()
        client.write_in_background(frame({"jsonrpc": "2.0", "id": "cancel", "method": "cancel",
                                          "params": {"slot": "a"}}))

        # Then, once read, the notifications keep every rule: received never
        # goes down, and no progress names a receipt after its download/finished
        lines: list[bytes] = []
        messages = _read_until(client, lines, lambda notes: sum(
            n["method"] == "download/finished" for n in notes) >= 2)
        results = {m["id"]: m["result"] for m in messages if m.get("id") in ("a", "b")}
        assert results["a"]["task"] == results["b"]["task"]
        task = results["a"]["task"]
        receipts = {results["a"]["receipt"], results["b"]["receipt"]}
        notes = [m for m in messages if "method" in m]
        progress = _check_progress_rules(notes, task, receipts)
        outcomes = {n["params"]["receipt"]: n["params"]["outcome"] for n in notes
                    if n["method"] == "download/finished"}
        assert outcomes[results["b"]["receipt"]]["ok"]
        if progress:
            assert progress[-1]["received"] <= size
        order = [m.get("method") or m.get("id") for m in messages]
        assert order.index("a") < order.index("download/finished")
        assert client.end() == 0
    finally:
        client.kill()
