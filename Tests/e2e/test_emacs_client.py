"""The Emacs client (clients/emacs/courier.el) on Emacs's built-in jsonrpc.el:
byte-compiled without a warning, then run in `emacs --batch` against the
built courier and a local origin: a courier that cannot run, downloads,
cancel, error codes, progress bound to a buffer, the indicator and a download
waiting to be retried in the mode line, `courier-download-file`'s
destination, and shutdown when Emacs exits."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from editor_checks import COURIER, REPO, assert_checks, editor, editor_env

CLIENT = REPO / "clients" / "emacs"
SCRIPT = CLIENT / "test" / "courier-test.el"

CHECKS = [
    "file names from URLs",
    "cannot run names the binary",
    "cannot run a file that is not executable",
    "exit at once names the binary",
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
    "retry in mode line",
    "retry cleared",
    "command asks for a destination",
    "relative destination",
    "raw download leaves nothing",
]


def emacs() -> str:
    return editor("emacs", "emacs-nox")


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
    env = editor_env(tmp_path, COURIER=COURIER, COURIER_TEST_BASE=origin.url("/").rstrip("/"),
                     COURIER_TEST_DIR=str(tmp_path))
    run = subprocess.run(
        [emacs(), "--batch", "-Q", "-L", str(lisp), "-l", str(SCRIPT)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)
    lines = assert_checks(run, CHECKS, exited="courier exit status 0")
    assert "courier.el loaded from courier.elc" in lines
