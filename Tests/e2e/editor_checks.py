"""What the editor client tests share: finding the editor, an environment
without proxy variables, and reading the check lines an editor-side test
script prints (`ok NAME`, `FAIL ...`, `all checks passed`, `courier pid N`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import COURIER, PROXY_VARIABLES

__all__ = ["COURIER", "REPO", "editor", "editor_env", "assert_checks"]

REPO = Path(__file__).resolve().parents[2]


def editor(command: str, package: str) -> str:
    """The editor's path, or a skip naming the package that provides it."""
    path = shutil.which(command)
    if path is None:
        pytest.skip(f"{command} is not on PATH (Debian package {package}; scripts/setup installs it)")
    return path


def editor_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test's environment without proxy variables, with a home and caches
    of its own."""
    env = {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}
    (tmp_path / "home").mkdir(exist_ok=True)
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg-cache"), **extra)
    return env


def _process_gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return any(line.split()[1:2] == ["Z"] for line in status.splitlines() if line.startswith("State:"))


def assert_checks(run: subprocess.CompletedProcess, checks: list[str], exited: str) -> list[str]:
    """Every check passed, the script said so and exited 0, and courier
    ended by itself (the editor's exit hook sent shutdown and exit) with the
    line ``exited``; returns the script's lines."""
    lines = run.stdout.splitlines()
    report = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    assert [line for line in lines if line.startswith("FAIL")] == [], report
    for name in checks:
        assert f"ok {name}" in lines, f"check {name!r} did not pass\n{report}"
    assert "all checks passed" in lines, report
    assert run.returncode == 0, report
    assert exited in lines, report
    pid = int(next(line.split()[-1] for line in lines if line.startswith("courier pid ")))
    assert _process_gone(pid), f"courier (pid {pid}) still runs after the editor exited"
    return lines
