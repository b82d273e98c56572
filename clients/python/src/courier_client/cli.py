"""``python3 -m courier_client [-o FILE | -d DIR] URL...``: download URLs
through courier into files and print each outcome as one JSON line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ._common import CourierNotFound, file_name
from .client import Courier

__all__ = ["main", "default_binary"]

EXAMPLES = """\
examples:
  python3 -m courier_client https://example.org/logo.png           saves ./logo.png
  python3 -m courier_client -o icon.png https://example.org/logo.png
  python3 -m courier_client -d downloads URL1 URL2                 saves into downloads/
  python3 -m courier_client --body text -o page.html https://example.org/

Each outcome is printed as one JSON line; its "path" is the file written.
The exit status is 0 when every download succeeded, 1 when one failed, 2
for a usage error or when courier cannot be started.
"""


def default_binary() -> str | None:
    """``$COURIER``, else ``.build/debug/courier`` or ``.build/release/courier``
    under the current directory; None leaves it to the client (``courier``
    on ``PATH``)."""
    env = os.environ.get("COURIER")
    if env:
        return env
    for config in ("debug", "release"):
        candidate = os.path.join(".build", config, "courier")
        if os.path.exists(candidate):
            return candidate
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m courier_client",
        description="Download URLs through courier into files and print each outcome as JSON.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("urls", nargs="+", metavar="URL")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", metavar="FILE",
                       help="save the body of the one URL as FILE")
    where.add_argument("-d", "--output-dir", metavar="DIR", default=".",
                       help="save each body in DIR, named after the last segment of its "
                            "URL's path (default: the current directory)")
    parser.add_argument("--courier", default=None,
                        help="courier binary (default: $COURIER, .build/*/courier, "
                             "or courier on PATH)")
    parser.add_argument("--framing", choices=("ndjson", "lsp"), default="ndjson")
    parser.add_argument("--body", choices=("none", "text", "base64"), default="none",
                        help="also put the body into the printed outcome")
    parser.add_argument("--cache-policy", default=None,
                        choices=("default", "reload", "cacheElseLoad", "cacheOnly"))
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="courier's limit for each transfer (default: courier's --timeout)")
    parser.add_argument("--arg", action="append", default=[], dest="courier_args",
                        metavar="ARG", help="an argument for courier (repeatable)")
    parser.add_argument("--notifications", action="store_true",
                        help="also print every notification to stderr")
    args = parser.parse_args(argv)

    if args.output is not None:
        if len(args.urls) > 1:
            parser.error("-o FILE saves one URL; use -d DIR for several")
        destinations = [os.path.abspath(args.output)]
    else:
        destinations = [os.path.abspath(os.path.join(args.output_dir, file_name(url)))
                        for url in args.urls]
        first_url: dict[str, str] = {}
        for url, destination in zip(args.urls, destinations):
            if destination in first_url:
                parser.error(f"{first_url[destination]} and {url} would both be saved as "
                             f"{destination}; download them with -o each")
            first_url[destination] = url

    params: dict[str, Any] = {"body": args.body}
    if args.cache_policy:
        params["cachePolicy"] = args.cache_policy
    if args.timeout is not None:
        params["timeout"] = args.timeout
    try:
        courier = Courier(args.courier or default_binary(), args=args.courier_args,
                          framing=args.framing, stderr=None)
    except CourierNotFound as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 2
    with courier:
        if args.notifications:
            courier.on_notification(lambda m, p: print(
                json.dumps({"method": m, "params": p}), file=sys.stderr, flush=True))
        receipts = [courier.download(url, destination=destination, **params)["receipt"]
                    for url, destination in zip(args.urls, destinations)]
        ok = True
        for receipt in receipts:
            outcome = courier.wait(receipt)
            ok = ok and bool(outcome.get("ok"))
            print(json.dumps(outcome, ensure_ascii=False), flush=True)
    return 0 if ok else 1
