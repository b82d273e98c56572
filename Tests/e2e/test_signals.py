"""End-to-end tests of how courier ends: SIGTERM, SIGINT and SIGHUP act as
`shutdown` then `exit` (every unfinished receipt ends `shutdown`, nothing
temporary is left in the cache directory, exit code 0); a second signal ends
courier at once, even while the first shutdown waits for a client that does
not read; a client that is gone (stdin and stdout closed) gets the same end
at once. (End of stdin alone lets the downloads finish: test_lifecycle.py.)"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import COURIER, PROXY_VARIABLES
from courier_client import frame

SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "SIGHUP": signal.SIGHUP}


def leftovers(cache_dir: Path) -> list[str]:
    """Temporary files and per-process download files left in the cache."""
    found = []
    for path in cache_dir.rglob("*"):
        relative = path.relative_to(cache_dir)
        if relative.parts[0] in ("tmp", "downloads") and path.is_file():
            found.append(str(relative))
        elif relative.parts[0] == "downloads" and len(relative.parts) == 2:
            found.append(str(relative))
        elif ".tmp" in path.name or path.name.startswith("."):
            found.append(str(relative))
    return sorted(found)


def start_stalled_downloads(c, origin, count: int = 2) -> list[dict]:
    """Downloads that hang after their first bytes, each seen running."""
    results = []
    for n in range(count):
        result = c.download(origin.url(f"/stall?after=1000&hold=60&n={n}"))
        c.wait_progress(result["task"])
        results.append(result)
    return results


@pytest.mark.parametrize("name", SIGNALS)
def test_a_signal_acts_as_shutdown_and_exit(courier, origin, cache_dir, name):
    # Given downloads that hang with part of their body received
    c = courier("--log-level", "notice")
    stored = c.download(origin.url("/cache?max-age=600&body=kept"), body="text", wait=True)
    assert stored["outcome"]["ok"]
    results = start_stalled_downloads(c, origin)

    # When courier gets the signal
    os.kill(c.pid, SIGNALS[name])

    # Then every unfinished receipt ends with shutdown, and courier exits with 0
    outcomes = c.wait_all([r["receipt"] for r in results], timeout=20)
    assert all(o["error"]["code"] == "shutdown" for o in outcomes.values()), outcomes
    assert c.wait_exit(20) == 0
    assert f"{name}: shutting down" in c.stderr_text

    # And the cache holds nothing temporary, and still serves what it stored
    assert leftovers(cache_dir) == []
    again = courier()
    hit = again.download(origin.url("/cache?max-age=600&body=kept"), body="text",
                         cachePolicy="cacheOnly", wait=True)
    assert hit["outcome"]["ok"] and hit["outcome"]["text"] == "kept", hit


def test_a_download_waiting_for_its_outcome_gets_shutdown_on_sigterm(courier, origin):
    # Given a download with wait: true that hangs
    c = courier()
    request = c.send_request("download", {"url": origin.url("/stall?after=1000&hold=60"), "wait": True})
    c.wait_notification("download/progress")

    # When courier gets SIGTERM
    os.kill(c.pid, signal.SIGTERM)

    # Then the response carries the shutdown outcome
    response = c.wait_response(request, timeout=20)
    assert response["result"]["outcome"]["error"]["code"] == "shutdown", response
    assert c.wait_exit(20) == 0


def test_a_client_that_is_gone_ends_the_downloads_at_once(origin, cache_dir):
    # Given downloads that hang, each seen running
    env = {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}
    proc = subprocess.Popen([COURIER, "--cache-dir", str(cache_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        for n in range(2):
            proc.stdin.write(frame({"jsonrpc": "2.0", "id": n, "method": "download",
                                    "params": {"url": origin.url(f"/stall?after=1000&hold=60&gone={n}")}}))
        proc.stdin.flush()
        seen = b""
        while seen.count(b'"download/progress"') < 2:
            readable, _, _ = select.select([proc.stdout], [], [], 20)
            assert readable, f"no progress within 20 s: {seen!r}"
            seen += os.read(proc.stdout.fileno(), 1 << 16)

        # When the client goes away: its ends of both pipes close
        closed = time.monotonic()
        proc.stdout.close()
        proc.stdin.close()

        # Then courier ends the stalled downloads at once and exits with 0,
        # leaving nothing temporary behind
        assert proc.wait(10) == 0
        assert time.monotonic() - closed < 5, "courier waited on downloads nobody can hear about"
        assert leftovers(cache_dir) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class Unread:
    """courier on pipes with a client that leaves stdout unread, so that a
    shutdown waits on it, and a thread that follows stderr."""

    def __init__(self, cache_dir: Path):
        env = {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}
        self.proc = subprocess.Popen([COURIER, "--cache-dir", str(cache_dir), "--log-level", "notice"],
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.stderr = b""
        self._cv = threading.Condition()
        threading.Thread(target=self._follow_stderr, daemon=True).start()

    def _follow_stderr(self) -> None:
        for line in self.proc.stderr:
            with self._cv:
                self.stderr += line
                self._cv.notify_all()

    def wait_stderr(self, text: bytes, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        with self._cv:
            while text not in self.stderr:
                remaining = deadline - time.monotonic()
                assert remaining > 0, (f"{text!r} not on stderr within {timeout} s "
                                       f"(exit code {self.proc.poll()}): {self.stderr!r}")
                self._cv.wait(remaining)

    def ask_for_documents(self, count: int = 40) -> None:
        """Sends `count` rpc.discover requests: 80 KB answers each, far more
        than the unread pipe holds."""
        self.proc.stdin.write(b"".join(frame({"jsonrpc": "2.0", "id": n, "method": "rpc.discover"})
                                       for n in range(count)))
        self.proc.stdin.flush()
        # Anything on stdout means courier is serving (its signal handling is set up)
        readable, _, _ = select.select([self.proc.stdout], [], [], 20)
        assert readable, "courier wrote nothing within 20 s"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def test_a_second_sigterm_exits_at_once_while_shutdown_waits(cache_dir):
    # Given a shutdown held up by a client that does not read its answers
    courier = Unread(cache_dir)
    try:
        courier.ask_for_documents()
        os.kill(courier.proc.pid, signal.SIGTERM)
        courier.wait_stderr(b"SIGTERM: shutting down")
        with pytest.raises(subprocess.TimeoutExpired):
            courier.proc.wait(0.5)

        # When a second SIGTERM comes
        sent = time.monotonic()
        os.kill(courier.proc.pid, signal.SIGTERM)

        # Then courier exits at once, with 128 + 15
        assert courier.proc.wait(5) == 143
        assert time.monotonic() - sent < 5
    finally:
        courier.kill()


def test_a_second_sigint_exits_with_130(cache_dir):
    courier = Unread(cache_dir)
    try:
        courier.ask_for_documents()
        os.kill(courier.proc.pid, signal.SIGINT)
        courier.wait_stderr(b"SIGINT: shutting down")
        os.kill(courier.proc.pid, signal.SIGINT)
        assert courier.proc.wait(5) == 130
    finally:
        courier.kill()


def test_after_sigterm_a_slow_client_still_gets_what_was_sent(cache_dir):
    # Given answers waiting for a client that does not read
    courier = Unread(cache_dir)
    try:
        courier.ask_for_documents()

        # When courier gets SIGTERM, and the client reads afterwards
        os.kill(courier.proc.pid, signal.SIGTERM)
        courier.wait_stderr(b"SIGTERM: shutting down")
        output = courier.proc.stdout.read()

        # Then courier exited with 0 once every message it had sent was read:
        # each one whole, none missing in between
        assert courier.proc.wait(20) == 0
        messages = [json.loads(line) for line in output.splitlines()]
        assert [m["id"] for m in messages] == list(range(len(messages)))
        assert messages and "result" in messages[0]
    finally:
        courier.kill()
