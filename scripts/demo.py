#!/usr/bin/env python3
"""A walk-through of courier: start a local origin, spawn courier, and show
what a client sees, one step at a time."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "clients", "python", "src"))

from courier_client import Courier, RpcError  # noqa: E402
from origin import Origin  # noqa: E402


def step(title: str) -> None:
    print(f"\n== {title}")


def show(label: str, value) -> None:
    text = json.dumps(value, sort_keys=True)
    if len(text) > 160:
        text = text[:157] + "..."
    print(f"   {label}: {text}")


def run_get(binary: str, cache_dir: str, directory: str, *args: str) -> None:
    """Runs `courier get -d DIRECTORY ARGS` on the demo's own output, so a
    terminal shows its live progress."""
    print(f"   $ courier get -d {directory} {' '.join(args)}", flush=True)
    code = subprocess.call([binary, "get", "--cache-dir", cache_dir, "-d", directory, *args])
    print(f"   exit status {code}")


def next_error(courier: Courier) -> dict:
    """The error object of the next error response courier sends."""
    while True:
        message = courier.next_message(wait_timeout=10)
        if isinstance(message, dict) and "error" in message:
            return message["error"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--courier", default=os.environ.get("COURIER", ".build/debug/courier"))
    args = parser.parse_args()

    cache_dir = tempfile.mkdtemp(prefix="courier-demo-")
    with Origin() as origin, Courier(args.courier, args=["--cache-dir", cache_dir, "--max-active", "4"], record=True) as courier:
        events: list[str] = []
        lock = threading.Lock()
        clock = {"start": time.monotonic()}

        def on_notification(method: str, params) -> None:
            if method == "download/progress":
                return
            with lock:
                events.append(method)
            if method.startswith("indicator/") or method.startswith("view/"):
                elapsed = time.monotonic() - clock["start"]
                print(f"   {elapsed:5.2f} s  <- {method} {json.dumps(params, sort_keys=True)}")

        courier.on_notification(on_notification)

        step("initialize: courier says who it is and what it runs on")
        info = courier.initialize(clientInfo={"name": "demo"})
        show("serverInfo", info["serverInfo"])
        curl = info["libraries"]["curl"]
        print(f"   libcurl {curl['version']} ({curl['ssl']}), features: {', '.join(curl['features'])}")
        print(f"   jansson {info['libraries']['jansson']['version']}; methods: {', '.join(info['capabilities']['methods'])}")

        step("rpc.discover: the OpenRPC document of protocol/")
        document = courier.discover()
        print(f"   {document['info']['title']} {document['info']['version']}: {len(document['methods'])} methods")

        step("malformed input gets a precise JSON-RPC error, and courier keeps serving")
        for label, raw in [
            ("invalid JSON", b'{"jsonrpc": "2.0", "id": "m1", "method": \n'),
            ("empty batch", b"[]\n"),
            ("missing jsonrpc", b'{"id": "m2", "method": "initialize"}\n'),
            ("unknown method", b'{"jsonrpc": "2.0", "id": "m3", "method": "teleport"}\n'),
            ("positional params", b'{"jsonrpc": "2.0", "id": "m4", "method": "download", "params": ["http://x"]}\n'),
        ]:
            courier.send_raw(raw)
            error = next_error(courier)
            print(f"   {label:18} -> {error['code']} {error['message']}")

        step("several downloads with live progress")
        sizes = [200_000, 400_000, 800_000]
        receipts = []
        for size in sizes:
            url = origin.url(f"/drip?size={size}&chunks=8&interval=0.05")
            receipts.append(courier.download(url, body="none")["receipt"])
        seen: dict[str, int] = {}
        showing = {"progress": True}

        def progress_line(method: str, params) -> None:
            if method == "download/progress" and showing["progress"]:
                task = params["task"]
                if params["received"] != seen.get(task):
                    seen[task] = params["received"]
                    fraction = params["fraction"]
                    bar = "#" * int((fraction or 0) * 20)
                    print(f"   {task:>4} [{bar:<20}] {params['received']:>7} / {params['expected']}")

        courier.on_notification(progress_line)
        for receipt in receipts:
            outcome = courier.wait(receipt)
            print(f"   {receipt}: ok={outcome['ok']} size={outcome['size']} path={outcome['path']}")
        showing["progress"] = False

        step("50 identical requests, one fetch from the origin")
        url = origin.url("/drip?size=50000&chunks=5&interval=0.05&demo=coalesce")
        courier.send_message([
            {"jsonrpc": "2.0", "id": f"same-{i}", "method": "download", "params": {"url": url}} for i in range(50)
        ])
        results = [courier.wait_response(f"same-{i}")["result"] for i in range(50)]
        outcomes = [courier.wait(result["receipt"]) for result in results]
        tasks = {result["task"] for result in results}
        print(f"   receipts: {len(results)}, tasks: {len(tasks)}, all ok: {all(o['ok'] for o in outcomes)}, "
              f"origin hits: {origin.hits('/drip?size=50000&chunks=5&interval=0.05&demo=coalesce')}")

        step("cancel: the receipt ends with error code cancelled")
        slow = courier.download(origin.url("/drip?size=100000&chunks=20&interval=0.1"))
        courier.wait_notification(lambda m, p: m == "download/progress" and slow["receipt"] in p["receipts"], wait_timeout=10)
        show("cancel", courier.cancel(receipt=slow["receipt"]))
        show("outcome.error", courier.wait(slow["receipt"])["error"])

        step("slots: a newer request for a slot supersedes the old one")
        first = courier.download(origin.url("/drip?size=100000&chunks=20&interval=0.1&avatar=old"), slot="avatar")
        again = courier.download(origin.url("/drip?size=100000&chunks=20&interval=0.1&avatar=old"), slot="avatar")
        print(f"   same URL again: receipt {again['receipt']} reused={again['reused']}")
        newer = courier.download(origin.url("/image/png?w=64&h=48"), slot="avatar")
        print(f"   old receipt {first['receipt']}: {courier.wait(first['receipt'])['error']['code']}")
        outcome = courier.wait(newer["receipt"])
        print(f"   new receipt {newer['receipt']}: ok={outcome['ok']} image={json.dumps(outcome['image'], sort_keys=True)}")

        step("text: decoded with the response's charset, or textEncoding")
        for path, extra in [("/text?charset=iso-8859-1&text=Gr%C3%BC%C3%9Fe%2C+caf%C3%A9", {}),
                            ("/text?charset=utf-8", {}),
                            ("/text?charset=iso-8859-1&declare=0&text=na%C3%AFve", {"textEncoding": "iso-8859-1"})]:
            outcome = courier.fetch(origin.url(path), body="text", **extra)
            print(f"   {outcome['contentType']!s:32} -> {outcome['text']!r}")

        step("the activity indicator and bound views (shown after 1.0 s of activity, hidden 0.17 s after)")
        print("   a 0.2 s download: too short for the indicator to show")
        courier.fetch(origin.url("/drip?size=2000&chunks=2&interval=0.1&demo=short"))
        clock["start"] = time.monotonic()
        long = courier.download(origin.url("/drip?size=30000&chunks=6&interval=0.25&demo=long"))
        print(f"   a 1.5 s download, {long['task']}, with a spinner and a progress bar bound to it")
        courier.bind("spinner", task=long["task"])
        courier.bind("bar", task=long["task"], kind="progress")
        courier.wait(long["receipt"])
        courier.wait_notification(lambda m, p: m == "indicator/visibility" and not p["visible"], wait_timeout=5)
        show("indicator/state", courier.indicator_state())

        step("errors carry precise codes")
        for label, url, extra in [
            ("404", origin.url("/status/404"), {}),
            ("closed port", "http://127.0.0.1:9/", {}),
            ("unknown host", "http://nowhere.invalid/", {}),
            ("redirect loop", origin.url("/loop"), {}),
            ("stalled origin", origin.url("/stall"), {"timeout": 0.5}),
            ("not an image", origin.url("/text"), {"accept": ["image/*"]}),
        ]:
            error = courier.fetch(url, **extra)["error"]
            print(f"   {label:15} -> {error['code']}: {error['message']}")

        step("courier get: the same engine and cache for a person, no JSON (progress on stderr, results on stdout)")
        downloads = tempfile.mkdtemp(prefix="courier-demo-get-")
        report = origin.url("/files/report%202024.pdf?size=20000")
        urls = [origin.url("/drip?size=300000&chunks=20&interval=0.05&demo=get"), report, origin.url("/status/404")]
        run_get(args.courier, cache_dir, downloads, *urls)
        print(f"   files: {sorted(os.listdir(downloads))}")

        step("courier get again: a file already there is never replaced or copied around")
        run_get(args.courier, cache_dir, downloads, report)
        run_get(args.courier, cache_dir, downloads, "--no-clobber", report)

        step("shutdown: unfinished receipts end with 'shutdown'")
        pending = courier.download(origin.url("/stall?demo=shutdown"))
        courier.shutdown()
        show("outcome.error", courier.wait(pending["receipt"])["error"])
        courier.exit()
        print(f"   exit code: {courier.wait_exit(5)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
