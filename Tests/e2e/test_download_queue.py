"""End-to-end tests of the run queue: --max-active, priorities,
--prioritization fifo|lifo, and suspending or cancelling queued and running
work without ever running more than --max-active transfers."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from origin import Origin, pattern
from test_downloads import drip


def names_in_log(origin) -> list[str]:
    """The `name` query parameter of every request the origin saw, in order."""
    return [parse_qs(urlsplit(target).query).get("name", ["?"])[0]
            for target in origin.request_log()]


def watch_until_done(c, receipts, limit: int, timeout: float = 30) -> dict:
    """Polls `progress {}` at every notification until every receipt has
    finished; asserts the run-queue bound at each poll. Returns figures."""
    peak_running = peak_active = polls = 0
    while True:
        since = c.mark()
        tasks = c.tasks()
        running = sum(t["state"] == "running" for t in tasks)
        active = sum(t["state"] in ("running", "suspended") for t in tasks)
        assert running <= limit and active <= limit, tasks
        peak_running, peak_active = max(peak_running, running), max(peak_active, active)
        polls += 1
        if all(r in c.outcomes for r in receipts):
            return {"peak_running": peak_running, "peak_active": peak_active, "polls": polls}
        c.wait_notification(lambda _m, _p: True, timeout=timeout, since=since)


@pytest.mark.parametrize("args, limit", [(("--max-active", "2"), 2), ((), 4)],
                         ids=["max-active-2", "default-4"])
def test_no_more_than_max_active_transfers_run(courier, origin, args, limit):
    c = courier(*args)
    results = [c.download(drip(origin, f"q{n}", size=4000, chunks=6, interval=0.08))
               for n in range(6)]
    assert [r["state"] for r in results] == ["running"] * limit + ["queued"] * (6 - limit)
    receipts = [r["receipt"] for r in results]
    figures = watch_until_done(c, receipts, limit)
    assert figures["peak_running"] == limit
    assert figures["polls"] >= 3
    outcomes = c.wait_all(receipts)
    for n, receipt in enumerate(receipts):
        assert outcomes[receipt]["ok"], outcomes[receipt]
        assert outcomes[receipt]["size"] == 4000
    assert origin.hits("/drip") == 6
    assert c.initialize()["config"]["maxActive"] == limit


QUEUED = [("L1", "low"), ("N1", "normal"), ("H1", "high"), ("L2", "low"),
          ("H2", "high"), ("N2", "normal")]


@pytest.mark.parametrize("prioritization, expected", [
    (None, ["H1", "H2", "N1", "N2", "L1", "L2"]),
    ("fifo", ["H1", "H2", "N1", "N2", "L1", "L2"]),
    ("lifo", ["H2", "H1", "N2", "N1", "L2", "L1"]),
], ids=["default-fifo", "fifo", "lifo"])
def test_queued_tasks_start_by_priority_then_prioritization(courier, origin, prioritization, expected):
    args = ["--max-active", "1"]
    if prioritization:
        args += ["--prioritization", prioritization]
    c = courier(*args)
    blocker = c.download(origin.url("/drip?size=2000&chunks=8&interval=0.1&name=blocker"))
    assert blocker["state"] == "running"
    receipts = [blocker["receipt"]]
    for name, priority in QUEUED:
        result = c.download(origin.url(f"/bytes/10?name={name}"), priority=priority)
        assert result["state"] == "queued", name
        receipts.append(result["receipt"])
    outcomes = c.wait_all(receipts)
    assert all(o["ok"] for o in outcomes.values())
    assert names_in_log(origin) == ["blocker", *expected]
    assert c.finished_order == receipts[:1] + [receipts[1 + [n for n, _ in QUEUED].index(x)]
                                               for x in expected]


def test_a_higher_priority_request_for_a_queued_task_moves_it_up(courier, origin):
    c = courier("--max-active", "1")
    blocker = c.download(origin.url("/drip?size=2000&chunks=8&interval=0.1&name=blocker"))
    first = c.download(origin.url("/bytes/10?name=first"))
    second = c.download(origin.url("/bytes/10?name=second"))
    joined = c.download(origin.url("/bytes/10?name=second"), priority="high")
    assert joined["task"] == second["task"] and joined["state"] == "queued"
    c.wait_all([r["receipt"] for r in (blocker, first, second, joined)])
    assert names_in_log(origin) == ["blocker", "second", "first"]


def test_suspended_work_keeps_its_place_and_resumes(courier, origin):
    # A is served by an origin of its own, so the hit counts below tell the
    # transfers apart.
    with Origin() as other:
        _suspended_work_keeps_its_place_and_resumes(courier, origin, other)


def _suspended_work_keeps_its_place_and_resumes(courier, origin, other):
    c = courier("--max-active", "2")
    a = c.download(drip(other, "A", size=12000, chunks=12, interval=0.05))
    b = c.download(drip(origin, "B", size=12000, chunks=12, interval=0.05))
    # D lasts long enough to be seen running after it starts, however
    # slowly the test thread reads the task list.
    queued = [c.download(drip(origin, name, size=2000, chunks=2, interval=0.6 if name == "D" else 0.05))
              for name in ("C", "D", "E")]

    assert c.suspend(receipt=a["receipt"])["state"] == "suspended"
    assert c.suspend(receipt=queued[0]["receipt"])["state"] == "suspended"
    states = {t["task"]: t["state"] for t in c.tasks()}
    assert states == {a["task"]: "suspended", b["task"]: "running",
                      queued[0]["task"]: "suspended", queued[1]["task"]: "queued",
                      queued[2]["task"]: "queued"}

    c.wait(b["receipt"])
    seen: dict = {}

    def next_started() -> bool:
        seen.clear()
        seen.update({t["task"]: t["state"] for t in c.tasks()})
        return seen.get(queued[1]["task"]) != "queued"

    c.wait_until(next_started, what="the next queued task to start")
    # A (started, then suspended) keeps its slot; C (suspended before it
    # started) holds none: D runs in B's slot and E waits.
    assert seen == {
        a["task"]: "suspended", queued[0]["task"]: "suspended",
        queued[1]["task"]: "running", queued[2]["task"]: "queued"}

    assert c.resume(receipt=queued[0]["receipt"])["state"] == "queued"
    assert c.resume(receipt=a["receipt"])["state"] == "running"
    receipts = [r["receipt"] for r in (a, b, *queued)]
    figures = watch_until_done(c, receipts, 2)
    assert figures["peak_active"] <= 2
    outcomes = c.wait_all(receipts)
    for name, result in zip("ABCDE", (a, b, *queued)):
        out = outcomes[result["receipt"]]
        assert out["ok"], (name, out)
        size = 12000 if name in "AB" else 2000
        with open(out["path"], "rb") as f:
            assert f.read() == pattern(size, name)
    assert origin.hits("/drip") == 4 and other.hits("/drip") == 1


def test_cancelling_queued_and_suspended_work_never_exceeds_max_active(courier, origin):
    c = courier("--max-active", "2")
    a = c.download(drip(origin, "A", size=30000, chunks=30, interval=0.1))
    b = c.download(drip(origin, "B", size=20000, chunks=20, interval=0.1))
    cq, dq, eq, fq = (c.download(drip(origin, n, size=2000, chunks=4, interval=0.05)) for n in "CDEF")

    def states():
        return {t["task"]: t["state"] for t in c.tasks()}

    c.suspend(receipt=a["receipt"])
    assert c.cancel(cq["receipt"])["cancelled"]
    assert states() == {a["task"]: "suspended", b["task"]: "running",
                        dq["task"]: "queued", eq["task"]: "queued", fq["task"]: "queued"}
    c.suspend(receipt=dq["receipt"])
    assert c.cancel(dq["receipt"])["cancelled"]
    assert states() == {a["task"]: "suspended", b["task"]: "running",
                        eq["task"]: "queued", fq["task"]: "queued"}
    assert c.cancel(a["receipt"])["cancelled"]
    assert states() == {b["task"]: "running", eq["task"]: "running", fq["task"]: "queued"}

    receipts = [r["receipt"] for r in (a, b, cq, dq, eq, fq)]
    figures = watch_until_done(c, receipts, 2)
    assert figures["peak_active"] <= 2
    outcomes = c.wait_all(receipts)
    assert [outcomes[r["receipt"]]["ok"] for r in (a, b, cq, dq, eq, fq)] == \
        [False, True, False, False, True, True]
    assert origin.hits(f"/drip?size=2000&chunks=4&interval=0.05&seed=C") == 0
    assert origin.hits(f"/drip?size=2000&chunks=4&interval=0.05&seed=D") == 0
    assert c.tasks() == []


def test_a_suspended_transfer_does_not_hold_up_its_host(courier, origin):
    """B, to the same origin as the suspended A, is sent and completes."""
    for round_ in range(5):
        c = courier("--max-active", "2")
        a = c.download(drip(origin, f"A{round_}", size=12000, chunks=12, interval=0.05))
        b = c.download(drip(origin, f"B{round_}", size=3000, chunks=3, interval=0.05))
        c.suspend(receipt=a["receipt"])
        assert c.wait(b["receipt"], timeout=5)["ok"]
        c.cancel(all=True)
        c.close()


def test_transfers_started_together_all_reach_the_origin(courier, origin):
    """Transfers to one host started together each get their first bytes,
    none waiting for a connection another one holds."""
    for round_ in range(8):
        c = courier("--max-active", "4")
        results = [c.download(origin.url(f"/stall?after=100&seed={round_}-{k}")) for k in range(4)]
        tasks = {r["task"] for r in results}
        c.wait_until(lambda: tasks <= set(c.progress_by_task), timeout=3,
                     what="a first byte on each of 4 transfers")
        c.cancel(all=True)
        c.close()
