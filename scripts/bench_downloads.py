#!/usr/bin/env python3
"""Wall time of N downloads of S bytes, each to its own destination file, from
an nginx on 127.0.0.1: courier at --max-active P against
`curl --parallel --parallel-max P` over the same URLs (the anchor), runs
alternated, median of R runs each."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "clients", "python", "src"))

from courier_client import Courier  # noqa: E402
from nginx_origin import NginxOrigin  # noqa: E402

def start_nginx(root: str, count: int, size: int) -> NginxOrigin:
    os.makedirs(f"{root}/www/f", exist_ok=True)
    for index in range(count):
        with open(f"{root}/www/f/{index}", "wb") as file:
            file.write(os.urandom(size))
    return NginxOrigin(root).start()


def fresh_dir(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def run_curl(base: str, count: int, parallel: int, out: str) -> float:
    config = os.path.join(out, "..", "curl.config")
    with open(config, "w") as file:
        for index in range(count):
            file.write(f'url = "{base}/f/{index}"\noutput = "{out}/{index}"\n')
    start = time.perf_counter()
    subprocess.run(["curl", "--silent", "--no-progress-meter", "--fail", "--parallel", "--parallel-max", str(parallel), "-K", config],
                   check=True)
    return time.perf_counter() - start


def run_courier(binary: str, base: str, count: int, parallel: int, out: str, cache: str,
                extra: tuple[str, ...] = ()) -> float:
    done = threading.Event()
    finished: list[dict] = []

    def on_notification(method: str, params) -> None:
        if method == "download/finished":
            finished.append(params["outcome"])
            if len(finished) == count:
                done.set()

    start = time.perf_counter()
    args = ["--cache-dir", cache, "--max-active", str(parallel), "--log-level", "error", *extra]
    with Courier(binary, args=args) as courier:
        courier.on_notification(on_notification)
        batch = [{"jsonrpc": "2.0", "id": index, "method": "download",
                  "params": {"url": f"{base}/f/{index}", "destination": f"{out}/{index}"}} for index in range(count)]
        courier.send_message(batch)
        if not done.wait(120):
            raise RuntimeError(f"only {len(finished)} of {count} downloads finished")
        elapsed = time.perf_counter() - start
        failures = [outcome for outcome in finished if not outcome["ok"]]
        if failures:
            raise RuntimeError(f"{len(failures)} downloads failed, e.g. {failures[0]}")
    return elapsed


def verify(root: str, out: str, count: int) -> None:
    for index in (0, count // 2, count - 1):
        with open(f"{root}/www/f/{index}", "rb") as a, open(f"{out}/{index}", "rb") as b:
            if a.read() != b.read():
                raise RuntimeError(f"file {index} differs from the origin's")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--courier", default=None)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where the origin's files, the destinations and the cache go (default: /dev/shm, a "
                             "tmpfs, so the file system's inode allocator is not what is measured)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()

    binary = args.courier or next(
        (path for path in (".build/release/courier", ".build/debug/courier") if os.path.exists(path)), None)
    if binary is None:
        print("no courier binary: run swift build -c release", file=sys.stderr)
        return 1
    root = tempfile.mkdtemp(prefix="courier-bench-", dir=args.dir)
    os.chmod(root, 0o755)
    nginx = start_nginx(root, args.count, args.size)
    base = nginx.base_url
    # nginx answers with ETag and Last-Modified, so by default courier also
    # stores every response in both cache tiers; "no cache" turns both off.
    variants = {"courier": (), "courier, no cache": ("--memory-capacity", "0", "--disk-capacity", "0")}
    times: dict[str, list[float]] = {"curl": [], **{name: [] for name in variants}}
    try:
        for run in range(args.runs):
            for name in times:
                # A new directory each run: creating thousands of files where as
                # many were just deleted makes ext4 search its inode table
                # (recently_deleted), which would measure the file system.
                out = fresh_dir(f"{root}/out-{run}-{name.replace(' ', '').replace(',', '')}")
                if name == "curl":
                    elapsed = run_curl(base, args.count, args.parallel, out)
                else:
                    elapsed = run_courier(binary, base, args.count, args.parallel, out,
                                          fresh_dir(f"{root}/cache-{run}-{len(times[name])}-{name[-3:]}"),
                                          variants[name])
                verify(root, out, args.count)
                times[name].append(elapsed)
                print(f"run {run + 1}: {name:18} {elapsed * 1000:8.1f} ms", file=sys.stderr)
    finally:
        nginx.stop()
        shutil.rmtree(root, ignore_errors=True)

    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.count} downloads of {args.size} B to their own files in {args.dir or tempfile.gettempdir()}, "
          f"{args.parallel} at once, median of {args.runs} (binary: {binary})")
    for name, median in medians.items():
        label = "curl --parallel (anchor)" if name == "curl" else name
        ratio = "" if name == "curl" else f"   ratio {median / medians['curl']:.2f}x"
        print(f"  {label:26} {median * 1000:8.1f} ms{ratio}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"count": args.count, "size": args.size, "parallel": args.parallel, "binary": binary,
                       "ms": {name: [t * 1000 for t in values] for name, values in times.items()},
                       "ratio": {name: medians[name] / medians["curl"] for name in variants}}, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
