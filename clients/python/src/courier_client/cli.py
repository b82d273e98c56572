"""``python3 -m courier_client URL...``: download URLs through courier and
print each outcome as one JSON line."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Any

from .client import Courier

__all__ = ["main", "default_binary"]


def default_binary() -> str:
    """``$COURIER``, else ``.build/debug/courier`` or ``.build/release/courier``
    under the current directory, else ``courier`` on ``PATH``."""
    env = os.environ.get("COURIER")
    if env:
        return env
    for config in ("debug", "release"):
        candidate = os.path.join(".build", config, "courier")
        if os.path.exists(candidate):
            return candidate
    return shutil.which("courier") or "courier"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m courier_client",
        description="Download URLs through courier and print each outcome as JSON.")
    parser.add_argument("urls", nargs="+", metavar="URL")
    parser.add_argument("--courier", default=None,
                        help="courier binary (default: $COURIER, .build/*/courier, "
                             "or courier on PATH)")
    parser.add_argument("--framing", choices=("ndjson", "lsp"), default="ndjson")
    parser.add_argument("--body", choices=("none", "text", "base64"), default="none")
    parser.add_argument("--cache-policy", default=None,
                        choices=("default", "reload", "cacheElseLoad", "cacheOnly"))
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait")
    parser.add_argument("--arg", action="append", default=[], dest="courier_args",
                        metavar="ARG", help="an argument for courier (repeatable)")
    parser.add_argument("--notifications", action="store_true",
                        help="also print every notification to stderr")
    args = parser.parse_args(argv)

    with Courier(args.courier or default_binary(), args=args.courier_args,
                 framing=args.framing, stderr=None) as courier:
        if args.notifications:
            courier.on_notification(lambda m, p: print(
                json.dumps({"method": m, "params": p}), file=sys.stderr, flush=True))
        params: dict[str, Any] = {"body": args.body}
        if args.cache_policy:
            params["cachePolicy"] = args.cache_policy
        receipts = [courier.download(url, **params)["receipt"] for url in args.urls]
        ok = True
        for receipt in receipts:
            outcome = courier.wait(receipt, args.timeout)
            ok = ok and bool(outcome.get("ok"))
            print(json.dumps(outcome, ensure_ascii=False), flush=True)
    return 0 if ok else 1
