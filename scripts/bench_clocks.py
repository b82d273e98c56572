#!/usr/bin/env python3
"""W2 (or W1) timed two ways in one alternation with curl: by
`scripts/bench`'s clock (from the moment before courier is spawned to the
last `download/finished`) and by a pipe client timed as a whole process,
from its interpreter's start to its exit, split into its parts.

The whole client does what `scripts/bench` does (one batch, counting
`download/finished` bytes, then `shutdown` and `exit`) and prints its
`CLOCK_MONOTONIC` stamps, so its time splits into its own start (the
interpreter, its imports, encoding the batch), courier's spawn to the last
file, courier's `shutdown` to its exit, and the client's own exit.

    scripts/bench_clocks.py [--courier PATH] [--runs 11] [--workload w2|w1] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_compare  # noqa: E402
from nginx_origin import NginxOrigin  # noqa: E402

# The whole client: argv is the courier binary, a file of "url\tdestination"
# lines, the parallelism and the cache directory; it prints its stamps.
CLIENT = r"""
import time
main = time.monotonic()
import json, os, subprocess, sys, threading
binary, listing, parallel, cache = sys.argv[1:5]
pairs = [line.split("\t") for line in open(listing).read().splitlines()]
payload = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "download", "params": {"url": u, "destination": d}}
                      for i, (u, d) in enumerate(pairs)], separators=(",", ":")).encode() + b"\n"
finished = b'"method":"download/finished"'
spawn = time.monotonic()
proc = subprocess.Popen([binary, "--cache-dir", cache, "--max-active", parallel, "--log-level", "error",
                         "--framing", "ndjson"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
threading.Thread(target=proc.stdin.write, args=(payload,), daemon=True).start()
seen, tail = 0, b""
while seen < len(pairs):
    chunk = os.read(proc.stdout.fileno(), 1 << 20)
    if not chunk:
        sys.exit(f"courier's output ended after {seen} downloads")
    data = tail + chunk
    seen += data.count(finished)
    tail = data[-(len(finished) - 1):]
done = time.monotonic()
proc.stdin.write(b'{"jsonrpc":"2.0","id":"end","method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n')
proc.stdin.close()
proc.stdout.read()
proc.wait()
print(json.dumps({"main": main, "spawn": spawn, "done": done, "exit": time.monotonic()}))
"""

WORKLOADS = {"w1": (2000, 8192, 8), "w2": (200, 1 << 20, 4)}
PARTS = ("curl", "bench's clock", "whole client", "client start (interpreter, batch)",
         "courier spawn to last finished", "courier shutdown to exit", "client's exit")


def whole_client(binary: str, pairs: list[tuple[str, str]], parallel: int, cache: str, work: str) -> dict[str, float]:
    """Runs the whole client; returns its parts in seconds."""
    listing = os.path.join(work, "clocks.list")
    with open(listing, "w") as file:
        file.writelines(f"{url}\t{out}\n" for url, out in pairs)
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-c", CLIENT, binary, listing, str(parallel), cache],
                         capture_output=True, text=True, env=bench_compare.NO_PROXY_ENV, timeout=600)
    end = time.monotonic()
    if run.returncode != 0:
        raise RuntimeError(f"the whole client failed: {run.stderr.strip()}")
    stamps = json.loads(run.stdout)
    return {"whole client": end - start, "client start (interpreter, batch)": stamps["spawn"] - start,
            "courier spawn to last finished": stamps["done"] - stamps["spawn"],
            "courier shutdown to exit": stamps["exit"] - stamps["done"], "client's exit": end - stamps["exit"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--courier", default=str(HERE.parent / ".build-release/release/courier"))
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="w2")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = parser.parse_args(argv)
    binary = os.path.abspath(args.courier)
    count, size, parallel = WORKLOADS[args.workload]

    root = tempfile.mkdtemp(prefix="courier-clocks-", dir=args.dir)
    os.chmod(root, 0o755)
    figures: dict[str, list[float]] = {}
    nginx = None
    try:
        os.makedirs(f"{root}/www/files")
        for i in range(count):
            bench_compare.write_random(f"{root}/www/files/{i}", size)
        nginx = NginxOrigin(root).start()
        print(f"{args.workload}, {count} × {size} B, {parallel} at a time; load average "
              f"{os.getloadavg()[0]:.2f}", file=sys.stderr)
        subjects = ["curl", "bench", "whole"]
        for run in range(args.runs):
            shift = run % len(subjects)
            for subject in subjects[shift:] + subjects[:shift]:
                os.sync()
                out = bench_compare.fresh_dir(f"{root}/out-{subject}-{run}")
                cache = bench_compare.fresh_dir(f"{root}/cache-{subject}-{run}")
                pairs = [(nginx.url(f"/files/{i}"), f"{out}/{i}") for i in range(count)]
                if subject == "curl":
                    parts = {"curl": bench_compare.curl_transfers(pairs, parallel, root).seconds}
                elif subject == "bench":
                    parts = {"bench's clock": bench_compare.courier_transfers(binary, pairs, parallel, cache).seconds}
                else:
                    parts = whole_client(binary, pairs, parallel, cache, root)
                    bench_compare.verify([f"{root}/www/files/{i}" for i in range(count)], [o for _, o in pairs])
                for name, seconds in parts.items():
                    figures.setdefault(name, []).append(seconds * 1000)
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(cache, ignore_errors=True)
            print(f"  run {run + 1}/{args.runs}: " + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in figures.items())
                  + f"   (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(root, ignore_errors=True)

    curl = statistics.median(figures["curl"])
    print(f"medians of {args.runs} alternated runs; load average {os.getloadavg()[0]:.2f} after")
    for name in PARTS:
        median = statistics.median(figures[name])
        print(f"{name:32} {median:9.1f} ms  {median / curl:5.2f}× curl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
