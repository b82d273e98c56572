"""The Emacs client (clients/emacs/courier.el) on Emacs's built-in jsonrpc.el:
byte-compiled without a warning, then run in `emacs --batch` against the
built courier and a local origin: downloads, cancel, error codes, progress
bound to a buffer, the indicator in the mode line, and shutdown when Emacs
exits."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")
CLIENT = REPO / "clients" / "emacs"
SCRIPT = CLIENT / "test" / "courier-test.el"
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                   "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")

CHECKS = [
    "mode line entry",
    "initialize",
    "download text",
    "download many",
    "download destination",
    "error http_status",
    "error unknown receipt",
    "error invalid params",
    "progress query",
    "cancel",
    "cancel before receipt",
    "download drip",
    "progress notifications",
    "buffer progress in mode line",
    "buffer progress cleared",
    "indicator shown",
    "indicator in mode line",
    "indicator hidden",
]


def emacs() -> str:
    path = shutil.which("emacs")
    if path is None:
        pytest.skip("emacs is not on PATH (Debian package emacs-nox; scripts/setup installs it)")
    return path


def process_gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return any(line.split()[1:2] == ["Z"] for line in status.splitlines() if line.startswith("State:"))


def editor_env(tmp_path: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg-cache"))
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def byte_compile(tmp_path: Path) -> Path:
    """Compiles a copy of courier.el (the tree stays free of .elc files) with
    every warning an error; returns the directory holding courier.elc."""
    lisp = tmp_path / "lisp"
    lisp.mkdir()
    shutil.copy(CLIENT / "courier.el", lisp / "courier.el")
    run = subprocess.run(
        [emacs(), "--batch", "-Q", "--eval",
         "(progn (setq byte-compile-error-on-warn t)"
         " (unless (byte-compile-file \"courier.el\") (kill-emacs 1)))"],
        cwd=lisp, env=editor_env(tmp_path), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Warning" not in output and "Error" not in output, output
    assert (lisp / "courier.elc").is_file(), output
    return lisp


def test_emacs_client_byte_compiles_without_warnings(tmp_path):
    byte_compile(tmp_path)


def test_emacs_client(origin, tmp_path):
    lisp = byte_compile(tmp_path)
    env = editor_env(tmp_path)
    env.update(COURIER=COURIER, COURIER_TEST_BASE=origin.url("/").rstrip("/"),
               COURIER_TEST_DIR=str(tmp_path))
    run = subprocess.run(
        [emacs(), "--batch", "-Q", "-L", str(lisp), "-l", str(SCRIPT)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)
    lines = run.stdout.splitlines()
    report = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert "courier.el loaded from courier.elc" in lines, report
    assert [line for line in lines if line.startswith("FAIL")] == [], report
    for name in CHECKS:
        assert f"ok {name}" in lines, f"check {name!r} did not pass\n{report}"
    assert "all checks passed" in lines, report
    assert run.returncode == 0, report

    # kill-emacs-hook sent shutdown and exit: courier ended by itself, with 0.
    assert "courier exit status 0" in lines, report
    pid = int(next(line.split()[-1] for line in lines if line.startswith("courier pid ")))
    assert process_gone(pid), f"courier (pid {pid}) still runs after Emacs exited"
