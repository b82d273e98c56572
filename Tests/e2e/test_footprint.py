"""What courier's binary carries: no module imports the whole of Foundation,
so ICU and the rest of Foundation stay out of the binary and off the way to
the first answer (FoundationEssentials has what courier needs)."""

from __future__ import annotations

import re
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "Sources"
WHOLE_FOUNDATION = re.compile(r"^\s*(@_exported\s+|internal\s+|public\s+|package\s+)?import\s+"
                              r"(Foundation|FoundationInternationalization|FoundationNetworking|FoundationXML)\b(?!Essentials)",
                              re.MULTILINE)


def test_no_source_imports_the_whole_of_foundation():
    swift = sorted(SOURCES.rglob("*.swift"))
    assert len(swift) > 50
    offenders = [f"{path.relative_to(SOURCES)}: {match.group(0).strip()}"
                 for path in swift for match in WHOLE_FOUNDATION.finditer(path.read_text())]
    assert offenders == []


def test_the_check_sees_an_import_of_foundation():
    assert WHOLE_FOUNDATION.search("import Dispatch\nimport Foundation\n")
    assert WHOLE_FOUNDATION.search("internal import FoundationNetworking\n")
    assert not WHOLE_FOUNDATION.search("import FoundationEssentials\n")
