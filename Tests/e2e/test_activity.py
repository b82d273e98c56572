"""The network activity indicator and view bindings, end to end.

Every scenario runs real transfers from the local origin through courier with
short delays (activation 0.3 s, completion 0.1 s unless a test needs other
values) and waits on notifications, never on a clock. After each scenario the
`activity` fixture checks that the activity count is back at zero and the
indicator hidden, that visibility changes alternated, and that every message
courier wrote matches protocol/openrpc.json.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from typing import Any

import pytest

from courier_client import RpcError
from schema import validate_message

ACTIVATION = 0.3
COMPLETION = 0.1
FAST = ("--activation-delay", str(ACTIVATION), "--completion-delay", str(COMPLETION))

# Timing bounds. Start and end times are the client's receive times of the
# `download` response and of `download/finished`; both leave courier just
# after the indicator's timer starts, so a measured delay may be a few ms
# short of the configured one, never much more so. The upper slack absorbs
# scheduling on a loaded machine.
EARLY = 0.05
LATE = 0.35

VISIBILITY = "indicator/visibility"


# --------------------------------------------------------------------------
# Helpers


def drip(origin, seconds: float, size: int = 20_000, chunked: bool = False,
         seed: str = "") -> str:
    """A /drip URL whose body takes about ``seconds`` to arrive."""
    chunks = max(2, round(seconds / 0.05) + 1)
    url = f"/drip?size={size}&chunks={chunks}&interval={seconds / (chunks - 1):.4f}"
    if chunked:
        url += "&length=0"
    if seed:
        url += f"&seed={seed}"
    return origin.url(url)


def stall(origin, tag: str = "") -> str:
    """A transfer that runs until stopped: 1000 bytes, then nothing."""
    return origin.url(f"/stall?after=1000&hold=30&seed={tag}")


def end(session, result: dict) -> None:
    """Cancels the receipt of a transfer that would otherwise run on."""
    assert session.cancel(result["receipt"]) == {"cancelled": True, "count": 1}


def refused_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/nothing"


def elapse(origin, seconds: float) -> float:
    """Fetches, outside courier, a body the origin takes at least ``seconds``
    to send; returns how long that took. Used to let a span of time pass that
    courier's own timers would have filled with events."""
    start = time.monotonic()
    with urllib.request.urlopen(drip(origin, seconds, size=100), timeout=10) as response:
        response.read()
    took = time.monotonic() - start
    assert took >= seconds - 0.01, f"the origin's drip took {took:.3f} s, expected {seconds} s"
    return took


def timed(session, method: str, params: dict | None = None,
          timeout: float = 10) -> tuple[Any, float, int]:
    """Sends a request; returns (result, receive time, index in session.messages)."""
    rid = session.send_request(method, params)
    response = session.wait_response(rid, timeout)
    if "error" in response:
        raise RpcError.from_response(response)
    with session._cv:
        for index, entry in enumerate(session.messages):
            if isinstance(entry.message, dict) and entry.message.get("id") == rid:
                return response["result"], entry.time, index
    raise AssertionError(f"response {rid} is not in the message log")


def start(session, url: str, **params: Any) -> tuple[dict, float]:
    """``download``; returns its result and the receive time of the response."""
    result, at, _ = timed(session, "download", {"url": url, **params})
    return result, at


def visibility(session) -> list:
    """Every indicator/visibility notification so far (entries with .time)."""
    return session.notifications(VISIBILITY)


def wait_visible(session, visible: bool, since: int = 0, timeout: float = 5):
    """The first indicator/visibility with ``visible`` from index ``since``."""
    return session.wait_notification_entry(
        lambda m, p: m == VISIBILITY and p["visible"] is visible, timeout, since)


def finished_entry(session, receipt: str, timeout: float = 20):
    return session.wait_notification_entry(
        lambda m, p: m == "download/finished" and p["receipt"] == receipt, timeout)


def view_events(session, view: str, kind: str | None = None) -> list:
    """Notifications (entries) addressed to ``view``, optionally of one kind."""
    methods = {"animating": ("view/animating",), "progress": ("view/progress",),
               None: ("view/animating", "view/progress")}[kind]
    return [n for n in session.notifications()
            if n.method in methods and n.params.get("view") == view]


def animating(session, view: str) -> list[bool]:
    return [n.params["animating"] for n in view_events(session, view, "animating")]


def message_indices(session, predicate, start: int = 0) -> list[int]:
    """Indices in session.messages (from ``start``) of the messages for which
    predicate holds."""
    with session._cv:
        return [index for index, entry in enumerate(session.messages)
                if index >= start and isinstance(entry.message, dict)
                and predicate(entry.message)]


def message_index(session, predicate, start: int = 0) -> int:
    """Index in session.messages of the first such message from ``start``."""
    found = message_indices(session, predicate, start)
    assert found, "no such message in the log"
    return found[0]


def log_mark(session) -> int:
    with session._cv:
        return len(session.messages)


def bind(session, view: str, **params: Any) -> tuple[dict, int]:
    """``bind``; once bound, waits for the view's first notification, which
    comes after the response. Returns the result and the response's index."""
    mark = session.mark()
    result, _, index = timed(session, "bind", {"view": view, **params})
    if result["bound"]:
        session.wait_notification(
            lambda m, p: m.startswith("view/") and p.get("view") == view, 5, mark)
    return result, index


def is_note(method: str, **fields: Any):
    def predicate(message: dict) -> bool:
        params = message.get("params") or {}
        return message.get("method") == method and all(
            params.get(k) == v for k, v in fields.items())
    return predicate


def wait_received(session, task: str, at_least: int, timeout: float = 10) -> dict:
    """Waits for a download/progress of ``task`` with ``received >= at_least``."""
    return session.wait_notification(
        lambda m, p: m == "download/progress" and p["task"] == task
        and p["received"] >= at_least, timeout)


def state(session) -> dict:
    return session.indicator_state()


def settle(session) -> None:
    """The end of every scenario: nothing counts, the indicator is (or, after
    its pending hide, becomes) hidden, visibility changes alternated."""
    current = state(session)
    validate_message({"jsonrpc": "2.0", "id": 0, "result": current}, "indicator/state")
    assert current["activityCount"] == 0, f"activity left at the end: {current}"
    if current["visible"]:
        assert current["state"] == "delayingEnd", current
        session.wait_until(
            lambda: visibility(session) and visibility(session)[-1].params["visible"] is False,
            timeout=current["completionDelay"] + 5, what="the pending hide")
        current = state(session)
    assert current["visible"] is False and current["state"] == "notActive", current
    assert current["activityCount"] == 0, current
    seen = [n.params for n in visibility(session)]
    for i, params in enumerate(seen):
        assert params["visible"] is (i % 2 == 0), f"visibility did not alternate: {seen}"
        if params["visible"]:
            assert params["activityCount"] >= 1, seen
    for entry in session.messages:
        message = entry.message
        if isinstance(message, dict) and "method" in message:
            validate_message(message)
        elif isinstance(message, dict):
            validate_message(message, session.methods_by_id.get(message.get("id")))


@pytest.fixture
def activity(courier):
    """Starts courier with the short delays (``delays=()`` for the defaults);
    at teardown each session must have settled (see ``settle``)."""
    sessions = []

    def launch(*args: str, delays: tuple = FAST, **kwargs: Any):
        session = courier(*delays, *args, **kwargs)
        sessions.append(session)
        return session

    yield launch
    for session in sessions:
        if session.alive:
            settle(session)


# --------------------------------------------------------------------------
# indicator/state and the command line


def test_state_fields_flags_and_defaults(activity):
    fast = activity()
    assert state(fast) == {"enabled": True, "state": "notActive", "visible": False,
                           "activityCount": 0, "activationDelay": ACTIVATION,
                           "completionDelay": COMPLETION}
    default = activity(delays=())
    initial = state(default)
    assert (initial["activationDelay"], initial["completionDelay"]) == (1.0, 0.17)
    assert initial["enabled"] is True
    off = activity("--no-indicator")
    assert state(off)["enabled"] is False

    changed = fast.indicator_configure(activationDelay=0.25, completionDelay=0.05)
    assert (changed["activationDelay"], changed["completionDelay"]) == (0.25, 0.05)
    assert state(fast) == changed
    for bad in ({"activationDelay": -1}, {"completionDelay": "soon"}, {"enabled": "yes"},
                {"brightness": 1}):
        with pytest.raises(RpcError) as error:
            fast.indicator_configure(**bad)
        assert error.value.code == -32602, bad
    assert state(fast) == changed


# --------------------------------------------------------------------------
# Short activity never shows


def test_short_transfers_show_nothing(activity, origin):
    session = activity()
    assert session.fetch(origin.url("/bytes/1000"))["ok"]
    receipts = [session.download(drip(origin, 0.1, size=500, seed=s))["receipt"] for s in "ab"]
    last = max(finished_entry(session, r).time for r in receipts)
    assert all(session.outcomes[r][0]["ok"] for r in receipts)
    now = state(session)
    assert (now["state"], now["visible"], now["activityCount"]) == ("notActive", False, 0)

    # Let more than activation + completion delay pass after the last one,
    # then ask: a timer left running would have shown the indicator by now,
    # and its notification would precede the answer.
    elapse(origin, ACTIVATION + COMPLETION + 0.1)
    _, answered, index = timed(session, "indicator/state")
    assert answered - last >= ACTIVATION + COMPLETION
    assert [m for m in session.messages[:index] if isinstance(m.message, dict)
            and m.message.get("method") == VISIBILITY] == []

    # The same session does show a transfer that outlasts the delay.
    result, started = start(session, drip(origin, 0.6))
    shown = wait_visible(session, True)
    assert shown.time - started >= ACTIVATION - EARLY
    finished_entry(session, result["receipt"])
    wait_visible(session, False)
    assert len(visibility(session)) == 2


def test_failures_and_fast_transfers_leave_count_zero(activity, origin):
    session = activity()
    outcome = session.fetch(origin.url("/status/404"))
    assert outcome["error"]["code"] == "http_status"
    # A transfer stops counting before its last receipt's download/finished.
    assert state(session)["activityCount"] == 0
    outcome = session.fetch(origin.url("/bytes/5000"), maxBytes=10)
    assert outcome["error"]["code"] == "too_large"
    assert state(session)["activityCount"] == 0
    outcome = session.fetch(refused_url(), retries=0)
    assert outcome["error"]["code"] == "connect_failed"
    assert state(session)["activityCount"] == 0
    for _ in range(2):  # the second may be served from a cache: hits do not count
        assert session.fetch(origin.url("/cache?max-age=600&body=x"))["ok"]
        assert state(session)["activityCount"] == 0
    assert session.fetch(origin.url("/bytes/2000"), cachePolicy="reload")["ok"]
    now = state(session)
    assert (now["activityCount"], now["state"]) == (0, "notActive")
    assert visibility(session) == []


# --------------------------------------------------------------------------
# Long activity: one show, one hide


def test_long_transfer_shows_once_then_hides(activity, origin):
    session = activity()
    result, started = start(session, drip(origin, 0.8))
    assert result["state"] == "running"
    shown = wait_visible(session, True)
    assert shown.params == {"visible": True, "activityCount": 1}
    assert ACTIVATION - EARLY <= shown.time - started <= ACTIVATION + LATE
    during = state(session)
    assert (during["state"], during["visible"], during["activityCount"]) == ("active", True, 1)

    ended = finished_entry(session, result["receipt"])
    assert ended.params["outcome"]["ok"]
    hidden = wait_visible(session, False)
    assert hidden.params == {"visible": False, "activityCount": 0}
    assert COMPLETION - EARLY <= hidden.time - ended.time <= COMPLETION + LATE
    assert [n.params["visible"] for n in visibility(session)] == [True, False]


def test_overlapping_transfers_show_and_hide_once(activity, origin):
    session = activity()
    first, started = start(session, drip(origin, 0.6, seed="1"))
    wait_received(session, first["task"], 1)
    second, _ = start(session, drip(origin, 0.9, seed="2"))
    assert state(session)["activityCount"] == 2
    shown = wait_visible(session, True)
    assert shown.params == {"visible": True, "activityCount": 2}
    assert ACTIVATION - EARLY <= shown.time - started <= ACTIVATION + LATE

    one = finished_entry(session, first["receipt"])
    two = finished_entry(session, second["receipt"])
    assert one.time < two.time
    hidden = wait_visible(session, False)
    assert hidden.params["activityCount"] == 0
    assert COMPLETION - EARLY <= hidden.time - two.time <= COMPLETION + LATE
    assert [n.params["visible"] for n in visibility(session)] == [True, False]


def test_activity_returning_during_delaying_end_keeps_it_visible(activity, origin):
    session = activity(delays=("--activation-delay", "0.3", "--completion-delay", "0.6"))
    first, _ = start(session, drip(origin, 0.5, seed="1"))
    wait_visible(session, True)
    finished_entry(session, first["receipt"])
    between = state(session)
    assert (between["state"], between["visible"], between["activityCount"]) == \
        ("delayingEnd", True, 0)

    second, _ = start(session, drip(origin, 0.5, seed="2"))
    back = state(session)
    assert (back["state"], back["visible"], back["activityCount"]) == ("active", True, 1)
    ended = finished_entry(session, second["receipt"])
    hidden = wait_visible(session, False, timeout=5)
    assert 0.6 - EARLY <= hidden.time - ended.time <= 0.6 + LATE
    assert [n.params["visible"] for n in visibility(session)] == [True, False]


# --------------------------------------------------------------------------
# The count: suspend, resume, cancel, coalescing, client activity


def test_suspend_resume_and_cancel_of_a_suspended_transfer(activity, origin):
    session = activity()
    result, _ = start(session, stall(origin))
    task = result["task"]
    wait_received(session, task, 1000)
    assert state(session)["activityCount"] == 1
    assert session.suspend(task=task) == {"task": task, "state": "suspended"}
    assert state(session)["activityCount"] == 0
    assert session.suspend(task=task)["state"] == "suspended"
    assert state(session)["activityCount"] == 0
    assert session.resume(task=task)["state"] == "running"
    assert state(session)["activityCount"] == 1
    assert session.resume(task=task)["state"] == "running"
    assert state(session)["activityCount"] == 1
    session.suspend(task=task)
    assert session.cancel(result["receipt"]) == {"cancelled": True, "count": 1}
    assert session.outcomes[result["receipt"]][0]["error"]["code"] == "cancelled"
    assert state(session)["activityCount"] == 0

    # Had the cancel taken the count below zero, a new transfer would leave it at 0.
    other, _ = start(session, stall(origin, "other"))
    assert state(session)["activityCount"] == 1
    end(session, other)
    assert state(session)["activityCount"] == 0


def test_queued_and_suspended_before_start_never_count(activity, origin):
    session = activity("--max-active", "1")
    running, _ = start(session, drip(origin, 0.4, seed="a"))
    queued, _ = start(session, drip(origin, 0.6, seed="b"))
    assert queued["state"] == "queued"
    assert state(session)["activityCount"] == 1
    assert session.suspend(task=queued["task"])["state"] == "suspended"
    assert state(session)["activityCount"] == 1
    assert session.wait(running["receipt"])["ok"]
    assert state(session)["activityCount"] == 0
    assert session.progress(queued["receipt"])["state"] == "suspended"
    session.resume(task=queued["task"])
    wait_received(session, queued["task"], 1)
    assert state(session)["activityCount"] == 1
    assert session.wait(queued["receipt"])["ok"]
    assert state(session)["activityCount"] == 0


def test_coalesced_receipts_count_their_task_once(activity, origin):
    session = activity()
    url = stall(origin)
    first, _ = start(session, url)
    second, _ = start(session, url)
    assert first["task"] == second["task"]
    assert state(session)["activityCount"] == 1
    session.cancel(first["receipt"])
    assert state(session)["activityCount"] == 1
    end(session, second)
    assert state(session)["activityCount"] == 0


def test_client_increment_and_decrement(activity, origin):
    session = activity()
    assert session.indicator_decrement()["activityCount"] == 0
    counted = session.indicator_increment()
    assert (counted["activityCount"], counted["state"]) == (1, "delayingStart")
    _, incremented, _ = timed(session, "indicator/state")
    shown = wait_visible(session, True)
    assert shown.params == {"visible": True, "activityCount": 1}
    assert shown.time - incremented >= ACTIVATION - EARLY

    result, _ = start(session, stall(origin))
    assert state(session)["activityCount"] == 2
    assert session.indicator_decrement()["activityCount"] == 1
    # No increments left: a decrement must not take the transfer's count away.
    after = session.indicator_decrement()
    assert (after["activityCount"], after["visible"]) == (1, True)
    end(session, result)
    hidden = wait_visible(session, False)
    assert hidden.params["activityCount"] == 0
    assert [n.params["visible"] for n in visibility(session)] == [True, False]


# --------------------------------------------------------------------------
# Enabling, disabling, delays


def test_disabling_hides_at_once_and_enabling_waits_the_activation_delay(activity, origin):
    session = activity(delays=("--activation-delay", "0.3", "--completion-delay", "5"))
    result, _ = start(session, stall(origin))
    wait_visible(session, True)

    mark = session.mark()
    off, answered, index = timed(session, "indicator/configure", {"enabled": False})
    assert (off["enabled"], off["visible"], off["state"], off["activityCount"]) == \
        (False, False, "notActive", 1)
    # At once: not after the (long) completion delay; it precedes the answer.
    hidden = wait_visible(session, False, since=mark, timeout=1)
    assert hidden.params == {"visible": False, "activityCount": 1}
    assert message_index(session, is_note(VISIBILITY, visible=False)) < index

    # Disabled: the count is tracked, nothing shows.
    second, _ = start(session, stall(origin, "2"))
    assert state(session)["activityCount"] == 2
    elapse(origin, ACTIVATION + 0.1)
    assert len(visibility(session)) == 2

    on, enabled_at, _ = timed(session, "indicator/configure", {"enabled": True})
    assert (on["enabled"], on["state"], on["visible"]) == (True, "delayingStart", False)
    shown = wait_visible(session, True, since=mark)
    assert shown.params == {"visible": True, "activityCount": 2}
    assert ACTIVATION - EARLY <= shown.time - enabled_at <= ACTIVATION + LATE

    end(session, result)
    end(session, second)
    # Disabling again during delayingEnd hides at once rather than after 5 s.
    assert state(session)["state"] == "delayingEnd"
    off = session.indicator_configure(enabled=False)
    assert (off["visible"], off["state"], off["activityCount"]) == (False, "notActive", 0)
    assert [n.params["visible"] for n in visibility(session)] == [True, False, True, False]


def test_no_indicator_flag_sends_no_visibility(activity, origin):
    session = activity("--no-indicator")
    result, _ = start(session, drip(origin, 0.6))
    wait_received(session, result["task"], 1)
    during = state(session)
    assert (during["enabled"], during["activityCount"], during["state"]) == (False, 1, "notActive")
    finished_entry(session, result["receipt"])
    assert state(session)["activityCount"] == 0
    assert visibility(session) == []


def test_activation_delay_change_while_its_timer_runs(activity, origin):
    """The documented rule: a new delay counts from the moment the running
    timer started; when that moment is already past, the change takes effect
    at once."""
    session = activity(delays=("--activation-delay", "5", "--completion-delay", "0.1"))
    # Chunks at about 0, 0.4, 0.8 and 1.2 s: configure once the second is in.
    first, started = start(session, origin.url("/drip?size=4000&chunks=4&interval=0.4"))
    wait_received(session, first["task"], 2000)
    _, changed_at, _ = timed(session, "indicator/configure", {"activationDelay": 0.6})
    assert changed_at - started >= 0.35
    shown = wait_visible(session, True, timeout=3)
    # 0.6 s after the transfer started, not 0.6 s after the change (>= 0.95).
    assert 0.6 - EARLY <= shown.time - started <= 0.85
    finished_entry(session, first["receipt"])
    wait_visible(session, False)

    # Shrunk below the time already spent: shown with the change itself.
    session.indicator_configure(activationDelay=5)
    second, _ = start(session, stall(origin))
    wait_received(session, second["task"], 1000)
    elapse(origin, 0.25)
    mark = log_mark(session)
    now, _, index = timed(session, "indicator/configure", {"activationDelay": 0.2})
    assert (now["state"], now["visible"]) == ("active", True)
    assert message_index(session, is_note(VISIBILITY, visible=True), mark) < index
    ending = session.mark()
    end(session, second)
    wait_visible(session, False, since=ending)
    assert [n.params["visible"] for n in visibility(session)] == [True, False, True, False]


def test_completion_delay_change_while_its_timer_runs(activity, origin):
    """A zero activation delay shows with the activity itself; a completion
    delay shortened below the time already spent in delayingEnd hides with
    the change."""
    session = activity(delays=("--activation-delay", "0", "--completion-delay", "5"))
    result, _ = start(session, stall(origin))
    shown = wait_visible(session, True, timeout=2)
    assert shown.params["activityCount"] == 1
    _, stopped_at, _ = timed(session, "suspend", {"task": result["task"]})
    assert state(session)["state"] == "delayingEnd"
    elapse(origin, 0.3)
    assert state(session)["state"] == "delayingEnd"
    mark = session.mark()
    now, answered, _ = timed(session, "indicator/configure", {"completionDelay": 0.2})
    assert answered - stopped_at >= 0.3
    assert (now["state"], now["visible"], now["completionDelay"]) == ("notActive", False, 0.2)
    hidden = wait_visible(session, False, since=mark, timeout=1)
    assert hidden.time <= answered
    session.cancel(result["receipt"])
    assert [n.params["visible"] for n in visibility(session)] == [True, False]


# --------------------------------------------------------------------------
# Bindings


def test_bind_sends_current_state_after_the_response_and_follows_the_task(activity, origin):
    session = activity()
    size = 20_000
    result, _ = start(session, drip(origin, 0.5, size=size))
    task = result["task"]
    spun, spin_index = bind(session, "spinner", task=task)
    barred, bar_index = bind(session, "bar", receipt=result["receipt"], kind="progress")
    assert spun == barred == {"bound": True}
    ended = finished_entry(session, result["receipt"])
    assert ended.params["outcome"]["ok"]

    assert message_index(session, is_note("view/animating", view="spinner")) > spin_index
    assert message_index(session, is_note("view/progress", view="bar")) > bar_index
    assert animating(session, "spinner") == [True, False]
    assert view_events(session, "spinner", "progress") == []
    assert view_events(session, "bar", "animating") == []

    bar = [n.params for n in view_events(session, "bar")]
    received = [p["received"] for p in bar]
    assert received == sorted(received) and len(set(received)) == len(received)
    for p in bar:
        if p["expected"] is None:  # bound before the response head arrived
            assert (p["received"], p["fraction"]) == (0, None), bar
        else:
            assert p["expected"] == size
            assert p["fraction"] == pytest.approx(p["received"] / size)
    assert (bar[-1]["received"], bar[-1]["fraction"]) == (size, 1.0)
    assert len(bar) >= 3
    # Both bindings end with the task: nothing for them after download/finished.
    assert all(n.time <= ended.time for n in view_events(session, "spinner")
               + view_events(session, "bar"))
    last_view = max(message_indices(session, lambda m: str(m.get("method")).startswith("view/")))
    assert last_view < message_index(session, is_note("download/finished",
                                                      receipt=result["receipt"]))


def test_animating_follows_suspend_resume_and_every_ending(activity, origin):
    session = activity()
    cancelled, _ = start(session, stall(origin, "c"))
    assert session.bind("a", task=cancelled["task"]) == {"bound": True}
    wait_received(session, cancelled["task"], 1000)
    session.suspend(task=cancelled["task"])
    assert session.bind("b", task=cancelled["task"]) == {"bound": True}
    session.resume(task=cancelled["task"])
    session.suspend(task=cancelled["task"])
    session.resume(task=cancelled["task"])
    session.cancel(cancelled["receipt"])
    assert animating(session, "a") == [True, False, True, False, True, False]
    assert animating(session, "b") == [False, True, False, True, False]

    # Cancelling a suspended task: its views already heard false.
    paused, _ = start(session, stall(origin, "p"))
    bind(session, "p", task=paused["task"])
    session.suspend(task=paused["task"])
    session.cancel(paused["receipt"])
    assert animating(session, "p") == [True, False]

    failed, _ = start(session, stall(origin, "f"), timeout=0.5, retries=0)
    session.bind("f", task=failed["task"])
    outcome = session.wait(failed["receipt"])
    assert outcome["error"]["code"] == "timeout"
    session.wait_until(lambda: len(animating(session, "f")) == 2, 5, "view f's last event")
    assert animating(session, "f") == [True, False]

    done, _ = start(session, drip(origin, 0.3))
    session.bind("d", receipt=done["receipt"])
    assert session.wait(done["receipt"])["ok"]
    assert animating(session, "d") == [True, False]


def test_binding_to_a_queued_task(activity, origin):
    session = activity("--max-active", "1")
    blocker, _ = start(session, drip(origin, 0.4, seed="blocker"))
    queued, _ = start(session, drip(origin, 0.2, size=3000))
    assert queued["state"] == "queued"
    bind(session, "spin", task=queued["task"])
    bind(session, "bar", task=queued["task"], kind="progress")
    assert animating(session, "spin") == [False]
    assert [n.params for n in view_events(session, "bar")] == [
        {"view": "bar", "fraction": None, "received": 0, "expected": None}]
    assert session.wait(blocker["receipt"])["ok"]
    assert session.wait(queued["receipt"])["ok"]
    assert animating(session, "spin") == [False, True, False]
    assert view_events(session, "bar")[-1].params["fraction"] == 1.0


@pytest.mark.parametrize("path", ["drip", "bytes"])
def test_progress_fraction_is_null_while_the_size_is_unknown(activity, origin, path):
    session = activity("--progress-interval", "0", "--max-active", "1")
    size = 300_000
    if path == "drip":
        url = drip(origin, 0.5, size=size, chunked=True)
    else:
        url = origin.url(f"/bytes/{size}?chunked=1")
    # Queued behind a short transfer, so the binding comes before any byte.
    blocker, _ = start(session, drip(origin, 0.1, size=100))
    result, _ = start(session, url)
    assert result["state"] == "queued"
    assert bind(session, "bar", task=result["task"], kind="progress")[0] == {"bound": True}
    assert session.wait(blocker["receipt"])["ok"]
    finished = finished_entry(session, result["receipt"])
    assert finished.params["outcome"]["ok"]
    bar = [n.params for n in view_events(session, "bar")]
    assert bar, "no view/progress at all"
    # While the transfer runs the size is unknown; once it has completed the
    # last update carries the size it turned out to have.
    *running, last = bar
    assert all(p["fraction"] is None and p["expected"] is None for p in running), bar
    assert last == {"view": "bar", "received": size, "expected": size, "fraction": 1.0}
    received = [p["received"] for p in bar]
    assert received == sorted(received)
    assert all(n.time <= finished.time for n in view_events(session, "bar"))


def test_many_views_follow_one_task(activity, origin):
    session = activity()
    result, _ = start(session, drip(origin, 0.5, size=10_000))
    task = result["task"]
    spinners = ["s1", "s2", "s3"]
    bars = ["p1", "p2"]
    for view in spinners:
        session.bind(view, task=task)
    for view in bars:
        session.bind(view, task=task, kind="progress")
    wait_received(session, task, 3000)
    session.suspend(task=task)
    session.resume(task=task)
    assert session.wait(result["receipt"])["ok"]
    for view in spinners:
        assert animating(session, view) == [True, False, True, False], view
    # Bound a moment apart, so the first bar may have heard one more step.
    tails = [[(p.params["received"], p.params["fraction"]) for p in view_events(session, v)]
             for v in bars]
    assert tails[0][-1] == tails[1][-1] == (10_000, 1.0)
    assert tails[1] == tails[0][len(tails[0]) - len(tails[1]):]


def test_rebinding_replaces_and_the_old_task_is_never_heard_again(activity, origin):
    session = activity()
    old, _ = start(session, stall(origin, "old"))
    new, _ = start(session, stall(origin, "new"))
    wait_received(session, old["task"], 1000)
    wait_received(session, new["task"], 1000)
    # Each bind's view notification follows its response: wait for it, so
    # the old binding's first state never lands after the mark.
    bind(session, "v", task=old["task"])
    bind(session, "bar", task=old["task"], kind="progress")
    mark = session.mark()
    bind(session, "v", task=new["task"])
    bind(session, "bar", task=new["task"], kind="progress")
    session.suspend(task=new["task"])
    # The old task's suspension, resumption and end must not reach the views.
    session.suspend(task=old["task"])
    session.resume(task=old["task"])
    session.cancel(old["receipt"])
    session.resume(task=new["task"])
    end(session, new)
    after = [n for n in session.notifications()[mark:] if n.params.get("view") == "v"]
    assert [n.params["animating"] for n in after] == [True, False, True, False]
    bar = [n.params for n in session.notifications()[mark:]
           if n.params.get("view") == "bar"]
    assert bar == [{"view": "bar", "fraction": 0.001, "received": 1000,
                    "expected": 1_000_000}]


def test_null_task_unbinds(activity, origin):
    session = activity()
    result, _ = start(session, stall(origin))
    session.bind("v", task=result["task"])
    session.bind("bar", task=result["task"], kind="progress")
    assert session.bind("v", task=None) == {"bound": False}
    assert session.bind("bar", task=None) == {"bound": False}
    assert session.bind("never-bound", task=None) == {"bound": False}
    mark = session.mark()
    session.suspend(task=result["task"])
    session.resume(task=result["task"])
    end(session, result)
    assert [n for n in session.notifications()[mark:] if n.method.startswith("view/")] == []


def test_binding_to_a_finished_task_sends_nothing(activity, origin):
    session = activity()
    result, _ = start(session, origin.url("/bytes/100"))
    assert session.wait(result["receipt"])["ok"]
    failed, _ = start(session, origin.url("/status/404"))
    session.wait(failed["receipt"])
    assert session.bind("v", task=result["task"]) == {"bound": False}
    assert session.bind("w", receipt=result["receipt"], kind="progress") == {"bound": False}
    assert session.bind("x", task=failed["task"]) == {"bound": False}
    _, _, index = timed(session, "indicator/state")
    views = [m for m in session.messages[:index + 1] if isinstance(m.message, dict)
             and str(m.message.get("method", "")).startswith("view/")]
    assert views == []


def test_bind_errors(activity, origin):
    session = activity()
    with pytest.raises(RpcError) as error:
        session.bind("v", task="t999")
    assert (error.value.code, error.value.data) == (-32001, {"task": "t999"})
    with pytest.raises(RpcError) as error:
        session.bind("v", receipt="r999")
    assert (error.value.code, error.value.data) == (-32001, {"receipt": "r999"})
    result, _ = start(session, stall(origin))
    for params in ({"view": "v"}, {"view": "v", "task": result["task"],
                                   "receipt": result["receipt"]},
                   {"view": "v", "task": result["task"], "kind": "spinner"},
                   {"task": result["task"]}):
        with pytest.raises(RpcError) as error:
            session.request("bind", params)
        assert error.value.code == -32602, params
    assert view_events(session, "v") == []
    end(session, result)


# --------------------------------------------------------------------------
# Cancelling


def test_cancel_of_a_running_transfer_stops_it_at_once(activity, origin):
    session = activity("--max-active", "1", delays=("--activation-delay", "0.6"))
    result, _ = start(session, stall(origin))
    waiting, _ = start(session, origin.url("/bytes/100"))
    assert waiting["state"] == "queued"
    bind(session, "spin", task=result["task"])
    wait_received(session, result["task"], 1000)
    assert state(session)["activityCount"] == 1
    assert session.cancel(result["receipt"]) == {"cancelled": True, "count": 1}
    assert session.outcomes[result["receipt"]][0]["error"]["code"] == "cancelled"
    assert animating(session, "spin") == [True, False]
    # The slot it held is free: the queued download runs and completes.
    assert session.wait(waiting["receipt"])["ok"]
    assert state(session)["activityCount"] == 0
    assert [t["task"] for t in session.progress()["tasks"]] == []
    # Still counting, it would have shown 0.6 s after it started.
    elapse(origin, 0.7)
    assert visibility(session) == []
