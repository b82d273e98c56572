"""End-to-end tests of `download`: outcomes and bodies, coalescing, slots,
suspend/resume, progress, destinations, `wait`, proxies and the flags that
govern downloads. Every test runs against a real origin (scripts/origin.py)
and asserts what the origin saw where it matters."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from courier_client import RpcError
from origin import (DEFAULT_TEXT, INVALID_UTF8, LATIN1_TEXT, gzip_plain, image_bytes,
                    pattern)
from proxy import Proxy
from schema import validate_result

UNKNOWN_RECEIPT = -32001


def drip(origin, tag: str, size: int = 4000, chunks: int = 10, interval: float = 0.05) -> str:
    """A URL whose body (pattern(size, tag)) arrives in `chunks` pieces."""
    return origin.url(f"/drip?size={size}&chunks={chunks}&interval={interval}&seed={tag}")


def drip_path(tag: str, size: int = 4000, chunks: int = 10, interval: float = 0.05) -> str:
    return f"/drip?size={size}&chunks={chunks}&interval={interval}&seed={tag}"


# -- outcomes -------------------------------------------------------------------


def test_outcome_carries_every_field_and_a_path_holding_the_body(courier, origin, cache_dir):
    c = courier()
    url = origin.url("/bytes/5000")
    result = c.download(url)
    assert result["receipt"].startswith("r") and result["task"].startswith("t")
    assert result["state"] in ("queued", "running")
    assert result["reused"] is False

    out = c.wait(result["receipt"])
    assert out["ok"] is True and "error" not in out
    assert out["url"] == url and out["finalUrl"] == url
    assert out["status"] == 200
    assert out["headers"], out
    assert all(name == name.lower() for name in out["headers"])
    assert out["headers"]["content-length"] == "5000"
    assert out["headers"]["server"] == "origin/1.0"
    assert out["contentType"] == "application/octet-stream"
    assert out["size"] == 5000
    assert out["source"] == "network"
    assert isinstance(out["durationMs"], (int, float)) and 0 <= out["durationMs"] < 10_000
    assert "image" not in out and "text" not in out and "base64" not in out

    path = Path(out["path"])
    assert path.read_bytes() == pattern(5000)
    assert path.parent == cache_dir / "downloads" / str(c.pid)
    assert origin.hits("/bytes/5000") == 1
    assert c.finished(result["receipt"])[0]["task"] == result["task"]


def test_redirects_are_followed_and_final_url_reported(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/redirect/3"), body="text")
    assert out["ok"], out
    assert out["url"] == origin.url("/redirect/3")
    assert out["finalUrl"] == origin.url("/redirect/0")
    assert out["text"] == "redirected"
    assert [origin.hits(f"/redirect/{n}") for n in (3, 2, 1, 0)] == [1, 1, 1, 1]


def test_base64_body_decodes_to_the_bytes(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/bytes/3000?seed=b64"), body="base64")
    assert out["ok"], out
    assert base64.b64decode(out["base64"], validate=True) == pattern(3000, "b64")
    assert "path" not in out and "text" not in out
    assert out["size"] == 3000


@pytest.mark.parametrize("fmt", ["png", "jpeg", "gif", "webp"])
def test_image_format_and_size_are_reported(courier, origin, fmt):
    c = courier()
    out = c.fetch(origin.url(f"/image/{fmt}?w=17&h=9"), body="base64")
    assert out["ok"], out
    assert out["image"] == {"format": fmt, "width": 17, "height": 9}
    assert out["contentType"] == f"image/{fmt}"
    assert base64.b64decode(out["base64"]) == image_bytes(fmt, 17, 9)


JAPANESE = "日本語のテキスト"


@pytest.mark.parametrize("path, params, expected", [
    ("/text", {}, DEFAULT_TEXT),
    ("/text?charset=iso-8859-1", {}, LATIN1_TEXT),
    ("/text?charset=utf-16", {}, DEFAULT_TEXT),
    (f"/text?charset=shift_jis&text={quote(JAPANESE)}", {}, JAPANESE),
    ("/text?charset=iso-8859-1&declare=0", {"textEncoding": "ISO-8859-1"}, LATIN1_TEXT),
    ("/text?charset=iso-8859-1&declare=0", {},
     LATIN1_TEXT.encode("latin-1").decode("utf-8", "replace")),
    ("/text?charset=utf-8", {"textEncoding": "iso-8859-1"},
     DEFAULT_TEXT.encode("utf-8").decode("latin-1")),
    ("/text/invalid-utf8", {}, INVALID_UTF8.decode("utf-8", "replace")),
], ids=["utf8", "latin1", "utf16", "shift_jis", "override-undeclared", "undeclared-is-utf8",
        "override-beats-declared", "invalid-utf8-replaced"])
def test_text_body_is_decoded_by_charset(courier, origin, path, params, expected):
    c = courier()
    out = c.fetch(origin.url(path), body="text", **params)
    assert out["ok"], out
    assert out["text"] == expected
    assert "path" not in out and "base64" not in out


def test_text_content_type_is_reported_as_sent(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/text?charset=iso-8859-1&type=text/html"), body="text")
    assert out["contentType"] == "text/html; charset=iso-8859-1"
    assert out["text"] == LATIN1_TEXT


def test_unknown_text_encoding_is_invalid_params(courier, origin):
    c = courier()
    with pytest.raises(RpcError) as err:
        c.download(origin.url("/text"), body="text", textEncoding="no-such-charset-x")
    assert err.value.code == -32602
    assert origin.total_hits() == 0


def test_gzip_body_is_decoded(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/gzip?size=20000"), body="text")
    assert out["ok"], out
    assert out["headers"]["content-encoding"] == "gzip"
    assert int(out["headers"]["content-length"]) < 20000
    assert out["text"] == gzip_plain(20000).decode("ascii")
    assert out["size"] == 20000
    assert "gzip" in origin.last_headers("/gzip")["accept-encoding"]


# -- wait: true -------------------------------------------------------------------


def test_wait_true_answers_with_the_outcome(courier, origin):
    c = courier()
    result = c.download(origin.url("/bytes/700?seed=w"), wait=True, body="base64")
    assert result["state"] == "finished"
    outcome = result["outcome"]
    assert outcome["ok"] is True
    assert base64.b64decode(outcome["base64"]) == pattern(700, "w")
    assert c.wait_all([result["receipt"]])[result["receipt"]] == outcome
    assert len(c.finished(result["receipt"])) == 1
    validate_result("download", result)


def test_wait_true_carries_a_failure_too(courier, origin):
    c = courier()
    result = c.download(origin.url("/status/404"), wait=True)
    assert result["outcome"]["ok"] is False
    assert result["outcome"]["error"]["code"] == "http_status"
    validate_result("download", result)


# -- coalescing -------------------------------------------------------------------


def test_thousand_identical_requests_make_one_origin_request(courier, origin, capsys):
    c = courier()
    url = drip(origin, "thousand", size=20000, chunks=20, interval=0.1)
    responses = c.batch([("download", {"url": url})] * 1000)
    results = [r["result"] for r in responses]
    receipts = [r["receipt"] for r in results]
    assert len(set(receipts)) == 1000
    assert len({r["task"] for r in results}) == 1

    outcomes = c.wait_all(receipts, timeout=60)
    hits = origin.hits("/drip")
    with capsys.disabled():
        print(f"\norigin hits for 1,000 identical concurrent downloads: {hits}")
    assert hits == 1
    assert all(o["ok"] and o["size"] == 20000 for o in outcomes.values())
    assert sorted(c.finished_order) == sorted(receipts)
    for receipt in (receipts[0], receipts[499], receipts[-1]):
        assert Path(outcomes[receipt]["path"]).read_bytes() == pattern(20000, "thousand")
    assert len({o["path"] for o in outcomes.values()}) == 1000


def test_requests_differing_in_a_header_are_not_merged(courier, origin):
    c = courier()
    url = origin.url("/headers")
    first = c.download(url, headers={"X-Variant": "one"}, body="text")
    second = c.download(url, headers={"X-Variant": "two"}, body="text")
    assert first["task"] != second["task"]
    outcomes = c.wait_all([first["receipt"], second["receipt"]])
    assert '"x-variant": "one"' in outcomes[first["receipt"]]["text"]
    assert '"x-variant": "two"' in outcomes[second["receipt"]]["text"]
    assert origin.hits("/headers") == 2


def test_cancelling_one_receipt_leaves_the_others_to_complete(courier, origin):
    c = courier()
    url = drip(origin, "share", size=8000, chunks=10, interval=0.08)
    receipts = [c.download(url)["receipt"] for _ in range(3)]
    task = c.progress(receipts[0])["task"]
    c.wait_progress(task)
    assert c.cancel(receipts[1]) == {"cancelled": True, "count": 1}
    outcomes = c.wait_all(receipts)
    assert outcomes[receipts[1]]["ok"] is False
    assert outcomes[receipts[1]]["error"]["code"] == "cancelled"
    for receipt in (receipts[0], receipts[2]):
        assert outcomes[receipt]["ok"], outcomes[receipt]
        assert Path(outcomes[receipt]["path"]).read_bytes() == pattern(8000, "share")
    assert origin.hits("/drip") == 1
    assert c.cancel(receipts[1]) == {"cancelled": False, "count": 0}


def test_cancelling_the_last_receipt_stops_the_transfer_and_a_new_request_loads(courier, origin):
    c = courier()
    url = drip(origin, "stop", size=40000, chunks=40, interval=0.1)
    a, b = c.download(url), c.download(url)
    assert a["task"] == b["task"]
    c.wait_progress(a["task"])
    c.cancel(a["receipt"])
    assert [t["task"] for t in c.tasks()] == [a["task"]]
    c.cancel(b["receipt"])
    assert c.tasks() == []
    ticks = c.progress_count(a["task"])

    again = c.download(url)
    assert again["task"] != a["task"]
    out = c.wait(again["receipt"], timeout=30)
    assert out["ok"], out
    assert Path(out["path"]).read_bytes() == pattern(40000, "stop")
    assert origin.hits("/drip") == 2
    assert c.progress_count(a["task"]) == ticks
    assert [c.outcomes[r["receipt"]][0]["error"]["code"] for r in (a, b)] == ["cancelled"] * 2


# -- slots ----------------------------------------------------------------------------


def test_slot_with_the_same_url_in_flight_reuses_the_receipt(courier, origin):
    c = courier()
    url = drip(origin, "slot", size=3000, chunks=6, interval=0.05)
    first = c.download(url, slot="avatar")
    second = c.download(url, slot="avatar")
    assert second["receipt"] == first["receipt"]
    assert second["reused"] is True and first["reused"] is False
    assert c.wait(first["receipt"])["ok"]
    assert len(c.finished(first["receipt"])) == 1
    assert origin.hits("/drip") == 1

    third = c.download(url, slot="avatar")
    assert third["receipt"] != first["receipt"] and third["reused"] is False
    assert c.wait(third["receipt"])["ok"]


def test_slot_with_another_url_cancels_the_old_receipt_first(courier, origin):
    c = courier()
    old_url = drip(origin, "old", size=20000, chunks=20, interval=0.1)
    old = c.download(old_url, slot="hero")
    bystander = c.download(old_url)
    c.wait_progress(old["task"])

    new_id = c.send_request("download", {"url": origin.url("/bytes/300"), "slot": "hero"})
    new = c.wait_response(new_id)["result"]
    assert new["receipt"] != old["receipt"] and new["reused"] is False
    order = [m.message for m in c.messages]
    finished_at = next(i for i, m in enumerate(order)
                       if m.get("method") == "download/finished"
                       and m["params"]["receipt"] == old["receipt"])
    answered_at = next(i for i, m in enumerate(order) if m.get("id") == new_id)
    assert finished_at < answered_at

    outcomes = c.wait_all([old["receipt"], new["receipt"], bystander["receipt"]])
    assert outcomes[old["receipt"]]["error"]["code"] == "cancelled"
    assert outcomes[new["receipt"]]["ok"]
    assert outcomes[bystander["receipt"]]["ok"], "the shared transfer must go on"
    assert origin.hits("/drip") == 1
    slot_outcomes = [o for r, os_ in c.outcomes.items() for o in os_ if r == old["receipt"]]
    assert [o["ok"] for o in slot_outcomes] == [False]


def test_cancel_by_slot_and_cancel_all(courier, origin):
    c = courier()
    in_slot = c.download(origin.url("/stall?seed=1"), slot="s")
    others = [c.download(origin.url(f"/stall?seed={n}"))["receipt"] for n in (2, 3)]
    assert c.cancel(slot="s") == {"cancelled": True, "count": 1}
    assert c.wait(in_slot["receipt"])["error"]["code"] == "cancelled"
    assert c.cancel(slot="s") == {"cancelled": False, "count": 0}

    assert c.cancel(all=True) == {"cancelled": True, "count": 2}
    outcomes = c.wait_all(others)
    assert [o["error"]["code"] for o in outcomes.values()] == ["cancelled", "cancelled"]
    assert c.cancel(all=True) == {"cancelled": False, "count": 0}
    assert all(t["receipts"] == [] for t in c.tasks())


def test_cancel_all_leaves_no_task(courier, origin):
    c = courier()
    receipts = [c.download(origin.url(f"/stall?after=100&seed={n}"))["receipt"] for n in range(3)]
    assert [t["state"] for t in c.tasks()] == ["running"] * 3
    assert c.cancel(all=True) == {"cancelled": True, "count": 3}
    c.wait_all(receipts)
    assert c.tasks() == []


def test_cancel_of_a_slot_without_an_unfinished_receipt(courier):
    c = courier()
    assert c.cancel(slot="never-used") == {"cancelled": False, "count": 0}


def test_cancel_needs_exactly_one_target(courier):
    c = courier()
    for params in ({}, {"receipt": "r1", "all": True}):
        with pytest.raises(RpcError) as err:
            c.request("cancel", params)
        assert err.value.code == -32602


# -- suspend / resume --------------------------------------------------------------


def test_suspend_stops_the_transfer_and_resume_completes_it(courier, origin):
    c = courier()
    a = c.download(drip(origin, "susp", size=40000, chunks=40, interval=0.05))
    c.wait_progress(a["task"], 2)
    assert c.suspend(receipt=a["receipt"]) == {"task": a["task"], "state": "suspended"}

    b = c.download(drip(origin, "other", size=10000, chunks=10, interval=0.05))
    c.wait_progress(b["task"], 1)
    before = c.progress(a["receipt"])
    ticks = c.progress_count(a["task"])
    assert before["state"] == "suspended"
    c.wait_progress(b["task"], 4)
    after = c.progress(a["receipt"])
    assert after["state"] == "suspended"
    assert after["received"] == before["received"] < 40000
    assert c.progress_count(a["task"]) == ticks
    assert {t["task"]: t["state"] for t in c.tasks()}[a["task"]] == "suspended"

    assert c.resume(task=a["task"]) == {"task": a["task"], "state": "running"}
    out = c.wait(a["receipt"], timeout=30)
    assert out["ok"], out
    assert Path(out["path"]).read_bytes() == pattern(40000, "susp")
    assert origin.hits(drip_path("susp", 40000, 40, 0.05)) == 1
    assert c.wait(b["receipt"])["ok"]


def test_suspend_and_resume_of_finished_and_unknown_receipts(courier, origin):
    c = courier()
    done = c.download(origin.url("/bytes/10"))
    assert c.wait(done["receipt"])["ok"]
    assert c.suspend(receipt=done["receipt"])["state"] == "finished"
    assert c.resume(receipt=done["receipt"])["state"] == "finished"
    for method in ("suspend", "resume", "progress", "cancel"):
        with pytest.raises(RpcError) as err:
            c.request(method, {"receipt": "r999999"})
        assert err.value.code == UNKNOWN_RECEIPT, method
        assert err.value.data == {"receipt": "r999999"}
    with pytest.raises(RpcError) as err:
        c.suspend(task="t999999")
    assert err.value.code == UNKNOWN_RECEIPT


def test_ids_courier_never_issues_are_answered_as_unknown_ones(courier, origin):
    c = courier()
    done = c.download(origin.url("/bytes/10"))
    assert c.wait(done["receipt"])["ok"]
    assert (done["receipt"], done["task"]) == ("r1", "t1")
    # Spellings a loose reading would take for r1 or t1, and other names.
    for receipt in ("r01", "r+1", "R1", " r1", "r1 ", "t1", "r", "r0", "r-1", "r99999999999999999999"):
        for method in ("suspend", "resume", "progress", "cancel", "bind"):
            with pytest.raises(RpcError) as err:
                c.request(method, {"receipt": receipt, **({"view": "v"} if method == "bind" else {})})
            assert (err.value.code, err.value.message, err.value.data) == (
                UNKNOWN_RECEIPT, f"unknown receipt '{receipt}'", {"receipt": receipt}), (method, receipt)
    for task in ("t01", "T1", "r1", "t1.0"):
        for method in ("suspend", "resume", "bind"):
            with pytest.raises(RpcError) as err:
                c.request(method, {"task": task, **({"view": "v"} if method == "bind" else {})})
            assert (err.value.code, err.value.message, err.value.data) == (
                UNKNOWN_RECEIPT, f"unknown task '{task}'", {"task": task}), (method, task)
    assert c.suspend(receipt="r1") == {"task": "t1", "state": "finished"}


# -- progress -----------------------------------------------------------------------


@pytest.mark.parametrize("interval", [0.2, 0.5])
def test_progress_notifications_respect_the_interval(courier, origin, interval):
    c = courier("--progress-interval", str(interval))
    size = 60000
    result = c.download(drip(origin, "prog", size=size, chunks=60, interval=0.035))
    out = c.wait(result["receipt"], timeout=30)
    assert out["ok"] and out["size"] == size

    notes = c.progress_by_task[result["task"]]
    times = [t for t, _ in notes]
    received = [p["received"] for _, p in notes]
    assert received == sorted(received), "received went down"
    assert received[-1] == size
    last = notes[-1][1]
    assert last["expected"] == size and last["fraction"] == 1.0
    assert all(p["receipts"] == [result["receipt"]] for _, p in notes)
    # Times are when the notices arrived, so a notice the output held up
    # (a loaded machine) shortens the gap after it by what it lengthened
    # the gap before: a short gap counts only with the one before it.
    gaps = [b - a for a, b in zip(times, times[1:-1])]
    assert gaps and gaps[0] >= interval - 0.06, gaps
    for before, gap in zip(gaps, gaps[1:]):
        assert gap >= interval - 0.06 or before + gap >= 2 * interval - 0.06, gaps
    duration = out["durationMs"] / 1000
    assert len(notes) <= duration / interval + 2, (len(notes), duration)
    assert len(notes) >= 3


def test_bytes_that_arrive_just_before_a_stall_are_told(courier, origin):
    # Given a response that sends 300,000 of its bytes at once, then nothing
    c = courier("--progress-interval", "0.2")
    result = c.download(origin.url("/stall?after=300000&seed=told"))
    # When its transfer stalls after them
    # Then a progress notification within the interval tells all of them
    c.wait_until(lambda: c.progress_by_task[result["task"]]
                 and c.progress_by_task[result["task"]][-1][1]["received"] == 300000, 10,
                 "a download/progress telling the 300,000 bytes that arrived before the stall")
    assert c.progress(result["receipt"])["received"] == 300000
    c.cancel(receipt=result["receipt"])


def test_progress_of_one_receipt_while_running_and_after_it_finished(courier, origin):
    c = courier()
    result = c.download(drip(origin, "pr", size=20000, chunks=20, interval=0.05))
    c.wait_progress(result["task"])
    running = c.progress(result["receipt"])
    assert running["receipt"] == result["receipt"] and running["task"] == result["task"]
    assert running["state"] == "running"
    assert 0 < running["received"] <= 20000
    assert running["expected"] == 20000
    assert running["fraction"] == pytest.approx(running["received"] / 20000)
    assert running["bytesPerSecond"] >= 0

    out = c.wait(result["receipt"])
    done = c.progress(result["receipt"])
    assert done["state"] == "finished"
    assert done["received"] == out["size"] == 20000
    assert c.progress() == {"tasks": []}


def test_progress_list_names_tasks_and_their_receipts(courier, origin):
    c = courier()
    url = drip(origin, "list", size=20000, chunks=20, interval=0.05)
    a, b = c.download(url), c.download(url)
    c.wait_progress(a["task"])
    tasks = c.tasks()
    assert len(tasks) == 1
    assert tasks[0]["task"] == a["task"]
    assert tasks[0]["receipts"] == [a["receipt"], b["receipt"]]
    assert tasks[0]["state"] == "running"
    c.cancel(all=True)


# -- destination --------------------------------------------------------------------


def test_destination_appears_only_after_success_with_the_exact_bytes(courier, origin, tmp_path, cache_dir):
    c = courier()
    target = tmp_path / "out" / "file.bin"
    result = c.download(drip(origin, "dest", size=30000, chunks=10, interval=0.05),
                        destination=str(target))
    c.wait_progress(result["task"])
    assert not target.exists()
    out = c.wait(result["receipt"])
    assert out["ok"], out
    assert out["path"] == str(target)
    assert target.read_bytes() == pattern(30000, "dest")
    assert os.listdir(target.parent) == ["file.bin"]
    assert os.listdir(cache_dir / "tmp") == []


def test_coalesced_receipts_each_get_their_destination(courier, origin, tmp_path):
    c = courier()
    url = drip(origin, "two", size=9000, chunks=5, interval=0.05)
    targets = [tmp_path / "a.bin", tmp_path / "sub" / "b.bin"]
    receipts = [c.download(url, destination=str(t))["receipt"] for t in targets]
    outcomes = c.wait_all(receipts)
    for receipt, target in zip(receipts, targets):
        assert outcomes[receipt]["path"] == str(target)
        assert target.read_bytes() == pattern(9000, "two")
    assert origin.hits("/drip") == 1


def open_descriptors_of(pid: int, path: Path) -> list[str]:
    """The descriptors process `pid` holds open on `path`."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                held.append(fd)
        except FileNotFoundError:
            pass
    return held


def test_an_idle_courier_holds_no_destination_directory_open(courier, origin, tmp_path):
    """Destinations' directories stay open only while transfers run: one
    held by an idle courier would keep its file system from being unmounted."""
    c = courier()
    folder = tmp_path / "kept"
    folder.mkdir()
    receipts = [c.download(origin.url(f"/bytes/3000?n={n}"), destination=str(folder / f"{n}.bin"))["receipt"]
                for n in range(3)]
    outcomes = c.wait_all(receipts)
    assert all(out["ok"] for out in outcomes.values()), outcomes
    assert c.tasks() == []
    deadline = time.monotonic() + 5
    while open_descriptors_of(c.pid, folder) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert open_descriptors_of(c.pid, folder) == []


@pytest.mark.parametrize("case", ["truncated", "timeout", "http_status"])
def test_failed_download_leaves_no_file(courier, origin, tmp_path, cache_dir, case):
    c = courier("--retries", "0")
    folder = tmp_path / "dest"
    folder.mkdir()
    target = folder / "body.bin"
    if case == "truncated":
        result = c.download(origin.url("/truncate?size=100000&send=40000"), destination=str(target))
    elif case == "timeout":
        result = c.download(origin.url("/stall?after=5000"), destination=str(target), timeout=0.5)
    else:
        result = c.download(origin.url("/status/500"), destination=str(target))
    out = c.wait(result["receipt"])
    assert out["ok"] is False
    expected = {"truncated": "network", "timeout": "timeout", "http_status": "http_status"}[case]
    assert out["error"]["code"] == expected
    assert "path" not in out
    assert os.listdir(folder) == []
    assert c.tasks() == []
    assert os.listdir(cache_dir / "tmp") == []


def test_cancelled_download_leaves_no_file(courier, origin, tmp_path, cache_dir):
    c = courier("--max-active", "8")
    folder = tmp_path / "dest"
    folder.mkdir()
    for n in range(5):
        busy = [c.download(origin.url(f"/bytes/20000000?n={n}&k={k}"))["receipt"] for k in range(3)]
        result = c.download(origin.url(f"/stall?after=5000&n={n}"),
                            destination=str(folder / "body.bin"))
        c.wait_progress(result["task"])
        c.cancel(result["receipt"])
        assert c.wait(result["receipt"])["error"]["code"] == "cancelled"
        assert os.listdir(folder) == [], n
        c.cancel(all=True)
        c.wait_all(busy)
        assert c.tasks() == []


# -- proxies ---------------------------------------------------------------------------


@pytest.fixture
def proxy():
    with Proxy() as p:
        yield p


def test_proxy_flag_sends_requests_through_the_proxy(courier, origin, proxy):
    c = courier("--proxy", proxy.url)
    url = origin.url("/bytes/100?via=flag")
    out = c.fetch(url, body="base64")
    assert out["ok"], out
    assert base64.b64decode(out["base64"]) == pattern(100)
    assert proxy.requests == [url]
    assert origin.hits("/bytes/100?via=flag") == 1
    assert "courier-test-proxy" in origin.last_headers("/bytes/100")["via"]


def test_http_proxy_environment_variable_is_used(courier, origin, proxy):
    c = courier(env={"http_proxy": proxy.url})
    url = origin.url("/bytes/100?via=env")
    assert c.fetch(url)["ok"]
    assert proxy.requests == [url]
    assert origin.hits("/bytes/100?via=env") == 1


def test_no_proxy_environment_variable_is_respected(courier, origin, proxy):
    c = courier(env={"http_proxy": proxy.url, "no_proxy": "127.0.0.1"})
    url = origin.url("/bytes/100?via=none")
    assert c.fetch(url)["ok"]
    assert proxy.requests == []
    assert origin.hits("/bytes/100?via=none") == 1


def test_proxy_flag_overrides_the_environment(courier, origin, proxy):
    c = courier("--proxy", proxy.url, env={"http_proxy": "http://127.0.0.1:9", "no_proxy": "127.0.0.1"})
    url = origin.url("/bytes/100?via=both")
    assert c.fetch(url)["ok"]
    assert proxy.requests == [url]


# -- flags -----------------------------------------------------------------------------


def test_allow_scheme_file_downloads_a_local_file(courier, tmp_path):
    source = tmp_path / "local.bin"
    source.write_bytes(pattern(1000, "file"))
    url = source.as_uri()

    refused = courier().fetch(url)
    assert refused["ok"] is False and refused["error"]["code"] == "scheme_not_allowed"

    c = courier("--allow-scheme", "file")
    out = c.fetch(url, body="base64")
    assert out["ok"], out
    assert base64.b64decode(out["base64"]) == pattern(1000, "file")
    assert out["size"] == 1000


def test_max_bytes_flag_is_the_default_limit(courier, origin):
    c = courier("--max-bytes", "1KiB")
    too_big = c.fetch(origin.url("/bytes/5000"))
    assert too_big["ok"] is False and too_big["error"]["code"] == "too_large"
    assert c.fetch(origin.url("/bytes/1024"))["ok"]
    assert c.fetch(origin.url("/bytes/5000?seed=x"), maxBytes=10000)["ok"]


def test_timeout_flag_is_the_default_transfer_timeout(courier, origin):
    c = courier("--timeout", "0.5", "--retries", "0")
    out = c.fetch(origin.url("/stall?after=100"))
    assert out["ok"] is False and out["error"]["code"] == "timeout"
    assert 400 <= out["durationMs"] < 5000
    assert c.fetch(origin.url("/bytes/10"))["ok"]


def test_connect_timeout_flag(courier):
    import socket
    listener = socket.socket()
    filler = None
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        # The accept queue of a listener that never accepts holds one connection;
        # later handshakes get no answer.
        filler = socket.create_connection(("127.0.0.1", port), timeout=5)
        c = courier("--connect-timeout", "0.5", "--retries", "0")
        out = c.fetch(f"http://127.0.0.1:{port}/", timeout=30)
        assert out["ok"] is False and out["error"]["code"] == "timeout", out
        assert 400 <= out["durationMs"] < 5000
    finally:
        if filler is not None:
            filler.close()
        listener.close()


def test_download_root_confines_destinations(courier, origin, tmp_path):
    root = tmp_path / "root"
    (root / "deep").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    c = courier("--download-root", str(root))

    inside = root / "deep" / "ok.bin"
    out = c.fetch(origin.url("/bytes/200"), destination=str(inside))
    assert out["ok"], out
    assert inside.read_bytes() == pattern(200)

    for target in (outside / "x.bin", root / ".." / "outside" / "y.bin", root / "escape" / "z.bin"):
        result = c.download(origin.url("/bytes/300"), destination=str(target))
        assert result["state"] == "finished"
        out = c.wait(result["receipt"])
        assert out["ok"] is False
        assert out["error"]["code"] == "destination_not_allowed", target
    assert os.listdir(outside) == []
    assert origin.hits("/bytes/300") == 0
