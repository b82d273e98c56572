"""``pip install clients/python`` builds the package without leaving build
output (``build/``, ``*.egg-info``) in the source tree; the installed
package is complete and typed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import REPO

SOURCE = REPO / "clients" / "python"


def test_pip_install_leaves_the_source_tree_as_it_was(tmp_path: Path) -> None:
    # Given a copy of the client's tree
    tree = tmp_path / "python"
    shutil.copytree(SOURCE, tree, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    before = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))

    # When pip installs it (offline, with the build backend of .venv)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
         "--no-build-isolation", "--target", str(tmp_path / "site"), str(tree)],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr

    # Then the tree holds what it held, and the package is installed whole
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == before
    installed = tmp_path / "site" / "courier_client"
    assert {p.name for p in (SOURCE / "src" / "courier_client").glob("*.py")} \
        <= {p.name for p in installed.glob("*.py")}
    assert (installed / "py.typed").is_file()
    assert (tmp_path / "site" / "bin" / "courier-client").is_file()
