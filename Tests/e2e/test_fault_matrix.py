"""The fault matrix, end to end: every fault a download can meet, each against
a real local origin (or a real missing one), each into a `destination`.

Every case must end with its precise outcome error code, and afterwards
courier must still serve (a normal download succeeds), have nothing left
running (`progress {}` lists no task), have left no partial file (neither
beside the destination nor in the cache's `tmp/`), and report
`activityCount` 0. The time from `download` to `download/finished` of each
case is printed as a table at the end of the module."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import pytest

from origin import Origin, pattern

FOLLOW_UP_SIZE = 1000


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the table ----------------------------------------------------------------------------


@dataclass
class Row:
    case: str
    expected: str
    got: str
    seconds: float | None


@pytest.fixture(scope="module")
def matrix(request):
    rows: list[Row] = []
    yield rows
    if not rows:
        return
    width = max(len("case"), *(len(r.case) for r in rows))
    ewidth = max(len("expected"), *(len(r.expected) for r in rows))
    gwidth = max(len("error code"), *(len(r.got) for r in rows))
    lines = ["", "fault matrix (time from download to download/finished):",
             f"  {'case':<{width}}  {'error code':<{gwidth}}  {'expected':<{ewidth}}  time"]
    for r in rows:
        seconds = "—" if r.seconds is None else f"{r.seconds * 1000:8.0f} ms"
        lines.append(f"  {r.case:<{width}}  {r.got:<{gwidth}}  {r.expected:<{ewidth}}  {seconds}")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is None:
        print("\n".join(lines))
        return
    with capture.global_and_fixture_disabled():
        print("\n".join(lines))


# -- one case -------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    url: Callable[["Context"], str]
    code: str
    http_status: int | None = None
    curl_code: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    at_least: float = 0.0
    within: float = 10.0
    mid_body: bool = False
    """The fault strikes after part of the body has arrived."""


class Context:
    """What a case's URL may need: the plain origin, and an HTTPS origin with
    a self-signed certificate started on demand."""

    def __init__(self, origin: Origin, tls_cert: tuple[str, str]):
        self.origin = origin
        self.tls_cert = tls_cert
        self._tls: Origin | None = None

    def url(self, path: str) -> str:
        return self.origin.url(path)

    def tls_url(self, path: str) -> str:
        if self._tls is None:
            self._tls = Origin(tls=self.tls_cert).start()
        return self._tls.url(path)

    def close(self) -> None:
        if self._tls is not None:
            self._tls.stop()


def files_under(directory: Path) -> list[str]:
    if not directory.exists():
        return []
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if not p.is_dir())


def cache_tmp_files(c, cache_dir: Path) -> list[str]:
    """What the cache's `tmp/` holds: bodies in transit only."""
    return files_under(cache_dir / "tmp")


def wait_activity_zero(c, timeout: float = 5.0) -> dict:
    """`indicator/state` until its `activityCount` is 0 (the count drops when
    the transfer ends, so this is normally the first answer)."""
    deadline = time.monotonic() + timeout
    while True:
        state = c.indicator_state()
        if state["activityCount"] == 0 or time.monotonic() >= deadline:
            return state


def run_case(c, case: Case, ctx: Context, dest_dir: Path, cache_dir: Path,
             matrix: list[Row], follow_up_dir: Path | None = None) -> dict:
    expected = case.code + (f" {case.http_status}" if case.http_status else "") + \
        (f" (curl {case.curl_code})" if case.curl_code is not None else "")
    row = Row(case.id, expected, "no outcome", None)
    matrix.append(row)

    destination = dest_dir / "out.bin"
    url = case.url(ctx)
    since = c.mark()
    started = time.monotonic()
    try:
        result = c.download(url, destination=str(destination), **case.params)
        entry = c.wait_notification_entry(
            lambda m, p: m == "download/finished" and p["receipt"] == result["receipt"],
            timeout=case.within + 20, since=since)
    except Exception as exc:
        row.got = f"no outcome ({type(exc).__name__})"
        raise
    elapsed = entry.time - started
    out = entry.params["outcome"]
    error = out.get("error") or {}
    row.seconds = elapsed
    row.got = str(error.get("code", "ok")) + \
        (f" {error['httpStatus']}" if error.get("httpStatus") else "") + \
        (f" (curl {error['curlCode']})" if error.get("curlCode") is not None else "")

    # The precise outcome.
    assert out["ok"] is False, out
    assert error["code"] == case.code, out
    assert isinstance(error["message"], str) and error["message"], out
    if case.http_status is not None:
        assert error.get("httpStatus") == case.http_status, out
        assert out["status"] == case.http_status, out
    else:
        assert "httpStatus" not in error, out
    if case.curl_code is not None:
        assert error.get("curlCode") == case.curl_code, out
    assert "path" not in out and "text" not in out and "base64" not in out, out
    assert case.at_least <= elapsed < case.within, (elapsed, out)
    if case.mid_body:
        received = [p["received"] for _, p in c.progress_by_task[result["task"]]]
        assert received and max(received) > 0, received

    # Nothing left running, nothing half-written, no activity.
    assert c.tasks() == []
    assert files_under(dest_dir) == [], files_under(dest_dir)
    assert cache_tmp_files(c, cache_dir) == []
    assert wait_activity_zero(c)["activityCount"] == 0

    # Still serving.
    follow_up_dir = follow_up_dir or dest_dir
    good = follow_up_dir / "ok.bin"
    ok = c.fetch(ctx.url(f"/bytes/{FOLLOW_UP_SIZE}?after={quote(case.id)}"),
                 destination=str(good))
    assert ok["ok"] is True, ok
    assert ok["path"] == str(good)
    assert good.read_bytes() == pattern(FOLLOW_UP_SIZE)
    assert files_under(follow_up_dir) == ["ok.bin"]
    if follow_up_dir != dest_dir:
        assert files_under(dest_dir) == []
    assert cache_tmp_files(c, cache_dir) == []
    assert c.tasks() == []
    assert wait_activity_zero(c)["activityCount"] == 0
    return out


# -- the matrix ---------------------------------------------------------------------------------

LOW_SPEED_FLAGS = ("--low-speed-limit", "1000", "--low-speed-time", "2")

CASES = [
    Case("status 404", lambda x: x.url("/status/404"), "http_status", http_status=404),
    Case("status 500", lambda x: x.url("/status/500"), "http_status", http_status=500),
    Case("status 503", lambda x: x.url("/status/503"), "http_status", http_status=503),
    Case("closed port", lambda x: f"http://127.0.0.1:{closed_port()}/bytes/10",
         "connect_failed", curl_code=7),
    Case("reset mid-body", lambda x: x.url("/reset?size=1000000&send=65536"),
         "network", curl_code=56, mid_body=True),
    Case("body shorter than Content-Length", lambda x: x.url("/truncate?size=100000&send=40000"),
         "network", curl_code=18, mid_body=True),
    Case("stall past timeout", lambda x: x.url("/stall?after=1000&hold=30"), "timeout",
         curl_code=28, params={"timeout": 1}, at_least=0.9, within=5, mid_body=True),
    Case("trickle below low-speed limit",
         lambda x: x.url("/drip?size=4000&chunks=40&interval=0.25"), "timeout",
         curl_code=28, params={"timeout": 30}, args=LOW_SPEED_FLAGS, at_least=1.8, within=6,
         mid_body=True),
    Case("redirect loop", lambda x: x.url("/loop"), "too_many_redirects", curl_code=47),
    Case("redirect to file://", lambda x: x.url("/redirect-to?url=file:///etc/passwd"),
         "scheme_not_allowed"),
    Case("redirect to ftp://",
         lambda x: x.url(f"/redirect-to?url=ftp://127.0.0.1:{closed_port()}/file.bin"),
         "scheme_not_allowed"),
    Case("self-signed TLS", lambda x: x.tls_url("/bytes/10"), "tls_failed", curl_code=60),
    Case("unresolvable host", lambda x: "http://courier-e2e.invalid/bytes/10",
         "dns_failed", curl_code=6, params={"timeout": 30}, within=30),
    Case("maxBytes, Content-Length", lambda x: x.url("/bytes/2000000"), "too_large",
         params={"maxBytes": 1000}),
    Case("maxBytes, chunked", lambda x: x.url("/bytes/3000000?chunked=1"), "too_large",
         params={"maxBytes": 100_000}, mid_body=True),
]

def _param(case: Case):
    return pytest.param(case, id=case.id.replace(" ", "-"))


@pytest.fixture
def context(origin, tls_cert):
    ctx = Context(origin, tls_cert)
    yield ctx
    ctx.close()


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_fault(courier, context, cache_dir, tmp_path, matrix, case):
    # One attempt: each case is one fault (test_retries.py retries them).
    c = courier("--retries", "0", *case.args)
    dest = tmp_path / "dest"
    dest.mkdir()
    run_case(c, case, context, dest, cache_dir, matrix)


def test_low_speed_limit_has_a_documented_default(courier):
    config = courier().initialize()["config"]
    assert (config.get("lowSpeedLimit"), config.get("lowSpeedTime")) == (1024, 30), config


# -- cases on their own file systems -----------------------------------------------------------


def mount_tmpfs(directory: Path, options: str) -> None:
    """Mounts a tmpfs on ``directory``, or skips the test with the reason."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the test runs as uid %d)" % os.geteuid())
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
                          capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        reason = done.stderr.strip() or f"exit code {done.returncode}"
        pytest.skip(f"mount -t tmpfs -o {options} refused: {reason}")


@pytest.fixture
def mounts():
    mounted: list[Path] = []

    def mount(directory: Path, options: str) -> Path:
        mount_tmpfs(directory, options)
        mounted.append(directory)
        return directory

    yield mount
    for directory in reversed(mounted):
        done = subprocess.run(["umount", str(directory)], capture_output=True, timeout=20)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=20)


# `mounts` comes first so that it is torn down last, after courier has exited.


def test_destination_directory_not_writable(mounts, courier, context, cache_dir, tmp_path, matrix):
    # The tests run as root, for whom mode 000 stops nothing: a read-only
    # file system refuses everyone.
    readonly = mounts(tmp_path / "readonly", "ro,size=64k,mode=0755")
    writable = tmp_path / "writable"
    writable.mkdir()
    case = Case("destination directory read-only", lambda x: x.url("/bytes/10000"), "io")
    run_case(courier(), case, context, readonly, cache_dir, matrix, follow_up_dir=writable)


def test_full_file_system(mounts, courier, context, cache_dir, tmp_path, matrix):
    full = mounts(tmp_path / "small", "size=64k,mode=0755")
    case = Case("file system full (64 KiB tmpfs)", lambda x: x.url("/bytes/1000000"), "io")
    # The follow-up lands on the same small file system: it fits only
    # because the failed body was removed.
    run_case(courier(), case, context, full, cache_dir, matrix)
