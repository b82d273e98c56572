#!/usr/bin/env python3
"""Where W1's time goes: system calls per download for courier, curl and
aria2c (`strace -f -c`), and courier's hottest functions (`perf record -e
cpu-clock -g`, or callgrind with --callgrind).

W1 is scripts/bench_compare.py's: N downloads of 8 KiB from a loopback nginx,
8 at a time, each to its own destination, run once per tool under the
profiler; outputs and cache on --dir (tmpfs) or, with --disk, on
--disk-dir. courier runs with its default settings (both cache tiers on) and
is driven as in bench_compare.py: every request written at once through a
raw pipe. System-call counts are divided by N; the counts of start-up alone
(courier to the `initialize` answer and out, `curl --version`) are given
beside them.

    scripts/bench_profile.py [--courier PATH] [--count 2000] [--disk]
        [--strace] [--perf] [--callgrind] [--top 25] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_compare as bc  # noqa: E402
from nginx_origin import NginxOrigin  # noqa: E402

ROW = re.compile(r"^\s*(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+)\s+(\d+)\s+(\d+)?\s*(\S+)\s*$")


def parse_strace(path: str) -> dict[str, int]:
    """Calls by system call from an `strace -c` summary."""
    calls: dict[str, int] = {}
    for line in Path(path).read_text().splitlines():
        m = ROW.match(line)
        if m and m.group(6) != "total":
            calls[m.group(6)] = int(m.group(4))
    return calls


def strace_prefix(path: str) -> list[str]:
    return ["strace", "-f", "-c", "-o", path]


def run_tool(tool: str, binary: str, base: str, count: int, work: str, prefix: list[str]) -> None:
    out = bc.fresh_dir(f"{work}/out-{tool}")
    pairs = [(f"{base}/w1/{i}", f"{out}/{i}") for i in range(count)]
    try:
        if tool == "curl":
            bc.curl_transfers(pairs, 8, work, prefix)
        elif tool == "aria2c":
            bc.aria2c_transfers(pairs, 8, work, prefix)
        else:
            cache = bc.fresh_dir(f"{work}/cache-{tool}")
            bc.courier_transfers(binary, pairs, 8, cache, (), prefix, timeout=1800)
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def startup_calls(binary: str, work: str, out: str) -> dict[str, dict[str, int]]:
    cache = bc.fresh_dir(f"{work}/startup-cache")
    path = f"{out}/strace-startup-courier.txt"
    argv = [*strace_prefix(path), binary, "--cache-dir", cache, "--log-level", "error", "--framing", "ndjson"]
    subprocess.run(argv, input=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
                              b'{"jsonrpc":"2.0","id":2,"method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n',
                   stdout=subprocess.DEVNULL, check=True)
    curl_path = f"{out}/strace-startup-curl.txt"
    subprocess.run([*strace_prefix(curl_path), "curl", "--version"], stdout=subprocess.DEVNULL, check=True)
    return {"courier": parse_strace(path), "curl": parse_strace(curl_path)}


def syscall_table(per_tool: dict[str, dict[str, int]], startup: dict[str, dict[str, int]], count: int,
                  top: int) -> str:
    tools = list(per_tool)
    names = sorted({n for calls in per_tool.values() for n in calls},
                   key=lambda n: -max(per_tool[t].get(n, 0) for t in tools))
    head = ["system call"] + [f"{t} /download" for t in tools] + [f"{t} start-up" for t in startup]
    rows = [head]
    totals = ["total"] + [f"{sum(per_tool[t].values()) / count:.1f}" for t in tools] + \
             [str(sum(startup[t].values())) for t in startup]
    for name in names[:top]:
        rows.append([name] + [f"{per_tool[t].get(name, 0) / count:.2f}" for t in tools] +
                    [str(startup[t].get(name, 0)) for t in startup])
    rows.append(totals)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"
             for r in rows]
    lines.insert(1, "| " + " | ".join(("-" * w) if i == 0 else ("-" * (w - 1) + ":") for i, w in enumerate(widths)) + " |")
    return "\n".join(lines)


def demangle(text: str) -> str:
    swift = shutil.which("swift-demangle") or shutil.which("swift")
    if not swift:
        return text
    argv = [swift, "--simplified"] if swift.endswith("swift-demangle") else [swift, "demangle", "--simplified"]
    try:
        return subprocess.run(argv, input=text, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return text


def compact(report: str) -> str:
    """perf pads its columns to the mangled names' width; close the gaps."""
    return "\n".join(re.sub(r" {2,}", "  ", line).rstrip(" -") for line in report.splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--courier", help="the courier binary (default: .build-release/release/courier)")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--disk", action="store_true", help="outputs and cache on --disk-dir")
    parser.add_argument("--disk-dir", default="/var/tmp")
    parser.add_argument("--tools", default="courier,curl,aria2c", help="for --strace (default courier,curl,aria2c)")
    parser.add_argument("--strace", action="store_true", help="system calls per download")
    parser.add_argument("--perf", action="store_true", help="courier under perf record -e cpu-clock -g")
    parser.add_argument("--callgrind", action="store_true", help="courier under valgrind --tool=callgrind")
    parser.add_argument("--top", type=int, default=40, help="rows to print")
    parser.add_argument("--out", default=None, help="keep the raw profiles here (default: a temporary directory)")
    args = parser.parse_args(argv)
    if not (args.strace or args.perf or args.callgrind):
        args.strace = args.perf = True
    binary = os.path.abspath(args.courier or HERE.parent / ".build-release/release/courier")
    out = args.out or tempfile.mkdtemp(prefix="courier-profile-")
    os.makedirs(out, exist_ok=True)

    root = tempfile.mkdtemp(prefix="courier-bench-", dir=args.dir)
    os.chmod(root, 0o755)
    work = tempfile.mkdtemp(prefix="courier-bench-", dir=args.disk_dir) if args.disk else root
    nginx = None
    where = f"{args.disk_dir} (disk)" if args.disk else f"{args.dir} (tmpfs)"
    try:
        os.makedirs(f"{root}/www/w1")
        for i in range(args.count):
            bc.write_random(f"{root}/www/w1/{i}", 8192)
        nginx = NginxOrigin(root).start()
        if args.strace:
            tools = args.tools.split(",")
            per_tool: dict[str, dict[str, int]] = {}
            for tool in tools:
                path = f"{out}/strace-{tool}{'-disk' if args.disk else ''}.txt"
                run_tool(tool, binary, nginx.base_url, args.count, work, strace_prefix(path))
                per_tool[tool] = parse_strace(path)
            startup = startup_calls(binary, root, out)
            print(f"\nW1 under strace -f -c: {args.count} × 8 KiB, 8 at a time, outputs and cache on {where}; "
                  f"calls per download (start-up alone: whole calls)")
            print(syscall_table(per_tool, startup, args.count, args.top))
        if args.perf:
            data = f"{out}/perf{'-disk' if args.disk else ''}.data"
            run_tool("courier", binary, nginx.base_url, args.count, work,
                     ["perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", data, "--"])
            for title, extra in (("self time, by library", ["--no-children", "--sort", "dso"]),
                                 ("self time", ["--no-children", "--sort", "dso,symbol"]),
                                 ("time with callees", ["--children", "--sort", "dso,symbol"])):
                report = subprocess.run(["perf", "report", "-i", data, "--stdio", "-g", "none",
                                         "--percent-limit", "0.5", *extra],
                                        capture_output=True, text=True).stdout
                lines = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
                print(f"\ncourier on W1 ({where}), perf cpu-clock, top entries by {title}:")
                print(compact(demangle("\n".join(lines[:args.top]))))
            print(f"(perf data: {data})")
        if args.callgrind:
            data = f"{out}/callgrind{'-disk' if args.disk else ''}.out"
            run_tool("courier", binary, nginx.base_url, args.count, work,
                     ["valgrind", "--tool=callgrind", f"--callgrind-out-file={data}"])
            report = subprocess.run(["callgrind_annotate", data], capture_output=True, text=True).stdout
            print(f"\ncourier on W1 ({where}), callgrind, top entries by instructions:")
            print(compact(demangle("\n".join(report.splitlines()[:args.top + 20]))))
    finally:
        if nginx is not None:
            nginx.stop()
        shutil.rmtree(root, ignore_errors=True)
        if work != root:
            shutil.rmtree(work, ignore_errors=True)
    print(f"raw profiles in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
