#!/usr/bin/env python3
"""Timing of courier's network activity indicator, measured end to end
against real transfers from a local origin (scripts/origin.py on 127.0.0.1).

Each run has two phases, in one courier process:

1. One transfer, or (every other run) two overlapping ones, each a /drip of
   about 1.3 s, so the indicator shows. Measured:
   - show delay: from the first transfer's start to `indicator/visibility
     {visible: true}`;
   - hide delay: from the last transfer's end to `{visible: false}`.
2. One short transfer (/bytes/1000), then a wait of activationDelay + 0.1 s
   from its start: it must produce no visibility event at all.

Every time is the client's receive time (time.monotonic()) of a message:
a transfer's start is the receipt of its `download` response with state
"running" (courier starts the transfer, and the indicator's timer, just
before it answers), its end the receipt of its `download/finished`. The
figures are the errors of the measured delays against the configured ones
(activationDelay, completionDelay; 1.0 s and 0.17 s unless overridden):
median and worst absolute error in ms, and the median signed error.

Before the measured runs, one run with two overlapping transfers and two
views bound to the first (kinds "animating" and "progress") is printed as a
transcript with times relative to the first request.

    python3 scripts/bench_indicator.py [--runs 50] [--json FILE]
        [--activation-delay S] [--completion-delay S] [--courier PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "clients" / "python" / "src"))

from courier_client import Courier, Notification  # noqa: E402
from origin import Origin  # noqa: E402

VISIBILITY = "indicator/visibility"
DRIP_SECONDS = 1.3
DRIP_CHUNKS = 14
DRIP_SIZE = 14_000
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                   "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")


def find_courier(explicit: str | None) -> str:
    if explicit:
        return explicit
    if os.environ.get("COURIER"):
        return os.environ["COURIER"]
    for build in ("release", "debug"):
        candidate = HERE.parent / ".build" / build / "courier"
        if candidate.exists():
            return str(candidate)
    raise SystemExit("no courier binary: build it or pass --courier")


class Recorder(Courier):
    """A session that records what it receives and also logs the requests it
    sends, with their send times."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.sent: list[tuple[float, dict]] = []
        super().__init__(*args, record=True, **kwargs)

    def send_message(self, obj: Any) -> None:
        super().send_message(obj)
        if isinstance(obj, dict):
            self.sent.append((time.monotonic(), obj))

    def timed(self, method: str, params: dict, timeout: float = 10) -> tuple[Any, float]:
        """Result and receive time of one request."""
        rid = self.send_request(method, params)
        response = self.wait_response(rid, timeout)
        if "error" in response:
            raise RuntimeError(f"{method} failed: {response['error']}")
        with self._cv:
            for entry in reversed(self.messages):
                if isinstance(entry.message, dict) and entry.message.get("id") == rid:
                    return response["result"], entry.time
        raise RuntimeError(f"response {rid} not in the log")

    def finished_entry(self, receipt: str, timeout: float) -> Notification:
        return self.wait_notification_entry(
            lambda m, p: m == "download/finished" and p["receipt"] == receipt, timeout)


def drip_url(origin: Origin, seed: str) -> str:
    interval = DRIP_SECONDS / (DRIP_CHUNKS - 1)
    return origin.url(f"/drip?size={DRIP_SIZE}&chunks={DRIP_CHUNKS}"
                      f"&interval={interval:.4f}&seed={seed}")


def long_phase(c: Recorder, origin: Origin, seed: str, overlapping: bool,
               activation: float, completion: float,
               bind_views: bool = False) -> dict:
    """Phase 1 of a run; returns the measured delays (seconds)."""
    mark = c.mark()
    first, first_at = c.timed("download", {"url": drip_url(origin, seed + "a")})
    if first["state"] != "running":
        raise RuntimeError(f"the first transfer did not start at once: {first}")
    if bind_views:
        c.timed("bind", {"view": "spinner", "task": first["task"], "kind": "animating"})
        c.timed("bind", {"view": "bar", "task": first["task"], "kind": "progress"})
    receipts = [first["receipt"]]
    if overlapping:
        # The second starts once the first has been running for a moment.
        c.wait_notification(lambda m, p: m == "download/progress"
                            and p["task"] == first["task"]
                            and p["received"] >= 3 * DRIP_SIZE // DRIP_CHUNKS, 10)
        second, _ = c.timed("download", {"url": drip_url(origin, seed + "b")})
        receipts.append(second["receipt"])
    shown = c.wait_notification_entry(
        lambda m, p: m == VISIBILITY and p["visible"], activation + 10, mark)
    ends = [c.finished_entry(r, DRIP_SECONDS + 10) for r in receipts]
    for end in ends:
        if not end.params["outcome"].get("ok"):
            raise RuntimeError(f"a transfer failed: {end.params}")
    hidden = c.wait_notification_entry(
        lambda m, p: m == VISIBILITY and not p["visible"], completion + 10, mark)
    events = [n.params for n in c.notifications()[mark:] if n.method == VISIBILITY]
    last_end = max(e.time for e in ends)
    return {
        "show": shown.time - first_at,
        "hide": hidden.time - last_end,
        "events": events,
        "show_count": shown.params["activityCount"],
    }


def short_phase(c: Recorder, origin: Origin, seed: str, activation: float) -> int:
    """Phase 2 of a run; returns the number of visibility events it caused."""
    mark = c.mark()
    result, started = c.timed("download", {"url": origin.url(f"/bytes/1000?seed={seed}"),
                                           "cachePolicy": "reload"})
    c.finished_entry(result["receipt"], 10)
    # Wait out the activation delay from its start: a show would come by then.
    deadline = started + activation + 0.1
    try:
        c.wait_notification_entry(VISIBILITY, max(0.0, deadline - time.monotonic()), mark)
    except TimeoutError:
        pass
    state, _ = c.timed("indicator/state", {})
    events = [n for n in c.notifications()[mark:] if n.method == VISIBILITY]
    if state["activityCount"] != 0:
        raise RuntimeError(f"activity left after a short transfer: {state}")
    return len(events)


def summarize(errors: list[float]) -> dict:
    if not errors:
        return {"n": 0}
    absolute = [abs(e) for e in errors]
    return {
        "n": len(errors),
        "median_abs_ms": statistics.median(absolute) * 1000,
        "worst_abs_ms": max(absolute) * 1000,
        "median_signed_ms": statistics.median(errors) * 1000,
    }


def transcript(c: Recorder, since_sent: int, since_received: int) -> list[str]:
    """The messages of one run, compact, with times relative to its first request."""
    sent = c.sent[since_sent:]
    received = c.messages[since_received:]
    origin_time = sent[0][0]
    rows: list[tuple[float, str]] = []
    for at, msg in sent:
        if msg.get("method") in ("download", "bind"):
            rows.append((at, f"→ {msg['method']} {json.dumps(msg['params'], separators=(',', ':'))}"))
    methods = {msg.get("id"): msg.get("method") for _, msg in sent}
    counts = {"download/progress": 0, "view/progress": 0}
    progress_rows: dict[str, list[tuple[float, str]]] = {k: [] for k in counts}
    for entry in received:
        msg = entry.message
        if not isinstance(msg, dict):
            continue
        if "method" in msg:
            method, params = msg["method"], msg.get("params")
            if method == "download/finished":
                outcome = params["outcome"]
                params = {"receipt": params["receipt"], "task": params["task"],
                          "outcome": {"ok": outcome.get("ok"), "status": outcome.get("status"),
                                      "size": outcome.get("size"), "…": "…"}}
            line = f"← {method} {json.dumps(params, separators=(',', ':'), ensure_ascii=False)}"
            if method in progress_rows:
                progress_rows[method].append((entry.time, line))
            else:
                rows.append((entry.time, line))
        elif methods.get(msg.get("id")) in ("download", "bind"):
            rows.append((entry.time, f"← ({methods[msg['id']]} result) "
                         f"{json.dumps(msg.get('result'), separators=(',', ':'))}"))
    # Progress lines: the first two and the last of each kind, and a count.
    for method, items in progress_rows.items():
        keep = items if len(items) <= 3 else items[:2] + items[-1:]
        rows.extend(keep)
        if len(items) > len(keep):
            rows.append((items[1][0] + 1e-6, f"  … {len(items) - len(keep)} more {method} …"))
    rows.sort(key=lambda row: row[0])
    return [f"{(at - origin_time) * 1000:8.1f} ms  {text}" for at, text in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="measured runs (default 50)")
    parser.add_argument("--activation-delay", type=float, default=1.0,
                        help="seconds (default 1.0, courier's default)")
    parser.add_argument("--completion-delay", type=float, default=0.17,
                        help="seconds (default 0.17, courier's default)")
    parser.add_argument("--courier", help="binary (default: $COURIER, else .build/release/courier, "
                                          "else .build/debug/courier)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    args, ignored = parser.parse_known_args(argv)
    if ignored:
        print(f"bench_indicator: ignoring {' '.join(ignored)}", file=sys.stderr)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    activation, completion = args.activation_delay, args.completion_delay
    binary = find_courier(args.courier)

    print(f"courier: {binary}")
    print(f"delays: activation {activation} s, completion {completion} s; "
          f"{args.runs} runs; transfers /drip of {DRIP_SECONDS} s "
          f"(two overlapping every other run) and /bytes/1000")

    show_errors: dict[str, list[float]] = {"1": [], "2": []}
    hide_errors: dict[str, list[float]] = {"1": [], "2": []}
    short_events = 0
    anomalies: list[str] = []
    began = time.monotonic()
    with Origin() as origin, tempfile.TemporaryDirectory() as cache:
        env = {name: None for name in PROXY_VARIABLES}
        with Recorder(binary, ["--cache-dir", cache, "--activation-delay", str(activation),
                               "--completion-delay", str(completion)], env=env) as c:
            c.timed("indicator/state", {})

            sent_mark, received_mark = len(c.sent), len(c.messages)
            sample = long_phase(c, origin, "transcript", True, activation, completion,
                                bind_views=True)
            excerpt = transcript(c, sent_mark, received_mark)
            print("\ntranscript: two overlapping transfers, views 'spinner' (animating) "
                  "and 'bar' (progress) bound to the first")
            for line in excerpt:
                print("  " + line)
            print(f"  (show delay {sample['show'] * 1000:.1f} ms, "
                  f"hide delay {sample['hide'] * 1000:.1f} ms)")

            for run in range(args.runs):
                overlapping = run % 2 == 0
                measured = long_phase(c, origin, f"run{run}-", overlapping,
                                      activation, completion)
                key = "2" if overlapping else "1"
                show_errors[key].append(measured["show"] - activation)
                hide_errors[key].append(measured["hide"] - completion)
                visible = [e["visible"] for e in measured["events"]]
                if visible != [True, False]:
                    anomalies.append(f"run {run}: visibility events {measured['events']}")
                events = short_phase(c, origin, f"short{run}", activation)
                short_events += events
                if events:
                    anomalies.append(f"run {run}: the short transfer caused {events} event(s)")
                print(f"  run {run + 1}/{args.runs}: {key} transfer(s), "
                      f"show {measured['show'] * 1000:7.1f} ms, "
                      f"hide {measured['hide'] * 1000:6.1f} ms, short: {events} event(s)",
                      file=sys.stderr, flush=True)
    elapsed = time.monotonic() - began

    figures = {
        "show_delay": summarize(show_errors["1"] + show_errors["2"]),
        "show_delay_one": summarize(show_errors["1"]),
        "show_delay_two": summarize(show_errors["2"]),
        "hide_delay": summarize(hide_errors["1"] + hide_errors["2"]),
        "hide_delay_one": summarize(hide_errors["1"]),
        "hide_delay_two": summarize(hide_errors["2"]),
    }
    labels = {
        "show_delay": f"first start → visible:true (vs {activation * 1000:.0f} ms)",
        "show_delay_one": "  one transfer",
        "show_delay_two": "  two overlapping",
        "hide_delay": f"last end → visible:false (vs {completion * 1000:.0f} ms)",
        "hide_delay_one": "  one transfer",
        "hide_delay_two": "  two overlapping",
    }
    print()
    print(f"{'error of the measured delay':46} {'runs':>5} {'median |err|':>13} "
          f"{'worst |err|':>12} {'median err':>11}")
    for key, label in labels.items():
        f = figures[key]
        if not f["n"]:
            continue
        print(f"{label:46} {f['n']:>5} {f['median_abs_ms']:>10.1f} ms {f['worst_abs_ms']:>9.1f} ms "
              f"{f['median_signed_ms']:>+8.1f} ms")
    print(f"{'short transfers with any visibility event':46} {args.runs:>5} {short_events:>13}")
    print(f"\n{args.runs} runs in {elapsed:.0f} s")
    for line in anomalies:
        print("anomaly: " + line)

    if args.json:
        document = {
            "benchmark": "indicator",
            "courier": binary,
            "runs": args.runs,
            "activation_delay_s": activation,
            "completion_delay_s": completion,
            "transfer": {"drip_seconds": DRIP_SECONDS, "short": "/bytes/1000"},
            "figures_ms": figures,
            "short_transfer_visibility_events": short_events,
            "anomalies": anomalies,
            "raw_errors_s": {"show": show_errors, "hide": hide_errors},
            "transcript": excerpt,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "seconds": elapsed,
        }
        Path(args.json).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
        print(f"wrote {args.json}")
    return 1 if short_events or anomalies else 0


if __name__ == "__main__":
    sys.exit(main())
