"""Rate limits end to end, against the test origin's /bytes/N (a body sent
as fast as courier takes it): `--max-download-rate` for all transfers
together, shared fairly; `maxRate` per task; both changed at run time.

Rates are measured from what courier reports: outcomes' `durationMs`, and
`received` in `download/progress` notifications against the moments they
arrived. Bounds below a limit are tight (courier may not go faster than it
allows, give or take a burst of a tenth of a second); bounds above it are
loose, for a loaded machine. Every wait is for an event, with a bound.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time

import pytest

from conftest import COURIER
from courier_client import RpcError

KIB = 1 << 10
MIB = 1 << 20
EX_USAGE = 64


def received_by(session, task: str, moment: float) -> int:
    """What `download/progress` had said of `task` by `moment` (client time)."""
    with session._cv:
        notes = list(session.progress_by_task[task])
    return max((params["received"] for at, params in notes if at <= moment), default=0)


def wait_progress_after(session, task: str, moment: float, timeout: float = 20) -> float:
    """Waits for a `download/progress` of `task` that arrived after `moment`,
    or for the task's end; returns when the last one arrived."""
    def seen() -> bool:
        notes = session.progress_by_task[task]
        return bool(notes) and notes[-1][0] >= moment
    session.wait_until(lambda: seen() or any(n.params["task"] == task for n in session.notifications("download/finished")),
                       timeout, f"progress of {task} after {moment:.2f}")
    with session._cv:
        return session.progress_by_task[task][-1][0]


def rpc_error(call) -> RpcError:
    with pytest.raises(RpcError) as raised:
        call()
    return raised.value


# ---------------------------------------------------------------- the total rate


def test_the_total_rate_is_kept_and_shared_fairly_by_transfers_running_at_once(courier, origin):
    # Given a limit of 4 MiB/s and four 2 MiB downloads at once
    c = courier("--max-download-rate", "4MiB")
    urls = [origin.url(f"/bytes/{2 * MIB}?seed=total{i}") for i in range(4)]
    replies = c.batch([("download", {"url": url}) for url in urls])
    outcomes = c.wait_all([r["result"]["receipt"] for r in replies], timeout=30)
    # Then together they took at least 8 MiB / 4 MiB/s, less a burst
    durations = [o["durationMs"] / 1000 for o in outcomes.values()]
    assert all(o["ok"] and o["size"] == 2 * MIB for o in outcomes.values()), outcomes
    assert 1.85 <= max(durations) <= 4, durations
    # And each got an equal part: they finish together
    assert min(durations) >= 0.85 * max(durations), durations
    # And at every moment their figures were close
    tasks = [r["result"]["task"] for r in replies]
    start = min(n.time for n in c.notifications("download/progress"))
    for moment in (start + 0.5, start + 1.0, start + 1.5):
        figures = [received_by(c, task, moment) for task in tasks]
        assert max(figures) - min(figures) <= 512 * KIB, (moment - start, figures)


def test_a_new_total_rate_through_initialize_is_felt_by_a_running_transfer_within_half_a_second(courier, origin):
    # Given a download running at 2 MiB/s
    c = courier("--max-download-rate", "2MiB")
    started = c.download(origin.url(f"/bytes/{32 * MIB}?seed=change"))
    task = started["task"]
    c.wait_until(lambda: received_by(c, task, time.monotonic()) >= 512 * KIB, 20, "512 KiB")
    # When the limit goes down to 256 KiB/s
    lowered = time.monotonic()
    assert c.initialize(maxDownloadRate=256 * KIB)["config"]["maxDownloadRate"] == 256 * KIB
    # Then from half a second on it takes no more than the new rate allows
    last = wait_progress_after(c, task, lowered + 1.6)
    window = last - (lowered + 0.5)
    gained = received_by(c, task, last) - received_by(c, task, lowered + 0.5)
    assert gained <= 256 * KIB * window + 256 * KIB, (gained, window)
    # When the limit is lifted
    lifted = time.monotonic()
    before = received_by(c, task, lifted)
    assert c.initialize(maxDownloadRate=0)["config"]["maxDownloadRate"] == 0
    # Then within half a second it takes far more than the old rate allowed
    # (128 KiB in half a second), and finishes
    outcome = c.wait(started["receipt"], timeout=30)
    assert outcome["ok"] and outcome["size"] == 32 * MIB, outcome
    finished_at = next(n.time for n in c.notifications("download/finished"))
    gained = (32 * MIB if finished_at <= lifted + 0.5 else received_by(c, task, lifted + 0.5)) - before
    assert gained >= 1 * MIB, gained


def test_a_total_rate_set_while_a_transfer_runs_without_any_limit_holds_it(courier, origin):
    # Given a download running without any limit (from an origin that
    # sends 4 MiB in about two seconds)
    c = courier()
    started = c.download(origin.url(f"/drip?size={4 * MIB}&chunks=64&interval=0.03&seed=free"))
    task = started["task"]
    c.wait_until(lambda: received_by(c, task, time.monotonic()) >= 256 * KIB, 20, "256 KiB")
    # When a limit for all transfers is set
    limited = time.monotonic()
    assert c.initialize(maxDownloadRate=128 * KIB)["config"]["maxDownloadRate"] == 128 * KIB
    # Then from half a second on it takes no more than the limit allows
    last = wait_progress_after(c, task, limited + 1.6)
    window = last - (limited + 0.5)
    gained = received_by(c, task, last) - received_by(c, task, limited + 0.5)
    assert gained <= 128 * KIB * window + 128 * KIB, (gained, window)
    # And once it is lifted the download finishes whole
    c.initialize(maxDownloadRate=0)
    outcome = c.wait(started["receipt"], timeout=30)
    assert outcome["ok"] and outcome["size"] == 4 * MIB, outcome


def test_a_suspended_transfer_stays_suspended_under_the_limiter(courier, origin):
    # Given a limited download, suspended while the limiter holds it back
    c = courier("--max-download-rate", "1MiB")
    held = c.download(origin.url(f"/bytes/{3 * MIB}?seed=held"))
    c.wait_until(lambda: received_by(c, held["task"], time.monotonic()) >= 256 * KIB, 20, "256 KiB")
    assert c.suspend(held["receipt"])["state"] == "suspended"
    # When another download runs under the same limit
    other = c.download(origin.url(f"/bytes/{MIB}?seed=other"))
    c.wait_until(lambda: received_by(c, other["task"], time.monotonic()) >= 256 * KIB, 20, "the other's 256 KiB")
    frozen = c.progress(held["receipt"])["received"]
    outcome = c.wait(other["receipt"])
    # Then the suspended one took nothing meanwhile, and the other had the
    # whole rate (shared, 1 MiB would have taken two seconds)
    assert outcome["ok"], outcome
    assert 0.85 <= outcome["durationMs"] / 1000 <= 1.7, outcome["durationMs"]
    progress = c.progress(held["receipt"])
    assert progress["state"] == "suspended" and progress["received"] == frozen, progress
    # When it is resumed it goes on under the limit, and finishes once it is lifted
    resumed = time.monotonic()
    assert c.resume(held["receipt"])["state"] == "running"
    wait_progress_after(c, held["task"], resumed)
    assert received_by(c, held["task"], time.monotonic()) > frozen
    c.initialize(maxDownloadRate=0)
    final = c.wait(held["receipt"])
    assert final["ok"] and final["size"] == 3 * MIB, final


def test_a_download_suspended_before_its_transfer_began_takes_no_share(courier, origin):
    # Given a limit of 1 MiB/s and a download suspended as soon as it is
    # answered (its transfer begins once the partial store has looked for a
    # kept body, so the suspension may come first)
    c = courier("--max-download-rate", "1MiB")
    held = c.download(origin.url(f"/bytes/{MIB}?seed=early"))
    assert c.suspend(held["receipt"])["state"] == "suspended"
    # When another download runs
    outcome = c.fetch(origin.url(f"/bytes/{MIB}?seed=alone"))
    # Then it had the whole rate: shared, 1 MiB would have taken 2 s
    assert outcome["ok"] and outcome["size"] == MIB, outcome
    assert 0.85 <= outcome["durationMs"] / 1000 <= 1.6, outcome["durationMs"]
    # And the suspended one, resumed, runs under the limit and finishes
    assert c.progress(held["receipt"])["state"] == "suspended"
    assert c.resume(held["receipt"])["state"] == "running"
    final = c.wait(held["receipt"])
    assert final["ok"] and final["size"] == MIB, final


def test_a_task_waiting_to_retry_holds_no_share(courier, origin):
    # Given a limit of 1 MiB/s, a download whose first answer is a 503 with
    # Retry-After: 2, and another started once the first waits to retry
    c = courier("--max-download-rate", "1MiB")
    waiting = c.download(origin.url(f"/flaky/rate-retry?statuses=503,200&retry-after=2&size={MIB}"))
    retrying = c.wait_notification("download/retrying")
    assert retrying["receipts"] == [waiting["receipt"]] and retrying["delay"] >= 2, retrying
    other = c.fetch(origin.url(f"/bytes/{MIB}?seed=while-retrying"))
    # Then the other had the whole rate while the first waited (shared, it
    # would have taken 2 s)
    assert other["ok"] and other["size"] == MIB, other
    assert 0.85 <= other["durationMs"] / 1000 <= 1.6, other["durationMs"]
    # And the first, retried, finishes under the limit
    outcome = c.wait(waiting["receipt"])
    assert outcome["ok"] and outcome["size"] == MIB and outcome["attempts"] == 2, outcome
    assert outcome["durationMs"] >= 2000 + 850, outcome["durationMs"]


def test_a_lifted_limit_costs_nothing(courier, origin):
    # A courier whose limit was lifted at run time against one that never
    # had one, alternated, the same 16 MiB each time.
    free = courier()
    lifted = courier("--max-download-rate", "1MiB")
    lifted.initialize(maxDownloadRate=0)
    url = origin.url(f"/bytes/{16 * MIB}?seed=free")
    times: dict[str, list[float]] = {"free": [], "lifted": []}
    for _ in range(3):
        for name, session in (("free", free), ("lifted", lifted)):
            outcome = session.fetch(url, cachePolicy="reload")
            assert outcome["ok"] and outcome["size"] == 16 * MIB, outcome
            times[name].append(outcome["durationMs"] / 1000)
    assert statistics.median(times["lifted"]) <= 1.5 * statistics.median(times["free"]) + 0.1, times
    # 16 MiB at the old limit would have taken 16 s.
    assert max(times["lifted"]) < 4, times


# ---------------------------------------------------------------- maxRate


def test_max_rate_caps_one_task_and_coalesced_receipts_take_the_largest(courier, origin):
    c = courier()
    capped = origin.url(f"/bytes/{3 * MIB // 2}?seed=capped")
    largest = origin.url(f"/bytes/{3 * MIB // 2}?seed=largest")
    lifted = origin.url(f"/bytes/{2 * MIB}?seed=lifted")
    free = origin.url(f"/bytes/{8 * MIB}?seed=free")
    replies = c.batch([
        ("download", {"url": capped, "maxRate": MIB}),
        ("download", {"url": largest, "maxRate": 256 * KIB}),
        ("download", {"url": largest, "maxRate": MIB}),
        ("download", {"url": lifted, "maxRate": 256 * KIB}),
        ("download", {"url": lifted, "maxRate": 0}),
        ("download", {"url": free}),
    ])
    results = [r["result"] for r in replies]
    assert results[1]["task"] == results[2]["task"] and results[3]["task"] == results[4]["task"]
    outcomes = c.wait_all([r["receipt"] for r in results], timeout=30)
    seconds = [outcomes[r["receipt"]]["durationMs"] / 1000 for r in results]
    assert all(o["ok"] for o in outcomes.values()), outcomes
    # 1.5 MiB at 1 MiB/s, at most a burst sooner
    assert 1.35 <= seconds[0] <= 3, seconds
    # The largest rate of the coalesced receipts (256 KiB/s would take 6 s)
    assert 1.35 <= seconds[1] <= 3 and seconds[2] == pytest.approx(seconds[1], abs=0.2), seconds
    # A receipt without a limit lifts its task's (256 KiB/s would take 8 s)
    assert seconds[3] <= 2 and seconds[4] <= 2, seconds
    # A download without a limit is not held back by the others' (8 MiB)
    assert seconds[5] < seconds[0], seconds


def test_one_transfer_keeps_to_its_max_rate(courier, origin):
    # Given a download of 2 MiB capped at 1 MiB/s
    c = courier("--progress-interval", "0.1")
    started = c.download(origin.url(f"/bytes/{2 * MIB}?seed=one"), maxRate=MIB)
    outcome = c.wait(started["receipt"])
    assert outcome["ok"] and outcome["size"] == 2 * MIB, outcome
    # Then it took 2 s, less at most one piece of body, and not much more
    assert 1.9 <= outcome["durationMs"] / 1000 <= 2.5, outcome["durationMs"]
    # And it kept to the rate all along: no second took more than 1 MiB and
    # a burst of a tenth of a second
    notes = list(c.progress_by_task[started["task"]])
    for at, params in notes:
        later = [p["received"] for t, p in notes if at < t <= at + 1]
        if later:
            assert max(later) - params["received"] <= 1.1 * MIB + 64 * KIB, (at - notes[0][0], later[-1])


def test_a_receipt_that_joins_or_leaves_a_running_task_changes_its_rate_at_once(courier, origin):
    # Given a download capped at 256 KiB/s
    c = courier()
    url = origin.url(f"/bytes/{8 * MIB}?seed=join")
    slow = c.download(url, maxRate=256 * KIB)
    task = slow["task"]
    c.wait_until(lambda: received_by(c, task, time.monotonic()) >= 128 * KIB, 20, "128 KiB")
    # When a receipt with a cap of 1 MiB/s joins its task
    joined_at = time.monotonic()
    fast = c.download(url, maxRate=MIB)
    assert fast["task"] == task
    # Then within half a second it goes far faster than 256 KiB/s
    last = wait_progress_after(c, task, joined_at + 1.5)
    gained = received_by(c, task, last) - received_by(c, task, joined_at + 0.5)
    assert gained >= 1.5 * 256 * KIB * (last - joined_at - 0.5), (gained, last - joined_at)
    # When that receipt leaves
    assert c.cancel(receipt=fast["receipt"])["count"] == 1
    left_at = time.monotonic()
    # Then within half a second it is back to 256 KiB/s (its other receipt
    # finished `cancelled`, so progress alone is waited for)
    notes = c.progress_by_task[task]
    c.wait_until(lambda: notes[-1][0] >= left_at + 1.6, 20, "progress 1.6 s after the receipt left")
    last = notes[-1][0]
    window = last - (left_at + 0.5)
    gained = received_by(c, task, last) - received_by(c, task, left_at + 0.5)
    assert c.progress(slow["receipt"])["state"] == "running"
    assert gained <= 256 * KIB * window + 64 * KIB, (gained, window)
    c.cancel(receipt=slow["receipt"])


def test_a_task_that_ran_without_any_limit_takes_the_rate_of_its_receipts_once_the_free_one_leaves(courier, origin):
    # Given a download without a rate of its own, running without any limit,
    # and a receipt capped at 128 KiB/s that joins its task
    c = courier()
    url = origin.url(f"/drip?size={4 * MIB}&chunks=64&interval=0.03&seed=leave")
    free = c.download(url)
    task = free["task"]
    c.wait_until(lambda: received_by(c, task, time.monotonic()) >= 256 * KIB, 20, "256 KiB")
    capped = c.download(url, maxRate=128 * KIB)
    assert capped["task"] == task
    # When the receipt without a rate leaves
    assert c.cancel(receipt=free["receipt"])["count"] == 1
    left_at = time.monotonic()
    # Then from half a second on the task keeps to the capped one's rate
    # (the receipt that left finished `cancelled`, so progress alone is
    # waited for)
    notes = c.progress_by_task[task]
    c.wait_until(lambda: notes[-1][0] >= left_at + 1.6, 20, "progress 1.6 s after the receipt left")
    last = notes[-1][0]
    window = last - (left_at + 0.5)
    gained = received_by(c, task, last) - received_by(c, task, left_at + 0.5)
    assert c.progress(capped["receipt"])["state"] == "running"
    assert gained <= 128 * KIB * window + 128 * KIB, (gained, window)
    c.cancel(receipt=capped["receipt"])


@pytest.mark.parametrize("args, params", [
    ((), {"maxRate": 32 * KIB}),
    (("--max-download-rate", "64KiB"), {}),
], ids=["maxRate", "max-download-rate"])
def test_a_rate_limit_below_the_low_speed_limit_is_not_a_timeout(courier, origin, args, params):
    # Given a low-speed check that fails transfers under 64 KiB/s for a
    # second, and a limit that lets each of two transfers take 32 KiB/s:
    # the limiter holds a transfer back by pausing it, and libcurl does not
    # check the speed of a paused transfer
    c = courier("--low-speed-limit", "64KiB", "--low-speed-time", "1", *args)
    replies = c.batch([("download", {"url": origin.url(f"/bytes/{80 * KIB}?seed=slow{i}"), **params})
                       for i in range(2)])
    outcomes = c.wait_all([r["result"]["receipt"] for r in replies], timeout=30)
    # Then neither fails as too slow, and both take the time the limit asks:
    # 160 KiB at 64 KiB/s all together is 2.5 s, less the one piece of at
    # most 16 KiB (libcurl's largest) each flow may take ahead of its
    # credit and owe afterwards: at least 2.0 s, checked as 1.9 s since the
    # outcome's clock and the limiter's start apart. Each shares the rate
    # while both run, so neither takes less than 80 KiB at the whole rate
    # (1.25 s, less its piece 1.0 s) by far
    for outcome in outcomes.values():
        assert outcome["ok"] and outcome["size"] == 80 * KIB, outcome
        assert outcome["durationMs"] >= 1100, outcome
    assert max(outcome["durationMs"] for outcome in outcomes.values()) >= 1900, outcomes


def test_a_stalled_origin_under_a_limit_still_times_out(courier, origin):
    # A limit does not keep the low-speed check from catching an origin that
    # stops sending.
    c = courier("--low-speed-limit", "1KiB", "--low-speed-time", "1")
    outcome = c.fetch(origin.url("/stall?after=1000&hold=5"), maxRate=64 * KIB, retries=0)
    assert outcome["ok"] is False and outcome["error"]["code"] == "timeout", outcome
    assert outcome["durationMs"] < 4500, outcome


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("value", [-1, 1.5, "1MiB", True, None, (1 << 40) + 1, 1 << 62])
def test_a_max_rate_out_of_bounds_is_invalid_params(courier, origin, value):
    c = courier()
    error = rpc_error(lambda: c.download(origin.url("/bytes/10"), maxRate=value))
    assert error.code == -32602 and error.data["param"] == "maxRate", error
    assert c.fetch(origin.url("/bytes/10"), maxRate=0)["ok"], "0 is no limit"


@pytest.mark.parametrize("value", [-1, 2.5, "8MiB", (1 << 40) + 1])
def test_a_max_download_rate_option_out_of_bounds_is_invalid_params(courier, value):
    c = courier("--max-download-rate", "1MiB")
    error = rpc_error(lambda: c.initialize(maxDownloadRate=value))
    assert error.code == -32602 and error.data["param"] == "options.maxDownloadRate", error
    assert c.initialize()["config"]["maxDownloadRate"] == MIB


@pytest.mark.parametrize("value, expected", [
    ("8MiB", 8 * MIB), ("512KiB", 512 * KIB), ("10MB", 10_000_000), ("1000", 1000), ("0", 0), ("1TiB", 1 << 40),
])
def test_max_download_rate_takes_the_units_of_sizes(courier, value, expected):
    assert courier("--max-download-rate", value).initialize()["config"]["maxDownloadRate"] == expected
    assert courier(f"--max-download-rate={value}").initialize()["config"]["maxDownloadRate"] == expected


@pytest.mark.parametrize("value, message", [
    ("8Mbps", "'8Mbps' is not a rate in bytes per second (examples: 512KiB, 8MiB, 0 for no limit)"),
    ("fast", "'fast' is not a rate in bytes per second (examples: 512KiB, 8MiB, 0 for no limit)"),
    ("2TiB", "a rate of 2199023255552 bytes per second is more than 1TiB per second"),
])
def test_a_bad_max_download_rate_is_a_usage_error(value, message):
    done = subprocess.run([COURIER, "--max-download-rate", value], input="", capture_output=True, text=True,
                          timeout=10)
    assert done.returncode == EX_USAGE, (done.returncode, done.stderr)
    assert message in done.stderr and "--max-download-rate" in done.stderr, done.stderr
    assert done.stdout == ""


# ---------------------------------------------------------------- courier get --limit-rate


def test_get_limit_rate_holds_the_whole_run_to_it(origin, tmp_path):
    # Given two files of 768 KiB fetched at once under --limit-rate 1MiB
    out = tmp_path / "out"
    urls = [origin.url(f"/files/{i}.bin?size={768 * KIB}") for i in range(2)]
    began = time.monotonic()
    done = subprocess.run([COURIER, "get", "--cache-dir", str(tmp_path / "cache"), "-d", str(out), "--json",
                           "--limit-rate", "1MiB", *urls], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    # Then both are whole, and together they took 1.5 MiB at 1 MiB/s: the
    # limit is the run's, not each download's (that would take 0.75 s)
    assert sorted(p.stat().st_size for p in out.iterdir()) == [768 * KIB] * 2
    durations = [json.loads(line)["durationMs"] / 1000 for line in done.stdout.splitlines()]
    assert len(durations) == 2 and 1.35 <= max(durations) <= 4, durations
    assert elapsed >= 1.35, elapsed


@pytest.mark.parametrize("value, message", [
    ("fast", "'fast' is not a rate in bytes per second (examples: 512KiB, 8MiB, 0 for no limit)"),
    ("2TiB", "a rate of 2199023255552 bytes per second is more than 1TiB per second"),
])
def test_a_bad_get_limit_rate_is_a_usage_error(origin, tmp_path, value, message):
    done = subprocess.run([COURIER, "get", "--cache-dir", str(tmp_path / "cache"), "-d", str(tmp_path / "out"),
                           "--limit-rate", value, origin.url("/bytes/10")], capture_output=True, text=True,
                          timeout=10, stdin=subprocess.DEVNULL)
    assert done.returncode == EX_USAGE, (done.returncode, done.stderr)
    assert message in done.stderr and "--limit-rate" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
