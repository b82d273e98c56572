#!/usr/bin/env python3
"""Writes Sources/Courier/Resources/openrpc-checks.json: the part of
protocol/openrpc.json that courier checks requests against, without the
prose.

courier checks every request's params against the OpenRPC document, so it
parses the document before it answers its first request. That part is each
method's name and params and the components they refer to; the summaries,
descriptions, examples, results and errors are most of the document's bytes
and only `rpc.discover` needs them (it serves protocol/openrpc.json whole).
Run this after changing protocol/openrpc.json; Tests/e2e/test_protocol_doc.py
fails while the two disagree.

    scripts/openrpc_checks.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "protocol" / "openrpc.json"
CHECKS = ROOT / "Sources" / "Courier" / "Resources" / "openrpc-checks.json"

# Words of a schema or a content descriptor that say what a value is for,
# not what it may be.
PROSE = {"description", "summary", "examples", "title"}


# Keys whose value maps names to schemas: every name is kept.
NAME_MAPS = {"properties", "patternProperties", "schemas", "contentDescriptors"}


def without_prose(node, names: bool = False):
    """`node` without PROSE keys; `names`: node maps names to schemas."""
    if isinstance(node, dict):
        if names:
            return {key: without_prose(value) for key, value in node.items()}
        return {key: without_prose(value, names=key in NAME_MAPS) for key, value in node.items() if key not in PROSE}
    if isinstance(node, list):
        return [without_prose(value) for value in node]
    return node


def checks(document: dict) -> dict:
    methods = [{key: method[key] for key in ("name", "params") if key in method} for method in document["methods"]]
    components = {key: document["components"][key] for key in ("schemas", "contentDescriptors")
                  if key in document.get("components", {})}
    return without_prose({"methods": methods, "components": components})


def text(document: dict) -> str:
    return json.dumps(checks(document), separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    wanted = text(json.loads(DOCUMENT.read_text(encoding="utf-8")))
    if "--check" in argv:
        current = CHECKS.read_text(encoding="utf-8") if CHECKS.exists() else ""
        if current != wanted:
            print(f"{CHECKS.relative_to(ROOT)} is out of date: run scripts/openrpc_checks.py", file=sys.stderr)
            return 1
        return 0
    CHECKS.write_text(wanted, encoding="utf-8")
    print(f"wrote {CHECKS.relative_to(ROOT)} ({len(wanted.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
