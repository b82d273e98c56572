"""Load and churn: 10,000 downloads queued at once by one client, and a
seeded random churn of download / cancel / suspend / resume / re-request
operations, checking the downloader's invariants throughout."""

from __future__ import annotations

import base64
import random

import pytest

from conftest import COURIER, PROXY_VARIABLES, Session, _check_session
from origin import Origin, pattern

RSS_LIMIT_KIB = 400 * 1024


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def test_ten_thousand_queued_downloads_each_finish_once(courier, origin, capsys):
    c = courier("--max-active", "16", validate="sample")
    total, batch_size = 10_000, 1_000
    ids = []
    for start in range(0, total, batch_size):
        batch = []
        for n in range(start, start + batch_size):
            ids.append(f"load-{n}")
            batch.append({"jsonrpc": "2.0", "id": ids[-1], "method": "download",
                          "params": {"url": origin.url(f"/bytes/64?i={n}"), "body": "base64"}})
        c.send_message(batch)
    responses = [c.wait_response(i, timeout=60) for i in ids]
    receipts = [r["result"]["receipt"] for r in responses]
    assert len(set(receipts)) == total

    outcomes = c.wait_all(receipts, timeout=150)
    rss = peak_rss_kib(c.pid)
    with capsys.disabled():
        print(f"\npeak RSS of courier after {total:,} downloads: {rss / 1024:.1f} MiB")

    body = pattern(64)
    assert all(o["ok"] and base64.b64decode(o["base64"]) == body for o in outcomes.values())
    assert len(c.finished_order) == total
    assert origin.total_hits() == total
    assert all(origin.hits(f"/bytes/64?i={n}") == 1 for n in range(0, total, 97))
    assert c.tasks() == []
    assert rss < RSS_LIMIT_KIB


# -- churn ------------------------------------------------------------------------------

MAX_ACTIVE = 4
OPERATIONS = 1_000
SEED = 20_261_122


def churn_pool(origin: Origin, rng: random.Random) -> list[str]:
    pool = [origin.url(f"/bytes/{rng.randrange(500, 50_000)}?pool={i}") for i in range(10)]
    for i in range(12):
        size = rng.randrange(4_000, 20_000)
        chunks = rng.randrange(4, 10)
        interval = rng.choice((0.03, 0.05, 0.08))
        pool.append(origin.url(f"/drip?size={size}&chunks={chunks}&interval={interval}&seed=p{i}"))
    pool += [origin.url(f"/status/404?pool={i}") for i in range(3)]
    pool += [origin.url(f"/redirect/2?pool={i}") for i in range(3)]
    pool += [origin.url(f"/slow-headers?delay=0.3&pool={i}") for i in range(2)]
    return pool


class ChurnRun:
    def __init__(self, session: Session):
        self.c = session
        self.receipts: list[str] = []
        self.peak_running = 0
        self.polls = 0
        self.idle_ticks = 0
        self.ops: dict[str, int] = {}
        self.tasks_left: list[dict] = []


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    rng = random.Random(SEED)
    cache = tmp_path_factory.mktemp("churn-cache")
    with Origin() as origin:
        c = Session(COURIER, ["--cache-dir", str(cache), "--max-active", str(MAX_ACTIVE),
                              "--progress-interval", "0.05"],
                    env={name: None for name in PROXY_VARIABLES})
        run = ChurnRun(c)
        try:
            _churn(run, origin, rng)
            run.tasks_left = c.tasks()
            yield run
        finally:
            try:
                c.close(timeout=10)
            finally:
                if c.alive:
                    c.kill()
    _check_session(c, "sample")


def _churn(run: ChurnRun, origin: Origin, rng: random.Random) -> None:
    c = run.c
    pool = churn_pool(origin, rng)
    issued: set[str] = set()
    cancelled_urls: list[str] = []
    url_of: dict[str, str] = {}

    def poll() -> list[dict]:
        tasks = c.tasks()
        running = sum(t["state"] == "running" for t in tasks)
        assert running <= MAX_ACTIVE, tasks
        run.peak_running = max(run.peak_running, running)
        run.polls += 1
        return tasks

    def new_download(url: str, **params) -> None:
        result = c.download(url, **params)
        if result["receipt"] not in issued:
            issued.add(result["receipt"])
            run.receipts.append(result["receipt"])
            url_of[result["receipt"]] = url

    kinds = ["download", "slot", "cancel", "suspend", "resume", "again"]
    weights = [40, 12, 18, 10, 10, 10]
    for step in range(OPERATIONS):
        kind = rng.choices(kinds, weights)[0]
        if kind in ("cancel", "suspend", "resume", "again") and not run.receipts:
            kind = "download"
        if kind == "again" and not cancelled_urls:
            kind = "download"
        run.ops[kind] = run.ops.get(kind, 0) + 1
        if kind == "download":
            params = {"priority": rng.choice(("high", "normal", "low")),
                      "body": rng.choice(("none", "base64"))}
            if rng.random() < 0.2:
                params["headers"] = {"X-Churn": str(rng.randrange(2))}
            new_download(rng.choice(pool), **params)
        elif kind == "slot":
            new_download(rng.choice(pool), slot=f"slot-{rng.randrange(5)}")
        elif kind == "cancel":
            receipt = rng.choice(run.receipts)
            if c.cancel(receipt)["cancelled"]:
                cancelled_urls.append(url_of[receipt])
        elif kind == "suspend":
            c.suspend(receipt=rng.choice(run.receipts))
        elif kind == "resume":
            c.resume(receipt=rng.choice(run.receipts))
        else:
            new_download(rng.choice(cancelled_urls[-10:]))

        if step % 10 == 9:
            tasks = poll()
            if any(t["state"] == "running" for t in tasks):
                since = c.mark()
                try:
                    c.wait_notification(lambda _m, _p: True, timeout=2, since=since)
                except TimeoutError:
                    run.idle_ticks += 1

    # Leave work in every state before the final cancel: running, suspended
    # after it started, queued, and stalled.
    new_download(origin.url("/stall?after=100&seed=end"))
    new_download(pool[10], priority="high")
    new_download(pool[11], priority="high")
    suspended = run.receipts[-1]
    c.wait_progress(c.progress(suspended)["task"], timeout=20)
    c.suspend(receipt=suspended)
    for i in range(6):
        new_download(origin.url(f"/bytes/100?end={i}"), priority="low")
    poll()
    c.cancel(all=True)
    c.wait_all(run.receipts, timeout=30)
    poll()


def test_churn_keeps_every_invariant(churn, capsys):
    c = churn.c
    with capsys.disabled():
        print(f"\nchurn: {len(churn.receipts)} receipts, operations {churn.ops}, "
              f"{churn.polls} polls, peak running {churn.peak_running}, idle ticks {churn.idle_ticks}")
    assert sum(churn.ops.values()) == OPERATIONS
    assert len(churn.receipts) > 300
    for receipt in churn.receipts:
        assert len(c.outcomes[receipt]) == 1, receipt
    assert set(c.finished_order) == set(churn.receipts)
    assert 1 <= churn.peak_running <= MAX_ACTIVE
    codes = {o[0]["error"]["code"] if not o[0]["ok"] else "ok" for o in c.outcomes.values()}
    assert {"ok", "cancelled", "http_status"} <= codes
    for task, notes in c.progress_by_task.items():
        received = [p["received"] for _, p in notes]
        assert received == sorted(received), f"received went down for {task}: {received}"


def test_churn_leaves_nothing_running(churn):
    assert churn.tasks_left == []
