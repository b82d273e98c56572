"""End-to-end tests of `courier get`, and of bare `courier`, on a terminal: a
tmux pane of a fixed size, whose screen is read as a person sees it (lines
wrapped by the terminal joined back), at 60 and 120 columns: the live
display fitted to the width with its numbers whole, the results, the
failures and the summary, re-runs, results sent to a file while progress
stays on the terminal, and Ctrl-C. Every wait is on what the screen shows,
with a time limit."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Callable

import pytest

from conftest import COURIER
from origin import pattern

RATE = r"\d+(\.\d)? (B|KiB|MiB)/s"
SIZES = r"\d+(\.\d)?( (B|KiB|MiB))? / \d+(\.\d)? (B|KiB|MiB)"
# A running download's line: its name, a whole bar or none, then its
# numbers, each whole.
RUNNING = re.compile(r"^  (?P<name>\S.*?)\s+(?P<bar>\[[#.]+\] )?\s*(?P<percent>\d+%)\s+(?P<sizes>" + SIZES
                     + r")\s+(?P<rate>" + RATE + r"|-- B/s)\s+(?P<eta>ETA (\d+:)?\d+:\d\d|ETA --:--)$")
# While a download's size is not known yet, the total shows the bytes
# received alone, and no ETA.
TOTAL = re.compile(r"^  total\s+(?P<done>\d+)/(?P<of>\d+)\s+(?:(?P<failed>\d+) failed\s+)?(?P<sizes>" + SIZES
                   + r"|\d+(\.\d)? (B|KiB|MiB))\s+(?P<rate>" + RATE
                   + r"|-- B/s)(?:\s+(?P<eta>ETA (\d+:)?\d+:\d\d|ETA --:--))?$")
WIDTHS = [60, 120]


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

    def __init__(self, tmp_path: Path, command: list[str], cwd: Path, width: int, number: int, height: int = 24):
        self.width = width
        self.socket = str(tmp_path / f"tmux-{number}.sock")
        self.status = tmp_path / f"exit-status-{number}"
        config = tmp_path / "tmux.conf"
        config.write_text("set -g remain-on-exit on\nset -g history-limit 1000\n")
        wrapped = [sys.executable, "-c", self.WRAPPER, str(self.status), *command]
        shell_command = " ".join(_quote(part) for part in wrapped)
        self.tmux("-f", str(config), "new-session", "-d", "-s", "get", "-x", str(width), "-y", str(height),
                  "-c", str(cwd), shell_command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True, capture_output=True,
                              text=True, timeout=10).stdout

    def rows(self) -> list[str]:
        """The pane's rows as drawn, with what scrolled off above."""
        return self.tmux("capture-pane", "-p", "-t", "get", "-S", "-200").splitlines()

    def screen(self) -> list[str]:
        """The pane's lines as a person reads them: lines the terminal
        wrapped joined back, without trailing blank lines or tmux's own
        'Pane is dead' line."""
        lines = self.tmux("capture-pane", "-p", "-J", "-t", "get", "-S", "-200").splitlines()
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
                raise AssertionError("the command did not end; screen:\n" + "\n".join(self.screen()))
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

    def start(command: list[str], width: int = 120, cwd: Path = tmp_path) -> Pane:
        p = Pane(tmp_path, command, cwd, width, len(panes))
        panes.append(p)
        return p

    yield start
    for p in panes:
        p.close()


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def get_command(cache: Path, *args: str) -> list[str]:
    return [COURIER, "get", "--cache-dir", str(cache), *args]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_live_display_fits_the_width_with_its_numbers_whole(origin, cache, tmp_path, pane, width):
    # Given a slow download, a quick one and a 404, on a terminal
    slow = origin.url("/drip?size=400000&chunks=40&interval=0.1")
    quick, missing = origin.url("/bytes/2000"), origin.url("/status/404")
    p = pane(get_command(cache, "-d", "out", slow, quick, missing), width=width)

    def running(lines: list[str]) -> bool:
        return (any(RUNNING.match(line) and re.search(RATE, line) for line in lines)
                and any(TOTAL.match(line) for line in lines))

    # When it runs
    during = p.wait_screen(running, "a progress line with a rate and a total")

    # Then each line of the display fits in a row (none is wrapped), and
    # shows every number whole, with a whole bar or none (a bar at 120
    # columns)
    display = [line for line in during if RUNNING.match(line) or TOTAL.match(line)]
    assert len(display) == 2 and all(len(line) < width for line in display), display
    [line] = [line for line in during if RUNNING.match(line)]
    match = RUNNING.match(line)
    assert match["name"] == "out/drip" and match["sizes"].endswith(" / 390.6 KiB"), line
    assert re.fullmatch(RATE, match["rate"]) and re.fullmatch(r"ETA \d+:\d\d", match["eta"]), line
    if width == 120:
        assert match["bar"] and len(match["bar"]) == 23, line
    total = TOTAL.match(during[-1])
    assert total, f"the total comes last: {during}"
    assert (total["done"], total["of"], total["failed"]) == ("2", "3", "1"), during[-1]
    assert f"{quick} -> out/2000 (2.0 KiB, " in "\n".join(during)
    assert f"{missing}: http_status: the origin answered HTTP 404" in during

    # And at the end the display is gone: the results, the failure and the
    # summary stay
    assert p.exit_status() == 1
    after = p.screen()
    assert not any(RUNNING.match(line) or TOTAL.match(line) for line in after), after
    assert any(line.startswith(f"{slow} -> out/drip (390.6 KiB, ") for line in after), after
    summary = [line for line in after if line.startswith("3 files: ")]
    assert summary and summary[0].startswith("3 files: 2 ok, 1 failed"), after
    assert re.search(r"392\.6 KiB downloaded in \d+\.\d s \(" + RATE + r"\)", " ".join(after)), after
    assert (tmp_path / "out" / "drip").read_bytes() == pattern(400000)
    save_screen(tmp_path, f"get-{width}", during, after)


def save_screen(tmp_path: Path, name: str, during: list[str], after: list[str]) -> None:
    """Keeps what the screen showed, for a person to look at
    ($COURIER_SCREENS names a directory to copy it to)."""
    text = "-- while running\n" + "\n".join(during) + "\n-- at the end\n" + "\n".join(after) + "\n"
    (tmp_path / f"{name}.screen").write_text(text)
    target = os.environ.get("COURIER_SCREENS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / f"{name}.screen").write_text(text)


def without_seconds(lines: list[str]) -> list[str]:
    """The screen's lines with the summary's time, which a loaded machine
    stretches past 0.0 s, written as T."""
    return [re.sub(r" in \d+\.\d s$", " in T s", line) for line in lines]


@pytest.mark.parametrize("width", WIDTHS)
def test_a_rerun_on_a_terminal_says_the_file_exists_and_what_to_do(origin, cache, tmp_path, pane, width):
    url = origin.url("/files/report.pdf?size=5000")
    first = pane(get_command(cache, url), width=width)
    assert first.exit_status() == 0
    first.close()
    complete = pane(get_command(cache, url), width=width)
    assert complete.exit_status() == 0
    assert without_seconds(complete.screen()) == [
        f"{url} -> report.pdf (already complete)",
        "1 file: 0 ok, 1 already complete; 0 B downloaded in T s",
    ]
    complete.close()
    (tmp_path / "report.pdf").write_bytes(b"edited")
    p = pane(get_command(cache, url), width=width)
    assert p.exit_status() == 1
    assert without_seconds(p.screen()) == [
        f"{url}: file_exists: report.pdf exists (--no-clobber skips it, --overwrite replaces it)",
        "1 file: 0 ok, 1 failed; 0 B downloaded in T s",
    ]
    save_screen(tmp_path, f"rerun-{width}", [], p.screen())
    skipped = pane(get_command(cache, "--no-clobber", url), width=width)
    assert skipped.exit_status() == 0
    assert skipped.screen()[0] == f"{url} -> report.pdf (exists, skipped)"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_download_waiting_to_be_retried_says_so_on_its_line(origin, cache, tmp_path, pane, width):
    # Given a download whose first attempt fails with a 503 and whose retry
    # waits 2 to 4 seconds
    url = origin.url("/flaky/waiting-for-retry.bin?statuses=503,200&size=20000")
    p = pane(get_command(cache, "--retry-delay", "4", url), width=width)

    # Then its line counts down the wait, whole, with the total below
    waiting = re.compile(r"^  waiting-for-retry\.bin\s+retry 1/3 in \d\.\d s(  0 B)?$")
    during = p.wait_screen(lambda lines: any(waiting.match(line) for line in lines), "the waiting retry's line")
    assert f"{url}: http_status: the origin answered HTTP 503; retry 1/3 in " in during[0], during
    assert all(len(line) < width for line in during[1:]), during
    assert re.match(r"^  total\s+0/1", during[-1]), during
    # And once the retry has succeeded, its result counts the attempts
    assert p.exit_status(timeout=30) == 0
    after = p.screen()
    assert any(line.startswith(f"{url} -> waiting-for-retry.bin (19.5 KiB, ") and line.endswith(", 2 attempts)")
               for line in after), after
    assert any(line.startswith("1 file: 1 ok (1 retried)") for line in after[-2:]), after
    save_screen(tmp_path, f"retry-{width}", during, after)


def test_results_go_to_a_file_while_progress_stays_on_the_terminal(origin, cache, tmp_path, pane):
    url = origin.url("/drip?size=300000&chunks=30&interval=0.1")
    p = pane(["sh", "-c", f"exec {shlex.quote(COURIER)} get --cache-dir {shlex.quote(str(cache))} {shlex.quote(url)} > log"])
    during = p.wait_screen(lambda lines: any(RUNNING.match(line) for line in lines), "the progress line")
    assert [line for line in during if RUNNING.match(line)][0].startswith("  drip  [")
    assert p.exit_status() == 0
    after = p.screen()
    assert len(after) == 1 and after[0].startswith("1 file: 1 ok; 293.0 KiB downloaded in "), after
    assert re.fullmatch(re.escape(f"{url} -> drip (293.0 KiB, ") + r"\d+\.\d s\)\n", (tmp_path / "log").read_text())


@pytest.mark.parametrize("width", WIDTHS)
def test_ctrl_c_cancels_says_so_in_one_word_and_leaves_no_partial_file(origin, cache, tmp_path, pane, width):
    stalled = origin.url("/stall?after=60000")
    quick = origin.url("/bytes/100")
    p = pane(get_command(cache, "-d", "out", stalled, quick), width=width)
    p.wait_screen(lambda lines: any(line.startswith("  out/stall ") for line in lines)
                  and any(line.startswith(quick + " -> ") for line in lines),
                  "the stalled download's progress line")
    out = tmp_path / "out"
    assert [f.name for f in out.iterdir() if f.name.endswith(".part")], "the body streams beside its destination"

    p.tmux("send-keys", "-t", "get", "C-c")
    assert p.exit_status() == 130
    screen = p.screen()
    assert f"{stalled}: cancelled" in screen, screen
    assert not any("cancelled: cancelled" in line for line in screen)
    assert screen[0].startswith(quick + " -> out/100 ")
    assert "interrupted: cancelling (Ctrl-C again exits at once)" in screen
    assert any(line.startswith("interrupted, 2 files: 1 ok, 1 cancelled") for line in screen), screen
    assert not any(RUNNING.match(line) or TOTAL.match(line) for line in screen)
    assert sorted(f.name for f in out.iterdir()) == ["100"]
    assert list((cache / "tmp").iterdir()) == []
    save_screen(tmp_path, f"ctrl-c-{width}", [], screen)


def test_bare_courier_on_a_terminal_says_what_it_is_then_serves(tmp_path, pane):
    # Given courier started by a person at a terminal
    p = pane([COURIER, "--cache-dir", str(tmp_path / "cache")])
    hint = ("courier: reading JSON-RPC 2.0 requests on stdin (see courier --help); "
            "to download files yourself, run: courier get URL")
    # Then it says in one line what it reads and how to download files
    p.wait_screen(lambda lines: lines == [hint], "the hint")
    # And it serves as before: a request typed in is answered, and end of
    # input (Ctrl-D) ends it with 0
    p.tmux("send-keys", "-t", "get", '{"jsonrpc":"2.0","id":1,"method":"cache/stats"}', "Enter")
    p.wait_screen(lambda lines: any(line.startswith('{"id":1,"jsonrpc":"2.0","result":{') for line in lines),
                  "the answer")
    p.tmux("send-keys", "-t", "get", "C-d")
    assert p.exit_status() == 0


def columns(text: str) -> int:
    """The columns a terminal gives `text`: two for wide characters, none
    for combining marks."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@pytest.mark.parametrize("width", WIDTHS)
def test_odd_names_read_from_stdin_keep_the_display_within_the_width(origin, cache, tmp_path, pane, width):
    # Given URLs with odd names, piped to -i -, and a slow one to keep the
    # display up
    names = {
        "/files/%E6%97%A5%E6%9C%AC%E8%AA%9E%E3%81%AE%E3%83%95%E3%82%A1%E3%82%A4%E3%83%AB.bin?size=3000": "日本語のファイル.bin",
        "/files/my%20report%20for%20the%20year%20of%20the%20long%20names.pdf?size=3000": "my report for the year of the long names.pdf",
        "/files/caf%E9.txt?size=10": "caf%E9.txt",
        "/files/dir/?size=10": "index.html",
        "/files/a%2F..%2Fb?size=10": "a_.._b",
    }
    held = ("%E6%97%A5%E6%9C%AC%E8%AA%9E-%E3%81%A8%E3%81%A6%E3%82%82%E9%95%B7%E3%81%84%E5%90%8D%E5%89%8D%E3%81%AE"
            "%E3%83%80%E3%82%A6%E3%83%B3%E3%83%AD%E3%83%BC%E3%83%89.iso")
    slow = origin.url(f"/hold/{held}?size=300000&first=1000")
    listed = "\n".join([slow, *(origin.url(path).removeprefix("http://") for path in names)]) + "\n"
    (tmp_path / "urls").write_text(listed)
    p = pane(["sh", "-c", f"exec {shlex.quote(COURIER)} get --cache-dir {shlex.quote(str(cache))} -d out -i - < urls"],
             width=width)

    # When the slow download is under way: its line fits the width, its
    # name whole or shortened in the middle, its numbers whole
    origin.wait_held(held)
    during = p.wait_screen(lambda lines: any(RUNNING.match(line) for line in lines)
                           and any(" -> out/a_.._b " in line for line in lines),
                           "the progress line, below the other results")
    [line] = [line for line in during if RUNNING.match(line)]
    assert columns(line) < width, line
    name = RUNNING.match(line)["name"]
    full = "out/日本語-とても長い名前のダウンロード.iso"
    if "…" in name:
        head, tail = name.split("…")
        assert full.startswith(head) and full.endswith(tail) and head.startswith("out/日") and tail.endswith(".iso"), line
    else:
        assert name == full, line
    total = [line for line in during if TOTAL.match(line)]
    assert total and columns(total[0]) < width, during
    origin.release(held)

    # Then every file has its safe name, and the results say so
    assert p.exit_status() == 0
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == sorted(
        [*names.values(), "日本語-とても長い名前のダウンロード.iso"])
    after = p.screen()
    for path, saved in names.items():
        assert any(line.startswith(f"{origin.url(path)} -> out/{saved} (") for line in after), (saved, after)
    assert any(line.startswith("6 files: 6 ok") for line in after), after
    save_screen(tmp_path, f"odd-names-{width}", during, after)


def test_o_with_overwrite_on_a_terminal(origin, cache, tmp_path, pane):
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "logo.png").write_bytes(b"old")
    url = origin.url("/files/image.png?size=500")
    p = pane(get_command(cache, "--overwrite", "-o", "saved/logo.png", url), width=60)
    assert p.exit_status() == 0
    assert p.screen()[0] == f"{url} -> saved/logo.png (500 B, " + p.screen()[0].rsplit(", ", 1)[1]
    assert (tmp_path / "saved" / "logo.png").read_bytes() == pattern(500, "/files/image.png")
