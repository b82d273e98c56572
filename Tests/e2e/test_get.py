"""End-to-end tests of `courier get URL... [-o DIR] [-j N] [--json]`: the
files and lines it writes through a pipe, its exit status and errors, and,
under a pseudo-terminal (a tmux pane of a fixed size), the live progress
display, its clearing, and Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from conftest import COURIER
from origin import pattern

RATE = re.compile(r"\d+(\.\d)? (B|KiB|MiB)/s")
ETA = re.compile(r"ETA \d+:\d\d")


def get(*args: str, cache: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([COURIER, "get", "--cache-dir", str(cache), *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "out"


def test_files_and_one_line_each_through_a_pipe(origin, cache, out):
    sizes = [0, 1000, 70_000]
    urls = [origin.url(f"/bytes/{n}") for n in sizes]
    done = get("-o", str(out), *urls, cache=cache)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert len(lines) == len(urls)
    for url, n in zip(urls, sizes):
        assert (out / str(n)).read_bytes() == pattern(n)
        [line] = [line for line in lines if line.startswith(url + " ")]
        assert f" -> {out}/{n} (" in line
    assert "\x1b" not in done.stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(str(n) for n in sizes)


def test_default_directory_is_the_current_one(origin, cache, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    url = origin.url("/bytes/300")
    done = subprocess.run([COURIER, "get", "--cache-dir", str(cache), url], cwd=work,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert (work / "300").read_bytes() == pattern(300)
    assert done.stdout == f"{url} -> 300 (300 B, {done.stdout.split(', ')[1]}"


def test_names_that_collide_get_numeric_suffixes(origin, cache, out):
    out.mkdir()
    (out / "a.bin").write_bytes(b"already here")
    url = origin.set_resource("a.bin", pattern(40, "r"))
    urls = [url, url + "?v=2", origin.url("/bytes/10"), origin.url("/bytes/10?seed=y")]
    done = get("-o", str(out), *urls, cache=cache)
    assert done.returncode == 0, done.stderr
    assert (out / "a.bin").read_bytes() == b"already here"
    assert (out / "a-1.bin").read_bytes() == pattern(40, "r")
    assert (out / "a-2.bin").read_bytes() == pattern(40, "r")
    assert (out / "10").read_bytes() == pattern(10)
    assert (out / "10-1").read_bytes() == pattern(10, "y")
    assert f"{urls[1]} -> {out}/a-2.bin (40 B, " in done.stdout


def test_same_url_twice_is_fetched_once_into_two_files(origin, cache, out):
    url = origin.url("/bytes/5000")
    done = get("-o", str(out), url, url, cache=cache)
    assert done.returncode == 0, done.stderr
    assert (out / "5000").read_bytes() == (out / "5000-1").read_bytes() == pattern(5000)
    assert origin.hits("/bytes/5000") == 1


def test_json_lines(origin, cache, out):
    urls = [origin.url("/bytes/123"), origin.url("/status/404")]
    done = get("--json", "-o", str(out), *urls, cache=cache)
    assert done.returncode == 1
    outcomes = {o["url"]: o for o in map(json.loads, done.stdout.splitlines())}
    assert set(outcomes) == set(urls)
    ok = outcomes[urls[0]]
    assert ok["ok"] is True and ok["size"] == 123 and ok["status"] == 200
    assert ok["path"] == str(out / "123") and ok["source"] == "network"
    failed = outcomes[urls[1]]
    assert failed["ok"] is False
    assert failed["error"]["code"] == "http_status" and failed["error"]["httpStatus"] == 404
    assert f"{urls[1]}: http_status: " in done.stderr


def test_a_failure_sets_the_exit_status_and_shows_its_code(origin, cache, out):
    good, bad = origin.url("/bytes/10"), origin.url("/status/404")
    done = get("-o", str(out), good, bad, "ftp://example.org/x", cache=cache)
    assert done.returncode == 1
    assert done.stdout.startswith(good + " -> ")
    errors = done.stderr.splitlines()
    assert f"{bad}: http_status: the origin answered HTTP 404" in errors
    assert any(line.startswith("ftp://example.org/x: scheme_not_allowed: ") for line in errors)
    assert sorted(p.name for p in out.iterdir()) == ["10"]


def test_a_second_run_is_served_from_the_cache(origin, cache, out):
    url = origin.url("/cache?max-age=600&body=cached")
    assert get("-o", str(out), url, cache=cache).returncode == 0
    again = get("-o", str(out), url, cache=cache)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().endswith(", from cache)")
    assert (out / "cache-1").read_bytes() == (out / "cache").read_bytes()
    assert origin.hits("/cache") == 1


def test_bad_arguments_are_usage_errors(cache):
    assert get(cache=cache).returncode == 64
    assert get("-j", "0", "http://x/", cache=cache).returncode == 64


def test_an_output_directory_is_made_with_its_parents_or_the_reason_it_cannot_be_is_given(origin, cache, tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    done = get("-o", f"{deep}//", origin.url("/bytes/10"), cache=cache)
    assert done.returncode == 0, done.stderr
    assert (deep / "10").read_bytes() == pattern(10)
    assert f" -> {deep}/10 (" in done.stdout

    (tmp_path / "file").write_bytes(b"x")
    under_a_file = get("-o", str(tmp_path / "file" / "d"), origin.url("/bytes/10"), cache=cache)
    assert under_a_file.returncode == 64
    assert f"cannot create the output directory {tmp_path}/file/d: Not a directory" in under_a_file.stderr

    a_file = get("-o", str(tmp_path / "file"), origin.url("/bytes/10"), cache=cache)
    assert a_file.returncode == 64
    assert f"cannot create the output directory {tmp_path}/file: Not a directory" in a_file.stderr


# -- placing files without replacing any --------------------------------------------


def start_get(*args: str, cache: Path) -> subprocess.Popen:
    return subprocess.Popen([COURIER, "get", "--cache-dir", str(cache), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def test_a_file_that_appears_during_the_download_is_kept_and_the_download_takes_the_next_name(origin, cache, out):
    # Given a download under way into an empty directory
    out.mkdir()
    url = origin.url("/hold/report.bin?size=300000")
    run = start_get("-o", str(out), url, cache=cache)
    origin.wait_held("report.bin")
    # When a file appears at its name before the body is complete
    (out / "report.bin").write_bytes(b"the user's own file")
    origin.release("report.bin")
    stdout, stderr = run.communicate(timeout=60)
    # Then that file is left as it was and the body takes the next free name
    assert run.returncode == 0, stderr
    assert (out / "report.bin").read_bytes() == b"the user's own file"
    assert (out / "report-1.bin").read_bytes() == pattern(300000, "report.bin")
    assert sorted(p.name for p in out.iterdir()) == ["report-1.bin", "report.bin"]
    assert stdout.startswith(f"{url} -> {out}/report-1.bin ("), stdout


def test_two_runs_of_one_url_into_one_directory_leave_two_files(origin, tmp_path, out):
    # Given two runs fetching the same URL into one directory, both under way
    url = origin.url("/hold/data.bin?size=200000")
    runs = [start_get("-o", str(out), url, cache=tmp_path / f"cache-{n}") for n in range(2)]
    origin.wait_held("data.bin", count=2)
    # When both finish
    origin.release("data.bin")
    results = [run.communicate(timeout=60) for run in runs]
    # Then each made a file of its own: neither replaced the other's
    assert [run.returncode for run in runs] == [0, 0], [stderr for _, stderr in results]
    assert sorted(p.name for p in out.iterdir()) == ["data-1.bin", "data.bin"]
    assert (out / "data.bin").read_bytes() == (out / "data-1.bin").read_bytes() == pattern(200000, "data.bin")
    named = sorted(stdout.split(" -> ")[1].split(" (")[0] for stdout, _ in results)
    assert named == [f"{out}/data-1.bin", f"{out}/data.bin"]


def test_a_refused_url_leaves_the_names_of_the_urls_after_it_alone(origin, cache, out):
    # Given a URL the downloader refuses between two it fetches
    first, second = origin.url("/bytes/10"), origin.url("/bytes/20")
    # When they are fetched in one run
    done = get("-o", str(out), first, "nonsense", second, cache=cache)
    # Then each line (in the order the downloads finished) names its own URL's file
    assert done.returncode == 1
    named = {line.split(" (")[0] for line in done.stdout.splitlines()}
    assert named == {f"{first} -> {out}/10", f"{second} -> {out}/20"}, done.stdout
    assert done.stderr == "nonsense: invalid_request: param 'url' is not a valid absolute URL\n"
    assert sorted(p.name for p in out.iterdir()) == ["10", "20"]


# -- under a pseudo-terminal --------------------------------------------------------


class Pane:
    """A tmux server of its own with one pane of a fixed size, running one
    command under a small wrapper that writes the command's exit status to
    a file (tmux's own record of it is not always collected in time)."""

    WRAPPER = (
        "import signal, subprocess, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "code = subprocess.call(sys.argv[2:], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))\n"
        "open(sys.argv[1], 'w').write(str(code))\n"
    )

    def __init__(self, tmp_path: Path, command: list[str], cwd: Path, width: int = 110, height: int = 24):
        self.socket = str(tmp_path / "tmux.sock")
        self.status = tmp_path / "exit-status"
        config = tmp_path / "tmux.conf"
        config.write_text("set -g remain-on-exit on\nset -g history-limit 1000\n")
        wrapped = [sys.executable, "-c", self.WRAPPER, str(self.status), *command]
        shell_command = " ".join(_quote(part) for part in wrapped)
        self.tmux("-f", str(config), "new-session", "-d", "-s", "get", "-x", str(width), "-y", str(height),
                  "-c", str(cwd), shell_command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=10).stdout

    def screen(self) -> list[str]:
        """The pane's lines with what scrolled off above, without trailing
        blank lines or tmux's own 'Pane is dead' line."""
        lines = self.tmux("capture-pane", "-p", "-t", "get", "-S", "-100").splitlines()
        lines = [line.rstrip() for line in lines if not line.startswith("Pane is dead")]
        while lines and not lines[-1]:
            lines.pop()
        while lines and not lines[0]:
            lines.pop(0)
        return lines

    def wait_screen(self, condition: Callable[[list[str]], bool], what: str, timeout: float = 20) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            lines = self.screen()
            if condition(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not shown within {timeout} s; screen:\n" + "\n".join(lines))
            time.sleep(0.05)

    def exit_status(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while not self.status.exists() or not self.status.read_text():
            if time.monotonic() > deadline:
                raise AssertionError("courier get did not end; screen:\n" + "\n".join(self.screen()))
            time.sleep(0.05)
        return int(self.status.read_text())

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=10)


def _quote(part: str) -> str:
    return "'" + part.replace("'", "'\\''") + "'"


@pytest.fixture
def pane(tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/setup installs it)")
    panes: list[Pane] = []

    def start(command: list[str], cwd: Path = tmp_path) -> Pane:
        p = Pane(tmp_path, command, cwd)
        panes.append(p)
        return p

    yield start
    for p in panes:
        p.close()


def test_progress_lines_while_running_then_cleared(origin, cache, out, pane):
    slow = [origin.url("/drip?size=400000&chunks=40&interval=0.1"),
            origin.url("/drip?size=300000&chunks=40&interval=0.1&seed=b")]
    quick = origin.url("/bytes/2000")
    p = pane([COURIER, "get", "--cache-dir", str(cache), "-o", "out", *slow, quick])

    def running(lines: list[str]) -> bool:
        bars = [line for line in lines if re.match(r"\s+out/drip(-1)?\s+\[[#.]{20}\]\s+\d+%", line)]
        totals = [line for line in lines if line.strip().startswith("total ")]
        return (len(bars) == 2 and all(RATE.search(b) and ETA.search(b) and " / " in b for b in bars)
                and len(totals) == 1 and bool(RATE.search(totals[0])) and bool(ETA.search(totals[0])))

    during = p.wait_screen(running, "a progress line per running download and a total")
    total = [line for line in during if line.strip().startswith("total ")][0]
    assert re.search(r"total\s+1 of 3 done\s+[\d.]+ (B|KiB|MiB) / 685.5 KiB", total), total
    assert during[0].startswith(f"{quick} -> out/2000 (2.0 KiB, ")
    assert during[-1] == total, "the total comes last"

    assert p.exit_status() == 0
    after = p.screen()
    assert len(after) == 3, after
    assert after[0].startswith(quick + " -> out/2000 ")
    assert {line.split(" -> ")[0] for line in after[1:]} == set(slow)
    assert not any("[" in line or line.strip().startswith("total") for line in after)
    assert (out / "drip").read_bytes() == pattern(400000)
    assert (out / "drip-1").read_bytes() == pattern(300000, "b")


def test_failure_on_a_terminal(origin, cache, out, pane):
    p = pane([COURIER, "get", "--cache-dir", str(cache), "-o", "out", origin.url("/status/404")])
    assert p.exit_status() == 1
    assert p.screen() == [f"{origin.url('/status/404')}: http_status: the origin answered HTTP 404"]


def test_ctrl_c_cancels_and_leaves_no_partial_file(origin, cache, out, pane):
    stalled = origin.url("/stall?after=60000")
    quick = origin.url("/bytes/100")
    p = pane([COURIER, "get", "--cache-dir", str(cache), "-o", "out", stalled, quick])
    p.wait_screen(lambda lines: any(re.match(r"\s+out/stall\s+\[", line) for line in lines)
                  and any(line.startswith(quick + " -> ") for line in lines),
                  "the stalled download's progress line")
    assert [f.name for f in out.iterdir() if f.name.endswith(".part")], "the body streams beside its destination"

    p.tmux("send-keys", "-t", "get", "C-c")
    assert p.exit_status() == 130
    screen = p.screen()
    assert f"{stalled}: cancelled: cancelled" in screen
    assert screen[0].startswith(quick + " -> out/100 ")
    assert not any(line.strip().startswith("total") for line in screen)
    assert sorted(f.name for f in out.iterdir()) == ["100"]
    assert list((cache / "tmp").iterdir()) == []


def test_no_subcommand_still_serves_json_rpc(tmp_path):
    done = subprocess.run([COURIER, "--max-active", "8", "--cache-dir", str(tmp_path / "c")],
                          input='{"jsonrpc":"2.0","id":1,"method":"initialize"}\n', capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout.splitlines()[0])
    assert response["result"]["config"]["maxActive"] == 8


def test_help_mentions_get():
    done = subprocess.run([COURIER, "--help"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0
    assert "courier get" in done.stdout and "--max-active" in done.stdout
