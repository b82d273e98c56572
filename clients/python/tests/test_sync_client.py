"""The synchronous client against the real binary and a real origin."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from courier_client import (
    INVALID_PARAMS,
    UNKNOWN_RECEIPT,
    Courier,
    CourierExited,
    DownloadError,
    RpcError,
)
from origin import pattern

from .conftest import REPO


@pytest.fixture
def courier(courier_kwargs: Dict[str, Any]):
    with Courier(**courier_kwargs) as c:
        yield c


def test_download_returns_a_receipt_and_wait_the_outcome(courier: Courier, origin) -> None:
    result = courier.download(origin.url("/bytes/100"), body="base64")
    assert result["receipt"].startswith("r") and result["task"].startswith("t")
    outcome = courier.wait(result["receipt"])
    assert outcome["ok"] is True and outcome["status"] == 200
    assert base64.b64decode(outcome["base64"]) == pattern(100)


def test_fetch_with_wait_true_returns_the_outcome_of_the_response(courier: Courier, origin) -> None:
    outcome = courier.fetch(origin.url("/text"), body="text", wait=True)
    assert outcome["ok"] and "café" in outcome["text"]


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
def test_both_framings(courier_kwargs: Dict[str, Any], origin, framing: str) -> None:
    with Courier(framing=framing, **courier_kwargs) as c:
        assert c.initialize(clientInfo={"name": "test"})["capabilities"]["framing"] == framing
        assert c.fetch(origin.url("/bytes/10"))["size"] == 10
    assert c.returncode == 0
    assert c.stdout_garbage == []


def test_a_failed_download_raises_download_error_when_asked(courier: Courier, origin) -> None:
    receipt = courier.download(origin.url("/status/404"))["receipt"]
    outcome = courier.wait(receipt)
    assert outcome["ok"] is False and outcome["error"]["code"] == "http_status"
    with pytest.raises(DownloadError) as caught:
        courier.wait(receipt, raise_on_error=True)
    assert caught.value.code == "http_status"
    assert caught.value.http_status == 404
    assert caught.value.receipt == receipt
    assert caught.value.outcome == outcome
    with pytest.raises(DownloadError) as fetched:
        courier.fetch(origin.url("/status/500"), raise_on_error=True)
    assert fetched.value.code == "http_status" and fetched.value.http_status == 500


def test_error_responses_raise_rpc_error_with_code_and_data(courier: Courier) -> None:
    with pytest.raises(RpcError) as bad_url:
        courier.download("not a url")
    assert bad_url.value.code == INVALID_PARAMS
    assert bad_url.value.data == {"param": "url"}
    with pytest.raises(RpcError) as unknown:
        courier.progress("r999999")
    assert unknown.value.code == UNKNOWN_RECEIPT
    assert unknown.value.data == {"receipt": "r999999"}


def test_notifications_reach_callbacks_and_the_log(courier: Courier, origin) -> None:
    seen: List[Tuple[str, Any]] = []
    courier.on_notification(lambda method, params: seen.append((method, params)))
    receipt = courier.download(origin.url("/drip?size=4000&chunks=4&interval=0.05"))["receipt"]
    assert courier.wait(receipt)["ok"]
    methods = [method for method, _ in seen]
    assert "download/progress" in methods and methods[-1] == "download/finished"
    assert courier.finished(receipt)[0]["outcome"]["size"] == 4000
    assert [n.method for n in courier.notifications("download/finished")] == ["download/finished"]


def test_cancel_suspend_resume_and_progress(courier: Courier, origin) -> None:
    slow = courier.download(origin.url("/drip?size=2000&chunks=20&interval=0.1"), slot="s")
    suspended = courier.suspend(receipt=slow["receipt"])
    assert suspended["task"] == slow["task"]
    assert courier.resume(task=slow["task"])["task"] == slow["task"]
    assert courier.progress(slow["receipt"])["receipt"] == slow["receipt"]
    assert courier.cancel(slot="s") == {"cancelled": True, "count": 1}
    with pytest.raises(DownloadError) as caught:
        courier.wait(slow["receipt"], raise_on_error=True)
    assert caught.value.code == "cancelled"


def test_bind_indicator_and_cache(courier: Courier, origin) -> None:
    assert courier.indicator_increment()["activityCount"] == 1
    assert courier.indicator_decrement()["activityCount"] == 0
    assert courier.indicator_configure(activationDelay=0.5)["activationDelay"] == 0.5
    assert courier.indicator_state()["enabled"] is True

    slow = courier.download(origin.url("/drip?size=1000&chunks=5&interval=0.1"))
    assert courier.bind("spinner", task=slow["task"]) == {"bound": True}
    assert courier.wait(slow["receipt"])["ok"]
    courier.wait_notification(lambda m, p: m == "view/animating" and p["animating"] is False)

    url = origin.url("/cache?max-age=600&body=kept")
    assert courier.fetch(url, body="text")["text"] == "kept"
    assert courier.cache_lookup(url)["cached"] is True
    assert courier.cache_stats()["misses"] >= 1
    assert courier.cache_remove(url) == {"removed": True}
    assert courier.cache_lookup(url)["cached"] is False
    assert set(courier.cache_clear()) == {"memory", "disk"}


def test_a_killed_courier_raises_courier_exited(courier_kwargs: Dict[str, Any]) -> None:
    c = Courier(**courier_kwargs)
    try:
        c.kill()
        with pytest.raises(CourierExited):
            c.request("cache/stats", timeout=5)
    finally:
        c.close()


def test_callbacks_run_on_the_reader_thread(courier: Courier, origin) -> None:
    threads: List[str] = []
    courier.on_notification(lambda m, p: threads.append(threading.current_thread().name))
    courier.fetch(origin.url("/bytes/5"))
    assert threads and set(threads) == {"courier-stdout"}


def test_the_command_line_prints_each_outcome(binary: str, origin, env, tmp_path: Path) -> None:
    child_env = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
    for name in [k for k, v in env.items() if v is None]:
        child_env.pop(name, None)
    src = str(REPO / "clients" / "python" / "src")
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    run = subprocess.run(
        [sys.executable, "-m", "courier_client", "--courier", binary, "--body", "text",
         "--arg=--cache-dir", f"--arg={tmp_path / 'cache'}",
         origin.url("/text"), origin.url("/status/404")],
        capture_output=True, env=child_env, timeout=60)
    lines = [json.loads(line) for line in run.stdout.decode().splitlines()]
    assert run.stderr == b"" or lines, run.stderr.decode()
    assert [line["ok"] for line in lines] == [True, False]
    assert "café" in lines[0]["text"]
    assert run.returncode == 1
