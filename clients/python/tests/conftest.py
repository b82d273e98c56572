"""Fixtures for the client's tests: the real courier binary (``$COURIER``,
default ``.build/debug/courier``) and a real origin on 127.0.0.1."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.append(str(REPO / "scripts"))
try:
    import courier_client  # noqa: F401
except ImportError:  # not installed: use the source tree
    sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

from origin import Origin  # noqa: E402

COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                   "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture(scope="session")
def binary() -> str:
    if not os.access(COURIER, os.X_OK):
        pytest.fail(f"no courier binary at {COURIER}: build it, or set COURIER")
    return COURIER


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    with Origin() as o:
        yield o


@pytest.fixture
def env(tmp_path: Path) -> Dict[str, Optional[str]]:
    """courier's environment: a private cache, no proxy from the caller's."""
    values: Dict[str, Optional[str]] = {name: None for name in PROXY_VARIABLES}
    values["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    return values


@pytest.fixture
def args(tmp_path: Path) -> List[str]:
    return ["--cache-dir", str(tmp_path / "cache"), "--progress-interval", "0.05"]


@pytest.fixture
def courier_kwargs(binary: str, args: List[str], env: Dict[str, Any]) -> Dict[str, Any]:
    return {"binary": binary, "args": args, "env": env}
