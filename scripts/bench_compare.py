#!/usr/bin/env python3
"""courier beside curl and aria2c on one machine, in one run: the figures the
engine is judged by.

Workloads (an nginx on 127.0.0.1 serves the files; the origin's files, the
outputs and the cache directory are on --dir, a tmpfs by default):

- W1: 2,000 downloads of 8 KiB, 8 at a time, each to its own destination;
  also with the outputs and the cache directory on disk (--disk-dir), so the
  cost of writing to disk shows, and with only courier's cache directory on
  disk (its outputs on --dir), against courier's own W1; and with courier's
  requests written as 2,000 separate messages rather than one batch (W1
  separately: the Python client's way), which courier may start on before
  the last is parsed, alternated turn by turn with courier's W1 as a batch;
- W1T: W1 over https from a second nginx offering HTTP/2, its certificate
  for 127.0.0.1 signed by a CA that openssl makes for the run (curl
  `--cacert`, aria2c `--ca-certificate`, courier `--ca-file`); curl must
  use HTTP/2 on one file first, and every courier outcome must name HTTP/2
  (aria2c speaks HTTP/1.1 only);
- W2: 200 downloads of 1 MiB, 4 at a time, each to its own destination;
- W3: one download of 1 GiB (--w3-size), one stream; also the peak RSS;
- W7: rate accuracy: 4 downloads of 8 MiB at once under a limit of 8 MiB/s
  for all of them (courier `--max-download-rate 8MiB`, aria2c
  `--max-overall-download-limit=8M`; curl has no limit for all transfers
  together, so it runs with `--limit-rate 2M`, its per-transfer limit at a
  quarter each): 4 s is exact, and courier's median must be within 5 % of it,
  its downloads ending together (first to last within 5 % of 4 s);
- start-up: spawn to the answer of `initialize`, against `curl --version`
  (spawn to exit);
- memory-cache hits pipelined by one client, against the transport's own
  messages per second (an unknown method, -32601) through the same client
  (scripts/bench_cache.py's measurements); and disk-cache hits the same way
  with the memory tier off (`--memory-capacity 0`).
- W6: one 256 MiB file (--w6-size) from an origin that closes every
  connection cleanly after 32 MiB of body (--w6-cut), against curl and
  aria2c with retries and resume; time, bytes the origin sent, and whether
  the output is right (scripts/bench_flaky.py).

curl runs as `curl --parallel --parallel-max P -K config` (one process, one
transfer per URL and output), aria2c as `aria2c -j P -x 1 -s 1 -i list`;
courier runs with its default settings (both cache tiers on, a fresh cache
directory each run) at `--max-active P`.

courier is driven by a raw pipe writer, not by the Python client: the whole
set of `download` requests is written at once as one JSON-RPC batch, and the
answers are read as bytes, counting `download/finished` lines; the outcomes
are parsed and checked after the clock stops. The Python client would parse
every receipt and notification into objects on a Python thread that competes
with courier and nginx for the machine's cores, and so would measure itself
(see --client). courier's clock runs from the moment before its spawn to
the last `download/finished` read, when every output is looked up and must
be in place; curl's and aria2c's from spawn to exit. The cache-hit figure
goes through the Python client for both of its subjects, as that
comparison asks.

Every figure is the median of --runs runs (--small-runs, 15, for the W1 rows
on --dir: a run of 2,000 small files lasts a fifth of a second, and on a
loaded 2-core machine one moves by a fifth from the next, curl's too);
within a run the tools take turns
(the order rotates from run to run), so that a change in the machine's load
touches each alike, and each turn starts after `sync`, so that no turn pays
for writing back the files of the one before it (the on-disk row's files
otherwise reach ext4 while the next tool, or the next workload, runs). Ratios
are taken within the run. Peak RSS is the
process's ru_maxrss from wait4.

    scripts/bench_compare.py [--courier PATH] [--runs N] [--small-runs N] [--w3-size 1GiB]
        [--dir /dev/shm] [--disk-dir /var/tmp] [--markdown FILE] [--json FILE]
        [--only w1,w1t,w1msg,w1disk,w1diskcache,w1nocache,w2,w3,w7,startup,cache,w6] [--startup-baseline PATH]
        [--w6-size 256MiB] [--w6-cut 32MiB]
"""

from __future__ import annotations

import argparse
import datetime
import filecmp
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

from nginx_origin import NginxOrigin  # noqa: E402

NO_PROXY_ENV = {k: v for k, v in os.environ.items()
                if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
FINISHED = b'"method":"download/finished"'
# A row's figures under this name: courier's shutdown to its exit, after
# the clock stopped (not in the table's figures).
EXIT = "courier exit"
# W7: this many files of this size at once, under this rate (bytes per
# second) for all of them: exactly W7_SECONDS at the rate.
W7_COUNT, W7_SIZE, W7_RATE = 4, 8 << 20, 8 << 20
W7_SECONDS = W7_COUNT * W7_SIZE / W7_RATE
WORKLOADS = ("w1", "w1t", "w1msg", "w1disk", "w1diskcache", "w1nocache", "w2", "w3", "w7", "startup", "cache")
DEFAULT_WORKLOADS = WORKLOADS
# W6, a flaky link: scripts/bench_flaky.py.
WORKLOADS += ("w6",)
DEFAULT_WORKLOADS += ("w6",)


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    unit = (m.group(2) or "B").upper().rstrip("B").rstrip("I")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit])


def human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------- processes


@dataclass
class Run:
    seconds: float
    maxrss_kib: int = 0
    # courier's: the first download's end to the last one's, from the
    # outcomes' durationMs (all of them start at once).
    spread_seconds: float | None = None
    # courier's: the HTTP versions its outcomes name.
    http_versions: frozenset[str] = frozenset()
    # courier's: `shutdown` and `exit` written to the process reaped, after
    # the clock stopped (a client that times its courier whole pays it).
    exit_seconds: float | None = None


def wait_rusage(proc: subprocess.Popen) -> tuple[int, int]:
    """Reaps ``proc``; returns its exit status and peak RSS in KiB (the
    largest of it and its reaped children, as the kernel counts)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss


def run_command(argv: Sequence[str], prefix: Sequence[str] = ()) -> Run:
    start = time.perf_counter()
    proc = subprocess.Popen([*prefix, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            env=NO_PROXY_ENV)
    code, rss = wait_rusage(proc)
    elapsed = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"{argv[0]} exited with {code}")
    return Run(elapsed, rss)


class PeakRSS:
    """A prefix that runs a command under GNU time for its peak RSS.
    (wait4's ru_maxrss of a child of this Python process is at least this
    process's own RSS, which the kernel carries over the child's exec.)"""

    def __init__(self, work: str):
        self.path = os.path.join(work, f"time-{os.getpid()}.out")

    @property
    def prefix(self) -> list[str]:
        return ["/usr/bin/time", "-f", "%M", "-o", self.path]

    def read(self, run: "Run") -> "Run":
        with open(self.path) as file:
            run.maxrss_kib = int(file.read().split()[-1])
        return run


def curl_transfers(pairs: list[tuple[str, str]], parallel: int, work: str,
                   prefix: Sequence[str] = (), extra: Sequence[str] = ()) -> Run:
    config = os.path.join(work, "curl.config")
    with open(config, "w") as file:
        for url, out in pairs:
            file.write(f'url = "{url}"\noutput = "{out}"\n')
    argv = ["curl", "--silent", "--show-error", "--no-progress-meter", "--fail", *extra, "-K", config]
    if len(pairs) > 1:
        argv[1:1] = ["--parallel", "--parallel-max", str(parallel)]
    return run_command(argv, prefix)


def aria2c_transfers(pairs: list[tuple[str, str]], parallel: int, work: str,
                     prefix: Sequence[str] = (), extra: Sequence[str] = ()) -> Run:
    listing = os.path.join(work, "aria2c.list")
    with open(listing, "w") as file:
        for url, out in pairs:
            file.write(f"{url}\n  dir={os.path.dirname(out)}\n  out={os.path.basename(out)}\n")
    argv = ["aria2c", "--no-conf", "--quiet", "--max-concurrent-downloads", str(parallel),
            "--max-connection-per-server", "1", "--split", "1", "--file-allocation", "none",
            "--allow-overwrite", "true", "--auto-file-renaming", "false", "--summary-interval", "0",
            *extra, "--input-file", listing]
    return run_command(argv, prefix)


def courier_transfers(binary: str, pairs: list[tuple[str, str]], parallel: int, cache: str,
                      extra: Sequence[str] = (), prefix: Sequence[str] = (),
                      timeout: float = 600, separately: bool = False) -> Run:
    """One courier process, every `download` written at once as one batch
    through a raw pipe (with ``separately``, as as many messages, one per
    line, written at once: courier may start on the first before the last
    is parsed, as a batch must parse whole before any of it runs). The clock runs from the moment before courier is
    spawned to the last `download/finished` read: what a client that has
    its requests ready waits for until its last file is in place. Each
    output is looked up as soon as the clock stops, while courier still
    runs, and must be there with the size its outcome reports (courier
    moves a file into place before it says the download finished). The
    outcomes are checked, and courier shut down, after the clock stops."""
    count = len(pairs)
    batch = [{"jsonrpc": "2.0", "id": i, "method": "download",
              "params": {"url": url, "destination": out}} for i, (url, out) in enumerate(pairs)]
    if separately:
        payload = b"".join(json.dumps(message, separators=(",", ":")).encode() + b"\n" for message in batch)
    else:
        payload = json.dumps(batch, separators=(",", ":")).encode() + b"\n"
    argv = [*prefix, binary, "--cache-dir", cache, "--max-active", str(parallel),
            "--log-level", "error", "--framing", "ndjson", *extra]
    stderr = open(os.path.join(cache, os.pardir, f"courier-{os.getpid()}.stderr"), "wb")
    chunks: list[bytes] = []
    failure: list[BaseException] = []
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            env=NO_PROXY_ENV, bufsize=0)

    def write() -> None:
        try:
            proc.stdin.write(payload)
        except BaseException as exc:  # noqa: BLE001
            failure.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    fd = proc.stdout.fileno()
    seen, tail = 0, b""
    deadline = time.monotonic() + timeout
    while seen < count:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise RuntimeError(f"courier's output ended after {seen} of {count} downloads "
                               f"(exit {proc.poll()}); stderr in {stderr.name}")
        chunks.append(chunk)
        data = tail + chunk
        seen += data.count(FINISHED)
        tail = data[-(len(FINISHED) - 1):]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{seen} of {count} downloads within {timeout} s")
    elapsed = time.perf_counter() - start
    placed = {out: os.stat(out).st_size if os.path.exists(out) else None for _, out in pairs}
    writer.join()
    if failure:
        raise RuntimeError(f"writing to courier failed: {failure[0]!r}")
    exiting = time.perf_counter()
    proc.stdin.write(b'{"jsonrpc":"2.0","id":"end","method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n')
    proc.stdin.close()
    rest = proc.stdout.read()
    chunks.append(rest)
    code, rss = wait_rusage(proc)
    exit_seconds = time.perf_counter() - exiting
    stderr.close()
    if code != 0:
        raise RuntimeError(f"courier exited with {code}")
    bad, durations, versions = [], [], set()
    for line in b"".join(chunks).split(b"\n"):
        if FINISHED in line:
            outcome = json.loads(line)["params"]["outcome"]
            durations.append(outcome.get("durationMs", 0) / 1000)
            versions.add(outcome.get("httpVersion"))
            if not outcome.get("ok"):
                bad.append(outcome)
            elif placed.get(outcome.get("path")) != outcome.get("size"):
                bad.append({"not in place when the clock stopped": outcome.get("path"),
                            "size there": placed.get(outcome.get("path")), "outcome": outcome})
    if bad:
        raise RuntimeError(f"{len(bad)} downloads failed, e.g. {bad[0]}")
    return Run(elapsed, rss, max(durations) - min(durations), frozenset(versions), exit_seconds)


def courier_client_transfers(binary: str, pairs: list[tuple[str, str]], parallel: int, cache: str,
                             extra: Sequence[str] = ()) -> Run:
    """The same through the Python client (courier_client.Courier)."""
    from courier_client import Courier
    count = len(pairs)
    done = threading.Event()
    outcomes: list[dict] = []

    def on_notification(method: str, params) -> None:
        if method == "download/finished":
            outcomes.append(params["outcome"])
            if len(outcomes) == count:
                done.set()

    start = time.perf_counter()
    args = ["--cache-dir", cache, "--max-active", str(parallel), "--log-level", "error", *extra]
    with Courier(binary, args=args, env=NO_PROXY_ENV) as courier:
        courier.on_notification(on_notification)
        courier.send_message([{"jsonrpc": "2.0", "id": i, "method": "download",
                               "params": {"url": url, "destination": out}}
                              for i, (url, out) in enumerate(pairs)])
        if not done.wait(600):
            raise RuntimeError(f"only {len(outcomes)} of {count} downloads finished")
        elapsed = time.perf_counter() - start
    bad = [o for o in outcomes if not o.get("ok")]
    if bad:
        raise RuntimeError(f"{len(bad)} downloads failed, e.g. {bad[0]}")
    return Run(elapsed, http_versions=frozenset(o.get("httpVersion") for o in outcomes))


def courier_startup(binary: str, cache: str) -> Run:
    """Spawn to the `initialize` answer."""
    start = time.perf_counter()
    proc = subprocess.Popen([binary, "--cache-dir", cache, "--log-level", "error"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=NO_PROXY_ENV, bufsize=0)
    proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')
    data = b""
    while b"\n" not in data:
        chunk = os.read(proc.stdout.fileno(), 1 << 16)
        if not chunk:
            raise RuntimeError("courier exited before answering initialize")
        data += chunk
    elapsed = time.perf_counter() - start
    if b'"result"' not in data:
        raise RuntimeError(f"initialize failed: {data[:200]!r}")
    proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n')
    proc.stdin.close()
    proc.stdout.read()
    _, rss = wait_rusage(proc)
    return Run(elapsed, rss)


def curl_http_version(url: str, extra: Sequence[str] = ()) -> str:
    """The HTTP version curl used for one download of ``url`` ("2", "1.1")."""
    out = subprocess.run(["curl", "--silent", "--show-error", "--fail", "--output", os.devnull,
                          "--write-out", "%{http_version}", *extra, url],
                         capture_output=True, text=True, env=NO_PROXY_ENV, timeout=30, check=True)
    return out.stdout.strip()


# ---------------------------------------------------------------- files


@dataclass
class TLSFiles:
    """A certificate authority made for one run, and the certificate it
    signed for the origin at 127.0.0.1 with that certificate's key."""
    ca: str
    certificate: str
    key: str


def make_tls(directory: str) -> TLSFiles:
    """Makes, with openssl in ``directory``, a self-signed CA and a server
    certificate it signs for 127.0.0.1 (subjectAltName IP), both EC P-256
    and valid for two days."""
    files = TLSFiles(f"{directory}/ca.pem", f"{directory}/server.pem", f"{directory}/server.key")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    extensions = f"{directory}/server.ext"
    with open(extensions, "w") as file:
        file.write("subjectAltName = IP:127.0.0.1\nbasicConstraints = critical, CA:FALSE\n"
                   "keyUsage = critical, digitalSignature\nextendedKeyUsage = serverAuth\n")
    for argv in (
        ["openssl", "req", "-x509", *key, "-days", "2", "-subj", "/CN=courier bench CA",
         "-addext", "basicConstraints = critical, CA:TRUE", "-addext", "keyUsage = critical, keyCertSign, cRLSign",
         "-keyout", f"{directory}/ca.key", "-out", files.ca],
        ["openssl", "req", "-new", *key, "-subj", "/CN=127.0.0.1", "-keyout", files.key,
         "-out", f"{directory}/server.csr"],
        ["openssl", "x509", "-req", "-in", f"{directory}/server.csr", "-CA", files.ca, "-CAkey", f"{directory}/ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", extensions, "-out", files.certificate],
    ):
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return files




def write_random(path: str, size: int) -> None:
    with open(path, "wb") as file:
        left = size
        while left:
            n = min(left, 1 << 24)
            file.write(os.urandom(n))
            left -= n


def fresh_dir(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def verify(sources: list[str], outputs: list[str]) -> None:
    picks = sorted({0, len(sources) // 2, len(sources) - 1})
    for i in picks:
        if not filecmp.cmp(sources[i], outputs[i], shallow=False):
            raise RuntimeError(f"{outputs[i]} differs from {sources[i]}")
    missing = [o for o in outputs if not os.path.exists(o)]
    if missing:
        raise RuntimeError(f"{len(missing)} outputs missing, e.g. {missing[0]}")


# ---------------------------------------------------------------- measuring


@dataclass
class Row:
    name: str
    unit: str                     # "ms", "MiB", "/s"
    target: str = ""
    figures: dict[str, list[float]] = field(default_factory=dict)
    higher_is_better: bool = False
    note: str = ""
    ratio_limit: float | None = None      # courier / curl must be <= this (or >= for higher)
    beat: str | None = None               # courier must beat this tool too
    anchor: str = "curl"
    within: tuple[float, float] | None = None  # courier's median must lie in this range

    def median(self, tool: str) -> float | None:
        values = self.figures.get(tool)
        return statistics.median(values) if values else None

    def ratio(self, tool: str, anchor: str | None = None) -> float | None:
        a, b = self.median(tool), self.median(anchor or self.anchor)
        return a / b if a is not None and b else None

    def cell(self, tool: str) -> str:
        """The tool's median; under a range, also in how many runs it lay
        in it when that was not every run."""
        text = fmt(self.median(tool), self.unit)
        runs = self.figures.get(tool)
        if self.within is not None and runs:
            held = sum(self.within[0] <= value <= self.within[1] for value in runs)
            if held < len(runs):
                text += f" (in range in {held} of {len(runs)} runs)"
        return text

    def met(self) -> bool | None:
        if self.within is not None:
            c = self.median("courier")
            return None if c is None else self.within[0] <= c <= self.within[1]
        r = self.ratio("courier")
        if r is None or self.ratio_limit is None:
            return None
        ok = r >= self.ratio_limit if self.higher_is_better else r <= self.ratio_limit
        if self.beat and self.median(self.beat) is not None:
            c, other = self.median("courier"), self.median(self.beat)
            ok = ok and (c > other if self.higher_is_better else c < other)
        return ok


def alternate(runs: int, subjects: dict[str, Callable[[int], Run]], label: str,
              rows: dict[str, Row], rss_row: Row | None = None, spread_row: Row | None = None) -> None:
    """Each run gives every subject one turn; the order rotates per run."""
    names = list(subjects)
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            os.sync()
            result = subjects[name](run)
            rows[label].figures.setdefault(name, []).append(result.seconds * 1000)
            if rss_row is not None:
                rss_row.figures.setdefault(name, []).append(result.maxrss_kib / 1024)
            extra = f", peak RSS {result.maxrss_kib / 1024:.1f} MiB" if rss_row is not None else ""
            if result.exit_seconds is not None:
                rows[label].figures.setdefault(EXIT, []).append(result.exit_seconds * 1000)
                extra += f", then {result.exit_seconds * 1000:.1f} ms to exit"
            if spread_row is not None and result.spread_seconds is not None:
                spread_row.figures.setdefault(name, []).append(result.spread_seconds * 1000)
                extra += f", first to last {result.spread_seconds * 1000:.1f} ms"
            print(f"  {label} run {run + 1}/{runs}: {name:8} {result.seconds * 1000:9.1f} ms{extra}"
                  f"   (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)


def transfer_subjects(binary: str, base: str, count: int, src_dir: str, name: str, parallel: int,
                      work: str, courier_extra: Sequence[str] = (), client: str = "pipe", cache_work: str | None = None,
                      tools: Sequence[str] = ("curl", "aria2c", "courier"),
                      rss: bool = False, curl_extra: Sequence[str] = (),
                      aria2c_extra: Sequence[str] = (),
                      courier_http: str | None = None,
                      separately: bool = False) -> dict[str, Callable[[int], Run]]:
    """Each tool's turn: ``count`` files from ``base`` into a fresh directory,
    checked against ``src_dir``; with ``courier_http``, every courier
    outcome must name that HTTP version; with ``separately``, the pipe client
    writes courier's requests as separate messages."""
    sources = [f"{src_dir}/{i}" for i in range(count)]
    peak = PeakRSS(work) if rss else None
    prefix = peak.prefix if peak else []

    def subject(tool: str) -> Callable[[int], Run]:
        def once(run: int) -> Run:
            # A new directory each run: creating thousands of files where as
            # many were just deleted makes ext4 search its inode table.
            out = fresh_dir(f"{work}/{name}-{tool}-{run}")
            pairs = [(f"{base}/{name.split('-')[0]}/{i}", f"{out}/{i}") for i in range(count)]
            try:
                if tool == "curl":
                    result = curl_transfers(pairs, parallel, work, prefix, curl_extra)
                elif tool == "aria2c":
                    result = aria2c_transfers(pairs, parallel, work, prefix, aria2c_extra)
                else:
                    cache = fresh_dir(f"{cache_work or work}/{name}-cache-{run}")
                    if client == "pipe":
                        result = courier_transfers(binary, pairs, parallel, cache, courier_extra, prefix,
                                                   separately=separately)
                    else:
                        result = courier_client_transfers(binary, pairs, parallel, cache, courier_extra)
                    shutil.rmtree(cache, ignore_errors=True)
                    if courier_http and result.http_versions != {courier_http}:
                        raise RuntimeError(f"courier used HTTP {sorted(map(str, result.http_versions))}, "
                                           f"not {courier_http}")
                if peak:
                    peak.read(result)
                verify(sources, [p[1] for p in pairs])
            finally:
                shutil.rmtree(out, ignore_errors=True)
            return result
        return once

    return {tool: subject(tool) for tool in tools}


def cache_figures(binary: str, runs: int, count: int, work: str, rows: dict[str, Row]) -> str:
    """Runs the cache subjects into ``rows``; returns a sentence on their CPU
    time per request and the rates that CPU allows on this machine's cores."""
    import bench_cache
    from origin import Origin, pattern
    tempfile.tempdir = work  # bench_cache's cache directories go to --dir too
    cpu: dict[str, list] = {}
    try:
        with Origin() as origin:
            url = origin.set_resource("bench", pattern(1024, "bench"), {"Cache-Control": "max-age=3600"})
            subjects = {
                "transport": lambda: bench_cache.run_transport(binary, count, 1000, 300),
                "hit none": lambda: bench_cache.run_hits(binary, url, "memory", count, 1000, "none", 300),
                "hit base64": lambda: bench_cache.run_hits(binary, url, "memory", count, 1000, "base64", 300),
                "disk hit": lambda: bench_cache.run_hits(binary, url, "disk", count, 1000, "none", 300),
            }
            names = list(subjects)
            for run in range(runs):
                shift = run % len(names)
                for name in names[shift:] + names[:shift]:
                    measured = subjects[name]()
                    cpu.setdefault(name, []).append(measured)
                    rate = measured.per_second
                    if name == "transport":
                        for key in ("cache-none", "cache-base64", "cache-disk"):
                            rows[key].figures.setdefault("transport", []).append(rate)
                    else:
                        key = {"hit none": "cache-none", "hit base64": "cache-base64", "disk hit": "cache-disk"}[name]
                        rows[key].figures.setdefault("courier", []).append(rate)
                    print(f"  cache run {run + 1}/{runs}: {name:10} {rate:10,.0f} /s, CPU per request: courier "
                          f"{measured.courier_us:.1f} µs, client {measured.client_us:.1f} µs   "
                          f"(load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    finally:
        tempfile.tempdir = None
    cores = os.cpu_count() or 1
    parts = []
    for name, label in (("transport", "the transport"), ("hit none", "hits, body none"),
                        ("hit base64", "hits, body base64"), ("disk hit", "disk hits, body none")):
        courier_us, client_us, bound = bench_cache.cpu_figures(cpu[name])
        parts.append(f"{label} {courier_us:.1f} + {client_us:.1f} µs (at most {bound:,.0f} /s on {cores} cores)")
    return ("CPU per request, courier + the Python client (medians; courier's from /proc, the client's "
            "process from getrusage): " + "; ".join(parts) + ".")


# ---------------------------------------------------------------- report


def version_of(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"


def machine() -> dict[str, str]:
    cpu = "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = "?"
    try:
        kib = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal")))
        mem = f"{kib / (1 << 20):.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {"cpu": f"{cpu}, {os.cpu_count()} cores", "memory": mem,
            "kernel": f"{platform.system()} {platform.release()} {platform.machine()}"}


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "/s":
        return f"{value:,.0f} /s"
    if unit == "MiB":
        return f"{value:,.1f} MiB"
    return f"{value:,.1f} ms" if value < 100 else f"{value:,.0f} ms"


def table(rows: list[Row]) -> list[list[str]]:
    head = ["workload", "curl", "aria2c", "courier", "courier / curl", "courier / aria2c", "target", "met"]
    body = [head]
    for row in rows:
        if not row.figures:
            continue
        anchor_col = row.median(row.anchor)
        # A row judged by a range (W7) is no comparison between the tools:
        # no ratios, and a tool whose runs left the range says in how many
        # runs it held.
        ratio = row.ratio("courier") if row.within is None else None
        vs_aria = row.ratio("courier", "aria2c") if row.median("aria2c") is not None and row.within is None else None
        met = row.met()
        curl_cell = row.cell("curl") if row.anchor == "curl" else f"{fmt(anchor_col, row.unit)} ({row.anchor})"
        body.append([
            row.name + (f" {row.note}" if row.note else ""),
            curl_cell,
            row.cell("aria2c"),
            fmt(row.median("courier"), row.unit),
            f"{ratio:.2f}×" if ratio is not None else "—",
            f"{vs_aria:.2f}×" if vs_aria is not None else "—",
            row.target,
            "" if met is None else ("yes" if met else "no"),
        ])
    return body


def exit_sentence(rows: dict[str, Row]) -> str:
    """courier's median time from `shutdown` to its exit, per row that has
    it: what a client timed whole adds to courier's figure, beside its own
    start and end."""
    parts = [f"{key} {row.median(EXIT):.1f} ms" for key, row in rows.items() if row.median(EXIT) is not None]
    if not parts:
        return ""
    return ("After its last file, courier took this long from `shutdown` to its exit (medians; not in the "
            "figures above): " + "; ".join(parts) + ".")


def render_text(body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in body) for i in range(len(body[0]))]
    lines = []
    for n, r in enumerate(body):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(body[0]) + " |",
             "| " + " | ".join(["---"] + ["---:"] * (len(body[0]) - 2) + [":---:"]) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in body[1:]]
    return "\n".join(lines)


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--courier", help="the courier binary (default: .build-release/release/courier, "
                                          "else .build/release/courier)")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure; the median is reported (default 5)")
    parser.add_argument("--small-runs", type=int, default=15,
                        help="runs per figure of the W1 rows on --dir, whose runs last a fifth of a second and move "
                             "by a fifth from one to the next on a loaded machine (default 15)")
    parser.add_argument("--w1-count", type=int, default=2000)
    parser.add_argument("--w2-count", type=int, default=200)
    parser.add_argument("--w3-size", type=parse_size, default=1 << 30, help="W3's one file (default 1GiB)")
    parser.add_argument("--startup-runs", type=int, default=20, help="start-up samples per tool and run")
    parser.add_argument("--startup-baseline", metavar="PATH",
                        help="another courier binary (an older build, say) whose start-up is measured in the same "
                             "alternation and reported beside the table")
    parser.add_argument("--cache-count", type=int, default=10_000, help="pipelined requests per cache run")
    parser.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="origin files, outputs and caches (default /dev/shm, a tmpfs)")
    parser.add_argument("--disk-dir", default="/var/tmp",
                        help="outputs and cache of W1 on disk (default /var/tmp)")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(WORKLOADS)} "
                                       f"(default: {','.join(DEFAULT_WORKLOADS)})")
    parser.add_argument("--client", choices=("pipe", "python"), default="pipe",
                        help="how courier is driven for W1-W3 (default: a raw pipe writer)")
    # W6, a flaky link.
    parser.add_argument("--w6-size", type=parse_size, default=256 << 20, help="W6's one file (default 256MiB)")
    parser.add_argument("--w6-cut", type=parse_size, default=32 << 20,
                        help="W6: body bytes the origin sends on a connection before it closes it (default 32MiB)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown to FILE")
    parser.add_argument("--json", metavar="FILE", help="also write every run's figures as JSON to FILE")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else set(DEFAULT_WORKLOADS)
    unknown = only - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")

    binary = args.courier or next((str(p) for p in (REPO / ".build-release/release/courier",
                                                    REPO / ".build/release/courier") if p.exists()), None)
    if binary is None:
        parser.error("no courier binary: swift build -c release --scratch-path .build-release, or --courier")
    binary = os.path.abspath(binary)
    for tool in ("curl", "aria2c", "nginx" if shutil.which("nginx") else "/usr/sbin/nginx"):
        if not shutil.which(tool):
            parser.error(f"{tool} is not installed (scripts/bench installs it)")

    cache_cpu = ""
    w6_detail: list[list[str]] = []
    load_before = os.getloadavg()
    started_at = datetime.datetime.now(datetime.timezone.utc)
    P1, P2 = 8, 4
    rows: dict[str, Row] = {
        "w1": Row(f"W1 {args.w1_count:,} × 8 KiB, {P1} at a time, tmpfs", "ms", "≤ 1.5× curl, < aria2c",
                  ratio_limit=1.5, beat="aria2c"),
        "w1t": Row("W1T the same over https, HTTP/2 (curl --cacert, aria2c --ca-certificate, courier --ca-file)",
                   "ms", "≤ 1.5× curl, < aria2c", ratio_limit=1.5, beat="aria2c",
                   note="(aria2c speaks HTTP/1.1 only: 8 connections)"),
        "w1disk": Row(f"W1 on disk ({args.disk_dir}: outputs and cache)", "ms", "≤ 1.2× curl", ratio_limit=1.2),
        "w1diskcache": Row(f"W1, courier's cache directory on disk ({args.disk_dir}), outputs on tmpfs, "
                           f"vs courier's own W1", "ms", "≤ 1.5× courier W1", ratio_limit=1.5, anchor="courier W1"),
        "w1msg": Row(f"W1 separately: courier's {args.w1_count:,} requests as separate messages, vs courier's W1 "
                     f"as one batch, alternated", "ms", "", anchor="courier W1"),
        "w1nocache": Row("W1, courier without cache (--memory-capacity 0 --disk-capacity 0; curl, aria2c from W1)",
                         "ms", ""),
        "w2": Row(f"W2 {args.w2_count:,} × 1 MiB, {P2} at a time", "ms", "≤ 1.2× curl, < aria2c",
                  ratio_limit=1.2, beat="aria2c"),
        "w3": Row(f"W3 {human(args.w3_size)}, one stream", "ms", "≤ 1.1× curl", ratio_limit=1.1),
        "w3rss": Row("W3 peak RSS", "MiB", "≤ 3× curl", ratio_limit=3.0),
        "w7": Row(f"W7 {W7_COUNT} × {human(W7_SIZE)} at once under {human(W7_RATE)}/s "
                  f"(curl: --limit-rate per transfer)", "ms", "4 s ± 5 %",
                  within=(W7_SECONDS * 950, W7_SECONDS * 1050)),
        "w7spread": Row("W7 first to last download's end (courier, from its outcomes)", "ms", "≤ 5 % of 4 s",
                        within=(0, W7_SECONDS * 50)),
        "startup": Row("start-up: `initialize` answer vs `curl --version`", "ms", "≤ 1.5× curl",
                       ratio_limit=1.5),
        "cache-none": Row("memory-cache hits, body none, vs transport (-32601)", "/s", "≥ 0.5× transport",
                          higher_is_better=True, ratio_limit=0.5, anchor="transport"),
        "cache-base64": Row("memory-cache hits, body base64, vs transport", "/s", "≥ 0.5× transport",
                            higher_is_better=True, ratio_limit=0.5, anchor="transport"),
        "cache-disk": Row("disk-cache hits (--memory-capacity 0), body none, vs transport", "/s", "",
                          higher_is_better=True, anchor="transport"),
    }

    root = tempfile.mkdtemp(prefix="courier-bench-", dir=args.dir)
    os.chmod(root, 0o755)
    disk_root = None
    nginx = tls_nginx = None
    try:
        www = f"{root}/www"
        need = {"w1": bool({"w1", "w1t", "w1msg", "w1disk", "w1diskcache", "w1nocache"} & only), "w2": "w2" in only, "w3": "w3" in only,
                "w7": "w7" in only}
        for name, count, size in (("w1", args.w1_count, 8192), ("w2", args.w2_count, 1 << 20), ("w3", 1, args.w3_size),
                                  ("w7", W7_COUNT, W7_SIZE)):
            if need[name]:
                os.makedirs(f"{www}/{name}")
                for i in range(count):
                    write_random(f"{www}/{name}/{i}", size)
        if any(need.values()):
            nginx = NginxOrigin(root).start()
            base = nginx.base_url
        if "w1t" in only:
            # The same files from a second nginx, over https (HTTP/2 offered
            # by ALPN), its certificate signed by a CA made for this run.
            tls = make_tls(fresh_dir(f"{root}/tls"))
            os.makedirs(f"{root}/tls-origin")
            os.symlink(www, f"{root}/tls-origin/www")
            tls_nginx = NginxOrigin(f"{root}/tls-origin", tls=(tls.certificate, tls.key)).start()
            curl_version = curl_http_version(tls_nginx.url("/w1/0"), ("--cacert", tls.ca))
            if curl_version != "2":
                raise RuntimeError(f"curl used HTTP {curl_version} over https, not HTTP/2")
        print(f"courier: {binary}; files in {root}; load average {load_before[0]:.2f} {load_before[1]:.2f} "
              f"{load_before[2]:.2f}", file=sys.stderr, flush=True)

        if "w1" in only:
            alternate(args.small_runs, transfer_subjects(binary, base, args.w1_count, f"{www}/w1", "w1", P1, root,
                                                   client=args.client), "w1", rows)
        if "w1t" in only:
            alternate(args.small_runs, transfer_subjects(binary, tls_nginx.base_url, args.w1_count, f"{www}/w1", "w1-tls", P1,
                                                   root, ("--ca-file", tls.ca), client=args.client,
                                                   curl_extra=("--cacert", tls.ca),
                                                   aria2c_extra=(f"--ca-certificate={tls.ca}",), courier_http="2"),
                      "w1t", rows)
        if "w1msg" in only:
            # Alternated with courier's W1 as one batch, turn by turn: the
            # two differ only in how the requests are framed.
            separately = transfer_subjects(binary, base, args.w1_count, f"{www}/w1", "w1-msg", P1, root,
                                           client=args.client, separately=True, tools=("courier",))
            batch = transfer_subjects(binary, base, args.w1_count, f"{www}/w1", "w1-batch", P1, root,
                                      client=args.client, tools=("courier",))
            alternate(args.small_runs, {"courier": separately["courier"], "courier W1": batch["courier"]}, "w1msg", rows)
        if "w1nocache" in only:
            rows["w1nocache"].figures = {k: list(v) for k, v in rows["w1"].figures.items()
                                         if k in ("curl", "aria2c")}
            alternate(args.small_runs, transfer_subjects(binary, base, args.w1_count, f"{www}/w1", "w1-nocache", P1, root,
                                                   ("--memory-capacity", "0", "--disk-capacity", "0"),
                                                   client=args.client,
                                                   tools=("courier",) if "w1" in only else ("curl", "courier")),
                      "w1nocache", rows)
        if "w1disk" in only:
            disk_root = tempfile.mkdtemp(prefix="courier-bench-", dir=args.disk_dir)
            alternate(args.runs, transfer_subjects(binary, base, args.w1_count, f"{www}/w1", "w1-disk", P1,
                                                   disk_root, client=args.client), "w1disk", rows)
        if "w1diskcache" in only:
            disk_root = disk_root or tempfile.mkdtemp(prefix="courier-bench-", dir=args.disk_dir)
            alternate(args.small_runs, transfer_subjects(binary, base, args.w1_count, f"{www}/w1", "w1-diskcache", P1, root,
                                                   client=args.client, cache_work=disk_root, tools=("courier",)),
                      "w1diskcache", rows)
            if "courier" in rows["w1"].figures:
                rows["w1diskcache"].figures["courier W1"] = list(rows["w1"].figures["courier"])
        if "w2" in only:
            alternate(args.runs, transfer_subjects(binary, base, args.w2_count, f"{www}/w2", "w2", P2, root,
                                                   client=args.client), "w2", rows)
        if "w3" in only:
            alternate(args.runs, transfer_subjects(binary, base, 1, f"{www}/w3", "w3", 1, root,
                                                   client=args.client, rss=True), "w3", rows, rss_row=rows["w3rss"])
        if "w7" in only:
            alternate(args.runs, transfer_subjects(
                binary, base, W7_COUNT, f"{www}/w7", "w7", W7_COUNT, root,
                ("--max-download-rate", str(W7_RATE)), client=args.client,
                curl_extra=("--limit-rate", str(W7_RATE // W7_COUNT)),
                aria2c_extra=(f"--max-overall-download-limit={W7_RATE}",)), "w7", rows, spread_row=rows["w7spread"])
        if "startup" in only:
            cache = fresh_dir(f"{root}/startup-cache")
            subjects = {
                "curl": lambda run: Run(statistics.median(
                    run_command(["curl", "--version"]).seconds for _ in range(args.startup_runs))),
                "courier": lambda run: Run(statistics.median(
                    courier_startup(binary, cache).seconds for _ in range(args.startup_runs))),
            }
            if args.startup_baseline:
                baseline_cache = fresh_dir(f"{root}/startup-baseline-cache")
                subjects["baseline"] = lambda run: Run(statistics.median(
                    courier_startup(args.startup_baseline, baseline_cache).seconds
                    for _ in range(args.startup_runs)))
            alternate(args.runs, subjects, "startup", rows)
            if args.startup_baseline:
                row = rows["startup"]
                print(f"start-up: courier {row.median('courier'):.1f} ms ({row.ratio('courier'):.2f}x curl), "
                      f"baseline {args.startup_baseline} {row.median('baseline'):.1f} ms "
                      f"({row.ratio('baseline'):.2f}x curl), curl --version {row.median('curl'):.1f} ms",
                      file=sys.stderr)
        if "cache" in only:
            cache_cpu = cache_figures(binary, args.runs, args.cache_count, root, rows)
        # W6, a flaky link.
        if "w6" in only:
            import bench_flaky
            w6_results = bench_flaky.measure(binary, args.runs, args.w6_size, args.w6_cut, root)
            rows.update(bench_flaky.rows(w6_results, args.w6_size, args.w6_cut))
            w6_detail = bench_flaky.detail(w6_results, args.w6_size, args.w6_cut)
    finally:
        for origin in (nginx, tls_nginx):
            if origin is not None:
                origin.stop()
        shutil.rmtree(root, ignore_errors=True)
        if disk_root:
            shutil.rmtree(disk_root, ignore_errors=True)

    load_after = os.getloadavg()
    info = machine()
    versions = {"curl": " ".join(version_of(["curl", "--version"]).split()[:2]),
                "aria2c": version_of(["aria2c", "--version"]).replace("aria2 version", "aria2c"),
                "nginx": version_of(["nginx", "-v"]).replace("nginx version: ", ""),
                "courier": version_of([binary, "--version"])}
    commit = version_of(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    body = table([rows[k] for k in rows])
    header = (f"{started_at:%Y-%m-%d %H:%M} UTC; {info['cpu']}, {info['memory']}; {info['kernel']}; "
              f"median of {args.runs} alternated runs ({args.small_runs} for the W1 rows on {args.dir}); "
              f"load average {load_before[0]:.2f} before, "
              f"{load_after[0]:.2f} after")
    print()
    print(header)
    print(render_text(body))
    print(f"tools: {versions['curl']}; {versions['aria2c']}; {versions['nginx']}; courier {versions['courier']} "
          f"({binary}, commit {commit}); courier driven by a {args.client} client")
    exits = exit_sentence(rows)
    if exits:
        print(exits)
    if cache_cpu:
        print(cache_cpu)
    if w6_detail:
        print()
        print(render_text(w6_detail))

    if args.markdown:
        text = [
            f"Measured on {info['cpu']}, {info['memory']} ({info['kernel']}), {started_at:%Y-%m-%d}; "
            f"load average {load_before[0]:.2f} before the run and {load_after[0]:.2f} after. "
            f"Loopback nginx; origin files, outputs and caches on {args.dir} (tmpfs) except the on-disk W1 "
            f"row ({args.disk_dir}). Each figure is the median of {args.runs} runs ({args.small_runs} for the "
            f"W1 rows on {args.dir}, whose runs move most from one to the next), the tools alternated; "
            f"ratios are within the run.",
            "",
            render_markdown(body),
            "",
            f"{versions['curl']}, {versions['aria2c']}, {versions['nginx']}, "
            f"courier {versions['courier']} (HEAD at the run: {commit}). curl: `curl --parallel --parallel-max P -K list`; "
            f"aria2c: `aria2c -j P -x 1 -s 1 --file-allocation none -i list`; courier: default settings, "
            f"`--max-active P`, all requests written at once as one batch by a {args.client} client. "
            f"Clocks: curl's and aria2c's run from spawn to exit, courier's from spawn to the last "
            f"`download/finished` (every output checked in place at that moment)."
            + (" W1T: nginx offers HTTP/2 over TLS with a certificate for 127.0.0.1 from a CA made for the run, "
               "given to curl as `--cacert`, to aria2c as `--ca-certificate`, to courier as `--ca-file`; curl and "
               "courier used HTTP/2, aria2c HTTP/1.1." if rows["w1t"].figures else ""),
            "",
        ]
        if exits:
            text += [exits, ""]
        if cache_cpu:
            text += [cache_cpu, ""]
        if w6_detail:
            text += [render_markdown(w6_detail), ""]
        Path(args.markdown).write_text("\n".join(text), encoding="utf-8")
        print(f"wrote {args.markdown}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "started": started_at.isoformat(), "machine": info, "versions": versions, "commit": commit,
            "courier": binary, "runs": args.runs, "client": args.client,
            "load": {"before": load_before, "after": load_after},
            "rows": {k: {"name": r.name, "unit": r.unit, "runs": r.figures,
                         "median": {t: r.median(t) for t in r.figures}, "ratio": r.ratio("courier"),
                         "met": r.met()} for k, r in rows.items() if r.figures},
        }, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
