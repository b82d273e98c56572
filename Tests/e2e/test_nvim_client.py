"""The Neovim client (clients/nvim) in headless Neovim, against the built
courier and a local origin: a courier that cannot run, downloads, cancel,
error codes, progress bound to a buffer, the indicator and a download
waiting to be retried in the statusline,
:CourierDownload's destination, and shutdown when Neovim exits."""

from __future__ import annotations

import subprocess

from editor_checks import COURIER, REPO, assert_checks, editor, editor_env

CLIENT = REPO / "clients" / "nvim"
SCRIPT = CLIENT / "test" / "courier_test.lua"

CHECKS = [
    "plugin commands",
    "file names from URLs",
    "cannot run names the binary",
    "cannot run is shown",
    "command names the binary",
    "exit at once names the binary",
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
    "retry in statusline",
    "retry cleared",
    "retrying in statusline",
    "command asks for a destination",
    "command cancelled",
    "command takes a destination",
    "relative destination",
    "raw download leaves nothing",
]


def test_nvim_client(origin, tmp_path):
    env = editor_env(tmp_path, COURIER=COURIER, COURIER_TEST_BASE=origin.url("/").rstrip("/"),
                     COURIER_TEST_DIR=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "xdg-state"),
                     XDG_DATA_HOME=str(tmp_path / "xdg-data"))
    run = subprocess.run(
        [editor("nvim", "neovim"), "--headless", "-u", "NONE", "-i", "NONE",
         "--cmd", f"set rtp^={CLIENT}", "-c", f"luafile {SCRIPT}"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120)
    assert_checks(run, CHECKS, exited="courier exit code 0 signal 0")
