"""The Neovim client (clients/nvim) in headless Neovim, against the built
courier and a local origin: downloads, cancel, error codes, progress bound
to a buffer, the indicator in the statusline, and shutdown when Neovim exits."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")
CLIENT = REPO / "clients" / "nvim"
SCRIPT = CLIENT / "test" / "courier_test.lua"
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                   "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")

CHECKS = [
    "plugin commands",
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
    "buffer progress in statusline",
    "buffer progress cleared",
    "indicator shown",
    "indicator in statusline",
    "indicator hidden",
]


def nvim() -> str:
    path = shutil.which("nvim")
    if path is None:
        pytest.skip("nvim is not on PATH (Debian package neovim; scripts/setup installs it)")
    return path


def process_gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return any(line.split()[1:2] == ["Z"] for line in status.splitlines() if line.startswith("State:"))


def test_nvim_client(origin, tmp_path):
    editor = nvim()
    env = {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}
    env.update(COURIER=COURIER, COURIER_TEST_BASE=origin.url("/").rstrip("/"),
               COURIER_TEST_DIR=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "xdg-cache"),
               XDG_STATE_HOME=str(tmp_path / "xdg-state"), XDG_DATA_HOME=str(tmp_path / "xdg-data"))
    run = subprocess.run(
        [editor, "--headless", "-u", "NONE", "-i", "NONE",
         "--cmd", f"set rtp^={CLIENT}", "-c", f"luafile {SCRIPT}"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)
    lines = run.stdout.splitlines()
    report = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert [line for line in lines if line.startswith("FAIL")] == [], report
    for name in CHECKS:
        assert f"ok {name}" in lines, f"check {name!r} did not pass\n{report}"
    assert "all checks passed" in lines, report
    assert run.returncode == 0, report

    # VimLeavePre sent shutdown and exit: courier ended by itself, with 0.
    assert "courier exit code 0 signal 0" in lines, report
    pid = int(next(line.split()[-1] for line in lines if line.startswith("courier pid ")))
    assert process_gone(pid), f"courier (pid {pid}) still runs after Neovim exited"
