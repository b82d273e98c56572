"""The README's first examples, run exactly as printed: each `$` line of its
first console blocks goes to bash as it stands, and what comes out must have
the shape the README shows. example.org is played by the test origin, which
courier reaches as an HTTP proxy (`http_proxy`, which libcurl honours), and
`swift build` by a link to the binary under test where the build puts it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import COURIER, PROXY_VARIABLES

REPO = Path(__file__).resolve().parents[2]

# What example.org's front page starts and ends with, at its size (1256
# bytes).
_HEAD = "<!doctype html>\n<html>\n<head>\n    <title>Example Domain</title>\n</head>\n<body>\n"
_TAIL = "<p>This domain is for use in illustrative examples in documents.</p>\n</body>\n</html>\n"
EXAMPLE_PAGE = _HEAD + "\n" * (1256 - len(_HEAD) - len(_TAIL)) + _TAIL


def console_blocks(markdown: str) -> list[list[str]]:
    """The lines of every ```console block, in order."""
    return [block.splitlines() for block in re.findall(r"^```console\n(.*?)^```$", markdown, re.S | re.M)]


def commands_and_output(block: list[str]) -> tuple[list[str], list[str]]:
    commands = [line[2:] for line in block if line.startswith("$ ")]
    output = [line for line in block if not line.startswith("$ ")]
    return commands, output


def shape(printed: str) -> re.Pattern:
    """A printed line as a pattern: `…` stands for anything, and a number
    before a unit (`1.2 KiB`, `0.2 s`) for any number; the rest is exact."""
    pattern = ""
    for part in re.split(r"(…|\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|s)\b)", printed):
        if part == "…":
            pattern += ".*"
        elif re.fullmatch(r"\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|s)", part):
            pattern += r"\d+(?:\.\d+)? " + re.escape(part.split(" ")[1])
        else:
            pattern += re.escape(part)
    return re.compile(pattern)


@pytest.fixture
def run_as_printed(origin, tmp_path):
    """Runs README command lines in bash, in a directory where
    `.build/debug/courier` and `courier` on PATH are the binary under test,
    with example.org served by the origin."""
    origin.set_resource("/", EXAMPLE_PAGE, headers={"Content-Type": "text/html; charset=UTF-8"})
    work = tmp_path / "work"
    (work / ".build" / "debug").mkdir(parents=True)
    (work / ".build" / "debug" / "courier").symlink_to(os.path.abspath(COURIER))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "courier").symlink_to(os.path.abspath(COURIER))
    env = {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}
    env.update(http_proxy=origin.url("/").rstrip("/"), XDG_CACHE_HOME=str(tmp_path / "xdg-cache"),
               PATH=f"{bin_dir}:{os.environ['PATH']}")

    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)

    run.work = work  # type: ignore[attr-defined]
    return run


def test_the_first_example_is_a_pipe_that_works(run_as_printed, origin):
    # Given the README's first example
    commands, printed = commands_and_output(console_blocks((REPO / "README.md").read_text())[0])
    assert commands[0] == "swift build", commands
    [pipe] = commands[1:]
    assert "| .build/debug/courier" in pipe and '"wait":true' in pipe and "shutdown" not in pipe

    # When it runs as printed, nothing added
    done = run_as_printed(pipe)

    # Then courier downloads, writes what the README shows, says nothing on
    # stderr and exits with 0
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert len(lines) == len(printed), done.stdout
    for line, expected in zip(lines, printed):
        assert shape(expected).fullmatch(line), f"{line[:300]!r} does not look like {expected!r}"
    assert EXAMPLE_PAGE.replace("\n", "\\n") in lines[1]
    assert origin.hits("/") == 1


def test_the_terminal_example_works(run_as_printed):
    blocks = console_blocks((REPO / "README.md").read_text())
    [block] = [block for block in blocks if any(line.startswith("$ courier get ") for line in block)][:1]
    commands, printed = commands_and_output(block)
    [command] = commands

    done = run_as_printed(command)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines() + done.stderr.splitlines()
    assert len(lines) == len(printed), lines
    for line, expected in zip(lines, printed):
        assert shape(expected).fullmatch(line), f"{line!r} does not look like {expected!r}"
    assert (run_as_printed.work / "example.html").read_text() == EXAMPLE_PAGE
