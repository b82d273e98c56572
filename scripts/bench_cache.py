#!/usr/bin/env python3
"""Cache-hit throughput of courier: `download` requests per second a single
client sustains for a URL the cache holds fresh, next to the transport's
messages per second over the same client path.

One URL of a local origin (scripts/origin.py on 127.0.0.1, `Cache-Control:
max-age=3600`) is warmed into the cache, then N `download` requests of it
(`wait: false`) are written pipelined, as JSON-RPC batches of --batch
requests through `Courier.send_message`, by one thread while the client's
reader thread takes the answers. The time runs from the first byte written
to the arrival of the last of the N `download/finished` notifications; every
outcome must be ok and served by the expected tier. Subjects:

- memory hit: the default memory tier holds the URL;
- disk hit: courier runs with `--memory-capacity 0`, so every hit is read
  (and checked) from the disk tier;

each with `body: "none"` (the default: the outcome names a file courier
writes for the receipt) and with `body: "base64"` (the bytes in the
notification, no file), and
- transport anchor: N requests for an unknown method (-32601) over the same
  client path, counted until the last answer arrives.

Each run starts a new courier process on a new cache directory. Each figure
is the median of --runs runs; the runs of the subjects are alternated. The
cache figures are also given as a ratio to the anchor's messages per second.
Beside each rate stands the CPU time (user and system) per request over the
same interval, of courier (from /proc) and of the client's own process (its
reader and writer threads): when the two together keep every core busy, the
rate is at most the number of cores over their sum per request.

    python3 scripts/bench_cache.py [--count N] [--runs R] [--batch B]
        [--size BYTES] [--body none|base64 ...] [--courier PATH] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "clients", "python", "src"))

from courier_client import Courier  # noqa: E402
from origin import Origin, pattern  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
METHOD = "bench/no-such-method"
NO_PROXY = {name: None for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                    "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")}


class Measured(NamedTuple):
    """One run: requests per second, and CPU microseconds per request."""

    per_second: float
    courier_us: float
    client_us: float


class CPU:
    """CPU seconds (user and system) of courier and of this process, taken
    at the start of a run and read as microseconds per request at its end."""

    TICKS = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid: int):
        self.pid = pid
        self.start = (self.courier(), self.own())

    def courier(self) -> float:
        with open(f"/proc/{self.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.TICKS

    @staticmethod
    def own() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def measured(self, count: int, seconds: float) -> Measured:
        courier, own = self.courier() - self.start[0], self.own() - self.start[1]
        return Measured(count / seconds, courier / count * 1e6, own / count * 1e6)


def cpu_figures(runs: list[Measured]) -> tuple[float, float, float]:
    """The median CPU microseconds per request of courier and of the client
    over ``runs``, and the rate their sum allows on this machine's cores."""
    courier_us = statistics.median(run.courier_us for run in runs)
    client_us = statistics.median(run.client_us for run in runs)
    return courier_us, client_us, (os.cpu_count() or 1) * 1e6 / (courier_us + client_us)


def find_courier(explicit: str | None) -> tuple[str, str]:
    """The binary to measure and its build: release when it is newer than
    every source file, else debug."""
    if explicit:
        return explicit, "given"
    if os.environ.get("COURIER"):
        return os.environ["COURIER"], "given ($COURIER)"
    release = REPO / ".build" / "release" / "courier"
    debug = REPO / ".build" / "debug" / "courier"
    newest_source = max((p.stat().st_mtime for p in (REPO / "Sources").rglob("*.swift")), default=0)
    if release.exists() and release.stat().st_mtime >= newest_source:
        return str(release), "release"
    if debug.exists():
        return str(debug), "debug"
    if release.exists():
        return str(release), "release (older than the sources)"
    raise SystemExit("no courier binary: run `swift build -c release` (or pass --courier)")


class Counter:
    """Counts `download/finished` notifications and checks their outcomes."""

    def __init__(self, source: str):
        self.source = source
        self.finished = 0
        self.bad: list[dict] = []
        self.last = 0.0
        self.done = threading.Event()
        self.target = 0

    def __call__(self, method: str, params: dict) -> None:
        if method != "download/finished":
            return
        self.finished += 1
        outcome = params["outcome"]
        if not outcome.get("ok") or outcome.get("source") != self.source:
            self.bad.append(outcome)
        if self.target and self.finished >= self.target:
            self.last = time.perf_counter()
            self.done.set()


def pipelined(c: Courier, count: int, batch: int, message: Callable[[int], dict]) -> tuple[float, list, CPU]:
    """Writes ``count`` requests in batches from a writer thread; returns the
    start time, the ids of each batch's last request, and the CPU times taken
    as the writing began."""
    started = [0.0]
    last_ids: list[int] = []
    batches = []
    for first in range(0, count, batch):
        items = [message(i) for i in range(first, min(count, first + batch))]
        batches.append(items)
        last_ids.append(items[-1]["id"])
    failure: list[BaseException] = []

    def write() -> None:
        try:
            started[0] = time.perf_counter()
            for items in batches:
                c.send_message(items)
        except BaseException as exc:  # noqa: BLE001
            failure.append(exc)

    writer = threading.Thread(target=write, name="bench-writer", daemon=True)
    cpu = CPU(c.pid)
    writer.start()
    writer.join()
    if failure:
        raise RuntimeError(f"writing failed: {failure[0]!r}")
    return started[0], last_ids, cpu


def start(binary: str, cache_dir: str, extra: list[str]) -> Courier:
    return Courier(binary, ["--cache-dir", cache_dir, *extra], env=NO_PROXY,
                   stderr=os.path.join(cache_dir, "stderr.log"), record=True)


def run_hits(binary: str, url: str, tier: str, count: int, batch: int, body: str,
             timeout: float) -> Measured:
    extra = ["--memory-capacity", "0", "--memory-after-purge", "0"] if tier == "disk" else []
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache_dir:
        c = start(binary, cache_dir, extra)
        try:
            warm = c.download(url, wait=True, body=body)["outcome"]
            if not warm.get("ok"):
                raise RuntimeError(f"warming failed: {warm!r}")
            probe = c.download(url, wait=True, body=body)["outcome"]
            if probe.get("source") != tier:
                raise RuntimeError(f"expected a {tier} hit, got {probe.get('source')!r}")
            counter = Counter(tier)
            counter.target = count
            c.on_notification(counter)
            base = 1_000_000
            started, _, cpu = pipelined(c, count, batch, lambda i: {
                "jsonrpc": "2.0", "id": base + i, "method": "download",
                "params": {"url": url, "body": body}})
            if not counter.done.wait(timeout):
                raise RuntimeError(f"{counter.finished} of {count} download/finished within {timeout} s")
            measured = cpu.measured(count, counter.last - started)
            if counter.bad:
                raise RuntimeError(f"{len(counter.bad)} unexpected outcomes, e.g. {counter.bad[0]!r}")
            stats = c.cache_stats()
            if stats["hits"] != count + 1:
                raise RuntimeError(f"cache/stats hits {stats['hits']}, expected {count + 1}")
            return measured
        finally:
            c.close(wait_timeout=30)


def run_transport(binary: str, count: int, batch: int, timeout: float) -> Measured:
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache_dir:
        c = start(binary, cache_dir, [])
        try:
            c.request("cache/stats")
            base = 1_000_000
            started, last_ids, cpu = pipelined(c, count, batch, lambda i: {
                "jsonrpc": "2.0", "id": base + i, "method": METHOD})
            deadline = time.monotonic() + timeout
            for id_ in last_ids:
                c.wait_response(id_, max(0.1, deadline - time.monotonic()))
            ended = time.perf_counter()
            measured = cpu.measured(count, ended - started)
            for entry in c.messages[-len(last_ids):]:
                items = entry.message if isinstance(entry.message, list) else [entry.message]
                if any(item.get("error", {}).get("code") != -32601 for item in items):
                    raise RuntimeError("an answer other than -32601")
            return measured
        finally:
            c.close(wait_timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000, help="requests per run (default 20000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported")
    parser.add_argument("--batch", type=int, default=1000, help="requests per JSON-RPC batch (default 1000)")
    parser.add_argument("--size", type=int, default=1024, help="bytes of the cached body (default 1024)")
    parser.add_argument("--body", choices=("none", "base64"), action="append",
                        help="the `body` param of the downloads; repeat to measure several "
                             "(default: none and base64)")
    parser.add_argument("--courier", help="binary (default: $COURIER, else .build/release/courier "
                                          "when newer than the sources, else .build/debug/courier)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per run")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args = parser.parse_args(argv)
    if args.count < 1 or args.runs < 1 or args.batch < 1:
        parser.error("--count, --runs and --batch must be at least 1")
    bodies = list(dict.fromkeys(args.body or ["none", "base64"]))

    binary, build = find_courier(args.courier)
    print(f"courier: {binary} ({build} build)", flush=True)
    print(f"{args.count:,} pipelined requests a run in batches of {args.batch:,}, "
          f"a cached body of {args.size:,} bytes, {args.runs} runs each, median", flush=True)

    with Origin() as origin:
        url = origin.set_resource("bench", pattern(args.size, "bench"), {"Cache-Control": "max-age=3600"})
        subjects: dict[str, Callable[[], Measured]] = {}
        for tier in ("memory", "disk"):
            for body in bodies:
                subjects[f"{tier} hit, body {body}"] = (
                    lambda t=tier, b=body: run_hits(binary, url, t, args.count, args.batch, b, args.timeout))
        subjects["transport (-32601)"] = lambda: run_transport(binary, args.count, args.batch, args.timeout)
        figures: dict[str, list[Measured]] = {name: [] for name in subjects}
        for i in range(args.runs):
            for name, once in subjects.items():
                run = once()
                figures[name].append(run)
                print(f"  run {i + 1}/{args.runs}: {name}: {run.per_second:,.0f} /s, CPU per request: "
                      f"courier {run.courier_us:.1f} µs, client {run.client_us:.1f} µs", file=sys.stderr, flush=True)
        origin_hits = origin.hits("/res/bench")

    results = {name: {"runs": [run.per_second for run in runs],
                      "median": statistics.median(run.per_second for run in runs),
                      **dict(zip(("courier_us", "client_us", "bound"), cpu_figures(runs)))}
               for name, runs in figures.items()}
    anchor = results["transport (-32601)"]["median"]
    for figure in results.values():
        figure["ratio_to_transport"] = figure["median"] / anchor

    print()
    cores = os.cpu_count() or 1
    print(f"{'':24} {'median /s':>12} {'vs transport':>13} {'courier µs':>11} {'client µs':>10} "
          f"{cores} cores' bound   runs (/s)")
    for name, figure in results.items():
        runs = ", ".join(f"{r:,.0f}" for r in figure["runs"])
        unit = "msg" if name.startswith("transport") else "req"
        print(f"{name:24} {figure['median']:>8,.0f} {unit}/s {figure['ratio_to_transport']:>11.2f}x "
              f"{figure['courier_us']:>11.1f} {figure['client_us']:>10.1f} {figure['bound']:>13,.0f}/s   {runs}")
    print(f"origin requests: {origin_hits} (the warm-ups only)")
    expected_origin_hits = 2 * len(bodies) * args.runs
    if origin_hits != expected_origin_hits:
        print(f"error: the origin saw {origin_hits} requests, expected {expected_origin_hits}", file=sys.stderr)
        return 1

    if args.json:
        document = {
            "benchmark": "cache",
            "courier": binary,
            "build": build,
            "count": args.count,
            "runs": args.runs,
            "batch": args.batch,
            "size": args.size,
            "bodies": bodies,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "results": {
                name.split(" (")[0].replace(", body ", "_").replace(" ", "_"): {
                    "runs_per_s": figure["runs"],
                    "median_per_s": figure["median"],
                    "ratio_to_transport": figure["ratio_to_transport"],
                    "courier_cpu_us_per_request": figure["courier_us"],
                    "client_cpu_us_per_request": figure["client_us"],
                }
                for name, figure in results.items()
            },
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
