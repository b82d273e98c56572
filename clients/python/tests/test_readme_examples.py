"""The Python examples of README.md and clients/python/README.md run as
printed, against the built courier (``$COURIER``) and a local origin that
stands in for their example.org URLs, and leave the files they promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from .conftest import COURIER, REPO

READMES = [REPO / "README.md", REPO / "clients" / "python" / "README.md"]


def examples() -> List[pytest.param]:
    found = []
    for readme in READMES:
        blocks = re.findall(r"```python\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
        for index, block in enumerate(b for b in blocks if "courier_client" in b):
            found.append(pytest.param(block, id=f"{readme.relative_to(REPO)}#{index + 1}"))
    return found


def stand_ins(base: str) -> Dict[str, str]:
    """Each example.org URL of the examples, and what the origin serves for it."""
    return {
        "https://example.org/logo.png": f"{base}/image/png",
        "https://example.org/big.iso": f"{base}/flaky/readme-big?statuses=503,200&size=5000",
        "https://mirror.example.org/big.iso": f"{base}/flaky/readme-mirror?seed=readme-big&size=5000",
        "https://example.org/missing": f"{base}/status/404",
        "https://example.org/a.tar.gz": f"{base}/drip?size=3000&chunks=3&interval=0.05",
        "https://example.org/": f"{base}/cache?body=",
    }


@pytest.mark.parametrize("code", examples())
def test_the_example_runs(code: str, origin, env, tmp_path: Path) -> None:
    for url, local in stand_ins(origin.url("/").rstrip("/")).items():
        code = code.replace(url, local)
    child_env = {name: value for name, value in {**os.environ, **env}.items() if value is not None}
    child_env["COURIER"] = COURIER
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "False" not in run.stdout, run.stdout  # no example prints a failed outcome
    if "logo.png" in code:
        assert (tmp_path / "logo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert str(tmp_path / "logo.png") in run.stdout
