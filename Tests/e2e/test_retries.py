"""Retries end to end: what is transient is asked again (the origin counts
the requests), with `Retry-After` honoured and bounded, per-receipt budgets,
`download/retrying` before each wait, and a waiting task that holds no
run-queue place, counts for no indicator and keeps its views animating.

Waits are made short with `--retry-delay`; a test that needs a wait to
last (to act during it) makes the origin ask for one with `Retry-After`,
and acts on the `download/retrying` notification, never after a sleep.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import time
from urllib.parse import quote

import pytest

from conftest import COURIER
from origin import pattern

QUICK = ("--retry-delay", "0.001")
RETRYING = "download/retrying"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def retried(session, receipt: str) -> list[dict]:
    """The `download/retrying` notifications naming ``receipt``, in order."""
    return [n.params for n in session.notifications(RETRYING) if receipt in n.params["receipts"]]


def note_time(session, method: str, predicate=lambda params: True) -> float:
    return next(n.time for n in session.notifications(method) if predicate(n.params))


# --------------------------------------------------------------------------
# What is retried


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 522, 524])
def test_each_transient_status_is_asked_again_until_it_succeeds(courier, origin, status):
    c = courier(*QUICK)
    url = origin.url(f"/flaky/s{status}?statuses={status},{status},200&size=3000")
    result = c.download(url, body="base64")
    out = c.wait(result["receipt"])
    assert out["ok"] is True, out
    assert base64.b64decode(out["base64"]) == pattern(3000, f"s{status}")
    assert out["attempts"] == 3 and origin.hits(f"/flaky/s{status}") == 3
    notices = retried(c, result["receipt"])
    assert [n["attempt"] for n in notices] == [2, 3]
    for notice in notices:
        assert notice["task"] == result["task"] and notice["receipts"] == [result["receipt"]]
        assert notice["error"]["code"] == "http_status" and notice["error"]["httpStatus"] == status
        assert 0 <= notice["delay"] < 0.01
    assert note_time(c, RETRYING) <= note_time(c, "download/finished")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 501, 505])
def test_other_statuses_fail_at_once(courier, origin, status):
    c = courier(*QUICK)
    out = c.fetch(origin.url(f"/flaky/f{status}?statuses={status},200&retry-after=0"))
    assert out["ok"] is False and out["error"]["code"] == "http_status"
    assert out["error"]["httpStatus"] == status and "retryAfter" not in out["error"]
    assert out["attempts"] == 1 and origin.hits(f"/flaky/f{status}") == 1
    assert c.notifications(RETRYING) == []


def test_a_body_cut_short_is_asked_again(courier, origin):
    c = courier(*QUICK)
    out = c.fetch(origin.url("/cut/body?times=2&size=200000&send=70000"), body="base64")
    assert out["ok"] is True, out
    assert base64.b64decode(out["base64"]) == pattern(200000, "body")
    assert out["attempts"] == 3 and origin.hits("/cut/body") == 3
    errors = [n.params["error"] for n in c.notifications(RETRYING)]
    assert [e["code"] for e in errors] == ["network", "network"]
    assert all(isinstance(e["curlCode"], int) for e in errors)


def test_a_refused_connection_is_asked_again_until_the_budget_is_spent(courier):
    c = courier(*QUICK)
    out = c.fetch(f"http://127.0.0.1:{closed_port()}/x", retries=2)
    assert out["error"]["code"] == "connect_failed" and out["attempts"] == 3
    assert [n.params["error"]["code"] for n in c.notifications(RETRYING)] == ["connect_failed"] * 2


def test_a_timeout_is_asked_again_and_each_attempt_has_its_own(courier, origin):
    c = courier(*QUICK)
    out = c.fetch(origin.url("/stall?after=10&hold=10"), transfer_timeout=0.3, retries=1)
    assert out["error"]["code"] == "timeout" and out["attempts"] == 2
    assert origin.hits("/stall") == 2
    assert 550 <= out["durationMs"] < 5000


def test_a_tls_failure_is_not_retried(courier, origin):
    c = courier(*QUICK)
    out = c.fetch(f"https://127.0.0.1:{origin.port}/bytes/10")
    assert out["error"]["code"] == "tls_failed" and out["attempts"] == 1
    assert c.notifications(RETRYING) == []


# --------------------------------------------------------------------------
# Retry-After


def test_retry_after_in_seconds_is_waited_for(courier, origin):
    c = courier(*QUICK)
    result = c.download(origin.url("/flaky/ra?statuses=503,200&retry-after=1"))
    out = c.wait(result["receipt"])
    assert out["ok"] is True and out["attempts"] == 2
    assert [n["delay"] for n in retried(c, result["receipt"])] == [1]
    waited = note_time(c, "download/finished") - note_time(c, RETRYING)
    assert waited >= 0.95, waited


def test_retry_after_as_a_date_is_waited_for(courier, origin):
    c = courier(*QUICK)
    result = c.download(origin.url("/flaky/date?statuses=503,200&retry-after-in=2"))
    out = c.wait(result["receipt"])
    assert out["ok"] is True and out["attempts"] == 2
    [notice] = retried(c, result["receipt"])
    # The date is whole seconds: 1 or 2 s from when it arrived.
    assert notice["delay"] in (1, 2), notice
    waited = note_time(c, "download/finished") - note_time(c, RETRYING)
    assert waited >= notice["delay"] - 0.05, waited


def test_a_retry_after_beyond_the_longest_wait_fails_at_once_with_it(courier, origin):
    c = courier(*QUICK, "--retry-max-delay", "5")
    out = c.fetch(origin.url("/flaky/long?statuses=429,200&retry-after=6"))
    assert out["error"]["code"] == "http_status" and out["error"]["retryAfter"] == 6
    assert out["attempts"] == 1 and origin.hits("/flaky/long") == 1
    assert out["headers"]["retry-after"] == "6"
    assert out["durationMs"] < 2000
    assert c.notifications(RETRYING) == []


def test_a_retry_after_past_the_max_time_fails_at_once_with_it(courier, origin):
    c = courier(*QUICK, "--retry-max-time", "3")
    out = c.fetch(origin.url("/flaky/late?statuses=503,200&retry-after=4"))
    assert out["error"]["retryAfter"] == 4 and out["attempts"] == 1
    assert c.notifications(RETRYING) == []


@pytest.mark.parametrize("value", [
    "-5", "soon", "1.5", "0x10", "", "Fri, 31 Dec 99999 23:59:59 GMT", "Mon, 32 Jan 2024 00:00:00 GMT",
])
def test_a_retry_after_courier_cannot_read_is_ignored(courier, origin, value):
    c = courier(*QUICK)
    out = c.fetch(origin.url(f"/flaky/odd?statuses=503,200&retry-after={quote(value)}"))
    assert out["ok"] is True and out["attempts"] == 2
    [notice] = [n.params for n in c.notifications(RETRYING)]
    assert notice["delay"] < 0.01, "the backoff alone"


@pytest.mark.parametrize("value", ["18446744073709551616", "9" * 400])
def test_an_absurdly_long_retry_after_fails_at_once_bounded(courier, origin, value):
    c = courier(*QUICK)
    out = c.fetch(origin.url(f"/flaky/absurd?statuses=503,200&retry-after={value}"))
    assert out["error"]["code"] == "http_status" and out["error"]["retryAfter"] == 2 ** 53
    assert out["attempts"] == 1
    assert c.request("progress", {}) == {"tasks": []}, "courier goes on serving"


# --------------------------------------------------------------------------
# Limits


def test_no_attempt_starts_after_the_max_time(courier, origin):
    # Waits of 0.025-0.05 s, doubling: the sixth would end past 1 s.
    c = courier("--retry-delay", "0.05", "--retry-max-time", "1")
    result = c.download(origin.url("/flaky/deadline?statuses=503"), retries=50)
    out = c.wait(result["receipt"])
    notices = retried(c, result["receipt"])
    assert out["error"]["code"] == "http_status" and "retryAfter" not in out["error"]
    assert out["attempts"] == len(notices) + 1 == origin.hits("/flaky/deadline")
    assert 2 <= out["attempts"] <= 6
    assert sum(n["delay"] for n in notices) <= 1


def test_retries_zero_turns_retrying_off(courier, origin):
    c = courier(*QUICK)
    out = c.fetch(origin.url("/flaky/zero?statuses=503,200"), retries=0)
    assert out["error"]["httpStatus"] == 503 and out["attempts"] == 1
    assert origin.hits("/flaky/zero") == 1


def test_the_retries_flag_and_option_set_the_default(courier, origin):
    c = courier(*QUICK, "--retries", "0")
    assert c.initialize()["config"]["retries"] == 0
    assert c.fetch(origin.url("/flaky/flag?statuses=503,200"))["attempts"] == 1
    assert c.fetch(origin.url("/flaky/param?statuses=503,200"), retries=1)["attempts"] == 2
    config = c.initialize(retries=2, retryDelay=0.002, retryMaxDelay=10, retryMaxTime=20)["config"]
    assert (config["retries"], config["retryDelay"], config["retryMaxDelay"], config["retryMaxTime"]) == (2, 0.002, 10, 20)
    assert c.fetch(origin.url("/flaky/option?statuses=503,503,503,200"))["attempts"] == 3


def test_the_defaults_are_the_contracts(courier):
    config = courier().initialize()["config"]
    assert (config["retries"], config["retryDelay"], config["retryMaxDelay"], config["retryMaxTime"]) == (3, 0.5, 30, 60)


@pytest.mark.parametrize("args, message", [
    (["--retries=-1"], "--retries must be 0 to 1000"),
    (["--retries", "1001"], "--retries must be 0 to 1000"),
    (["--retries", "x"], "The value 'x' is invalid for '--retries <retries>'"),
    (["--retry-delay=-0.5"], "--retry-delay must be 0 to 3600 seconds"),
    (["--retry-max-delay", "86401"], "--retry-max-delay must be 0 to 86400 seconds"),
    (["--retry-max-time", "nan"], "--retry-max-time must be 0 to 31536000 seconds"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_bad_retry_flags_say_what_is_wrong(args, message):
    done = subprocess.run([COURIER, *args], input="", capture_output=True, text=True, timeout=10)
    assert done.returncode == 64, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"Error: {message}\n"), done.stderr


@pytest.mark.parametrize("retries", [-1, 1001, 1.5, "3", None, True])
def test_bad_retries_are_invalid_params_and_courier_goes_on(courier, origin, retries):
    c = courier()
    response = c.wait_response(c.send_request("download", {"url": origin.url("/bytes/1"), "retries": retries}))
    assert response["error"]["code"] == -32602 and response["error"]["data"] == {"param": "retries"}
    assert c.fetch(origin.url("/bytes/1"), retries=1000)["ok"] is True


# --------------------------------------------------------------------------
# A task while it waits


def test_a_waiting_task_holds_no_place_is_not_counted_and_keeps_views_animating(courier, origin):
    # Given one place, a spinner bound to a download whose origin asks for 30 s
    c = courier(*QUICK, "--max-active", "1", "--retry-max-delay", "60", "--activation-delay", "0",
                "--completion-delay", "0")
    waiting = c.download(origin.url("/flaky/wait?statuses=503,200&retry-after=30"))
    c.bind("spinner", task=waiting["task"])
    c.wait_notification(RETRYING)
    # Then it is `retrying`, and another download takes the place and finishes
    assert c.progress(waiting["receipt"])["state"] == "retrying"
    assert [t["state"] for t in c.progress()["tasks"]] == ["retrying"]
    other = c.fetch(origin.url("/bytes/10"))
    assert other["ok"] is True
    c.wait_until(lambda: c.indicator_state()["activityCount"] == 0, what="no activity")
    # and its views keep animating; one bound now starts animating
    assert c.bind("late", task=waiting["task"]) == {"bound": True}
    animating = lambda: [(n.params["view"], n.params["animating"]) for n in c.notifications("view/animating")]
    c.wait_until(lambda: ("late", True) in animating(), what="the late view animating")
    assert animating() == [("spinner", True), ("late", True)]
    # When it is cancelled, it ends at once and its views stop
    started = time.monotonic()
    assert c.cancel(waiting["receipt"]) == {"cancelled": True, "count": 1}
    out = c.wait(waiting["receipt"], timeout=5)
    assert out["error"]["code"] == "cancelled" and out["attempts"] == 1
    assert time.monotonic() - started < 2
    c.wait_until(lambda: ("late", False) in animating(), what="the views stopping")
    assert animating()[2:] == [("spinner", False), ("late", False)]
    c.shutdown()
    assert origin.hits("/flaky/wait") == 1


def test_shutdown_ends_a_waiting_receipt_at_once(courier, origin):
    c = courier(*QUICK, "--retry-max-delay", "60")
    result = c.download(origin.url("/flaky/down?statuses=503,200&retry-after=30"))
    c.wait_notification(RETRYING)
    started = time.monotonic()
    assert c.shutdown() is None
    assert time.monotonic() - started < 5
    out = c.wait(result["receipt"], timeout=1)
    assert out["error"]["code"] == "shutdown" and out["attempts"] == 1
    assert origin.hits("/flaky/down") == 1


def test_budgets_are_per_receipt_on_a_coalesced_task(courier, origin):
    # Given three receipts of one task, the origin holding its first answer
    c = courier(*QUICK)
    url = origin.url("/flaky/shared?statuses=503,503,503,200&hold=1")
    none = c.download(url, retries=0)
    origin.wait_held("flaky/shared")
    one = c.download(url, retries=1)
    three = c.download(url, retries=3)
    assert none["task"] == one["task"] == three["task"]
    origin.release("flaky/shared")
    outcomes = c.wait_all([none["receipt"], one["receipt"], three["receipt"]])
    # Then each ends when its own budget is spent; the origin is asked 4 times
    assert [(o["ok"], o["attempts"]) for o in outcomes.values()] == [(False, 1), (False, 2), (True, 4)]
    assert origin.hits("/flaky/shared") == 4
    assert [n.params["receipts"] for n in c.notifications(RETRYING)] == [
        [one["receipt"], three["receipt"]], [three["receipt"]], [three["receipt"]]]
    order = [n.params["receipt"] if n.method == "download/finished" else "retrying"
             for n in c.notifications() if n.method in ("download/finished", RETRYING)]
    assert order == [none["receipt"], "retrying", one["receipt"], "retrying", "retrying", three["receipt"]]


def test_every_outcome_says_how_many_requests_it_took(courier, origin):
    c = courier(*QUICK)
    url = origin.url("/flaky/count?statuses=500,200&size=10")
    assert c.fetch(url)["attempts"] == 2
    hit = c.fetch(url, cachePolicy="cacheElseLoad")
    assert hit["source"] in ("memory", "disk") and hit["attempts"] == 0
    refused = c.fetch("ftp://127.0.0.1/x")
    assert refused["error"]["code"] == "scheme_not_allowed" and refused["attempts"] == 0
