"""The synchronous client against the real binary and a real origin."""

from __future__ import annotations

import base64
import collections
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
    CourierError,
    CourierExited,
    CourierNotFound,
    DownloadError,
    RpcError,
    WaitTimeout,
    file_name,
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
    with pytest.raises(DownloadError) as caught:
        courier.wait(receipt, raise_on_error=True)
    assert caught.value.code == "http_status"
    assert caught.value.http_status == 404
    assert caught.value.receipt == receipt
    assert caught.value.outcome["ok"] is False
    assert caught.value.outcome["error"]["code"] == "http_status"
    with pytest.raises(DownloadError) as fetched:
        courier.fetch(origin.url("/status/500"), raise_on_error=True)
    assert fetched.value.code == "http_status" and fetched.value.http_status == 500
    outcome = courier.fetch(origin.url("/status/404"))
    assert outcome["ok"] is False and outcome["error"]["httpStatus"] == 404


def test_error_responses_raise_rpc_error_with_code_and_data(courier: Courier) -> None:
    with pytest.raises(RpcError) as bad_url:
        courier.download("not a url")
    assert bad_url.value.code == INVALID_PARAMS
    assert bad_url.value.data == {"param": "url"}
    with pytest.raises(RpcError) as unknown:
        courier.progress("r999999")
    assert unknown.value.code == UNKNOWN_RECEIPT
    assert unknown.value.data == {"receipt": "r999999"}


def test_callbacks_take_a_method_filter_and_can_be_removed(courier: Courier, origin) -> None:
    # Given a callback for every notification and one for download/finished only
    every: List[Tuple[str, Any]] = []
    finished: List[str] = []
    courier.on_notification(lambda method, params: every.append((method, params)))
    remove = courier.on_notification(lambda method, params: finished.append(method),
                                     "download/finished")

    # When a download with progress runs, then the filtered callback is
    # removed and another download runs
    assert courier.fetch(origin.url("/drip?size=4000&chunks=4&interval=0.05"))["ok"]
    remove()
    assert courier.fetch(origin.url("/bytes/5"))["ok"]

    # Then the filtered callback saw only the first download/finished, the
    # other saw everything
    assert finished == ["download/finished"]
    methods = [method for method, _ in every]
    assert "download/progress" in methods and methods.count("download/finished") == 2


def test_a_removed_callback_is_not_called_for_notifications_already_read(courier: Courier, origin) -> None:
    # Given a callback that removes itself on its first call
    calls: List[str] = []
    removers: List[Any] = []

    def once(method: str, params: Any) -> None:
        calls.append(method)
        removers[0]()

    removers.append(courier.on_notification(once, "download/progress"))

    # When a download sends many progress notifications
    assert courier.fetch(origin.url("/drip?size=8000&chunks=8&interval=0.02"))["ok"]

    # Then it ran once
    assert calls == ["download/progress"]


def test_wait_notification_looks_from_the_call_on_without_a_record(courier: Courier, origin) -> None:
    assert courier.fetch(origin.url("/bytes/3"))["ok"]
    receipt = courier.download(origin.url("/drip?size=3000&chunks=3&interval=0.05"))["receipt"]
    params = courier.wait_notification(
        lambda m, p: m == "download/finished", wait_timeout=10)
    assert params["receipt"] == receipt  # not the earlier download's
    with pytest.raises(ValueError):
        courier.wait_notification("download/finished", wait_timeout=1, since=0)
    for looks_back in (lambda: courier.messages, courier.notifications, courier.mark,
                       courier.next_message, lambda: courier.finished(receipt)):
        with pytest.raises(RuntimeError, match="record=True"):
            looks_back()


def test_a_record_keeps_every_message(courier_kwargs: Dict[str, Any], origin) -> None:
    with Courier(record=True, **courier_kwargs) as c:
        receipt = c.download(origin.url("/drip?size=4000&chunks=4&interval=0.05"))["receipt"]
        assert c.wait(receipt)["ok"]
        assert c.wait(receipt)["size"] == 4000  # kept: returned again
        assert c.finished(receipt)[0]["outcome"]["size"] == 4000
        assert [n.method for n in c.notifications("download/finished")] == ["download/finished"]
        assert c.wait_notification("download/progress", since=0)["task"]
        assert len(c.messages) == len(c.notifications()) + 1  # and the download's response
        assert c.next_message()["result"]["receipt"] == receipt


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
    stopped = threading.Event()
    courier.on_notification(lambda m, p: p["animating"] is False and stopped.set(), "view/animating")
    assert courier.wait(slow["receipt"])["ok"]
    assert stopped.wait(10)

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
            c.request("cache/stats")
    finally:
        c.close()


def test_callbacks_run_on_the_reader_thread(courier: Courier, origin) -> None:
    threads: List[str] = []
    courier.on_notification(lambda m, p: threads.append(threading.current_thread().name))
    courier.fetch(origin.url("/bytes/5"))
    assert threads and set(threads) == {"courier-stdout"}


# -- one name per meaning: timeout is courier's, wait_timeout the client's --------


def test_timeout_is_couriers_transfer_limit(courier: Courier, origin) -> None:
    # A stalled origin: courier's 0.5 s limit ends the transfer with an outcome
    outcome = courier.fetch(origin.url("/stall?after=10"), timeout=0.5)
    assert outcome["ok"] is False and outcome["error"]["code"] == "timeout"


def test_a_wait_that_times_out_leaves_the_download_running(courier: Courier, origin) -> None:
    # Given a download that takes about a second
    receipt = courier.download(origin.url("/drip?size=5000&chunks=5&interval=0.25"))["receipt"]

    # When the client's wait gives up first
    with pytest.raises(WaitTimeout) as caught:
        courier.wait(receipt, wait_timeout=0.1)

    # Then that is a TimeoutError that says the download goes on, and it does
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, CourierError)
    assert "goes on" in str(caught.value) and "shutdown" in str(caught.value)
    assert courier.progress(receipt)["state"] in ("queued", "running")
    assert courier.wait(receipt)["size"] == 5000


def test_the_clients_wait_timeout_is_the_default_of_every_wait(courier_kwargs: Dict[str, Any], origin) -> None:
    with Courier(wait_timeout=0.2, **courier_kwargs) as c:
        receipt = c.download(origin.url("/stall?after=10&hold=5"), wait_timeout=10)["receipt"]
        with pytest.raises(WaitTimeout):
            c.wait(receipt)
        with pytest.raises(WaitTimeout):
            c.fetch(origin.url("/stall?after=10&hold=5&second=1"))
        assert c.request("cancel", {"all": True}, wait_timeout=10)["cancelled"] is True
        assert c.wait(receipt, wait_timeout=10)["error"]["code"] == "cancelled"


def test_leaving_with_ends_an_unfinished_download_with_shutdown(courier_kwargs: Dict[str, Any], origin) -> None:
    outcomes: List[Any] = []
    with Courier(**courier_kwargs) as c:
        c.on_notification(lambda m, p: outcomes.append(p["outcome"]), "download/finished")
        receipt = c.download(origin.url("/stall?after=10&hold=10"))["receipt"]
        with pytest.raises(WaitTimeout):
            c.wait(receipt, wait_timeout=0.1)
    assert c.returncode == 0
    assert [o["error"]["code"] for o in outcomes] == ["shutdown"]


# -- bounded memory --------------------------------------------------------------------


CONTAINERS = (list, dict, set, tuple, collections.deque, bytearray)


def retained(client: Courier) -> Dict[str, int]:
    """The length of every container the client holds."""
    return {name: len(value) for name, value in vars(client).items() if isinstance(value, CONTAINERS)}


def test_memory_stays_bounded_over_many_messages(binary: str, env, tmp_path: Path, origin) -> None:
    # Given a client and courier sending a progress notification per chunk
    largest: Dict[str, int] = collections.Counter()
    progress = [0]

    def note(method: str, params: Any) -> None:
        if method == "download/progress":
            progress[0] += 1
            if progress[0] % 500 == 0:
                for name, size in retained(c).items():
                    largest[name] = max(largest[name], size)

    args = ["--cache-dir", str(tmp_path / "cache"), "--progress-interval", "0", "--max-active", "8"]
    with Courier(binary, args, env=env) as c:
        c.on_notification(note)

        # When at least 20,000 progress notifications, and the responses and
        # outcomes of the downloads, have been delivered
        for round_ in range(6):
            receipts = [c.download(origin.url(f"/drip?size=260000&chunks=2600&interval=0.001"
                                              f"&seed={round_}-{n}"))["receipt"] for n in range(8)]
            assert all(c.wait(r)["ok"] for r in receipts)
            if progress[0] >= 20000:
                break
        assert progress[0] >= 20000

        # Then nothing the client holds grew with them: each container stayed
        # small, courier's stderr within its kept tail
        for name, size in {**largest, **retained(c)}.items():
            limit = 2 * 64 * 1024 if name == "_stderr_buf" else 16
            assert size <= limit, f"{name} held {size} items after {progress[0]} notifications"


def test_outcomes_nobody_waits_for_are_kept_up_to_keep_outcomes(courier_kwargs: Dict[str, Any], origin) -> None:
    with Courier(keep_outcomes=3, **courier_kwargs) as c:
        url = origin.url("/cache?max-age=600&body=x")
        assert c.fetch(url)["ok"]
        receipts = [c.download(url)["receipt"] for _ in range(10)]
        assert c.fetch(origin.url("/bytes/1"))["ok"]  # the ten have ended by now
        assert retained(c)["_outcomes"] == 3  # the fetch took its own
        assert [c.wait(r)["ok"] for r in receipts[-3:]] == [True] * 3
        with pytest.raises(WaitTimeout):
            c.wait(receipts[0], wait_timeout=0.2)


# -- destinations and temporary paths ---------------------------------------------------


def test_a_relative_destination_is_taken_from_the_callers_directory(
        courier_kwargs: Dict[str, Any], origin, tmp_path: Path, monkeypatch) -> None:
    # Given a caller in one directory and courier started in another
    (tmp_path / "caller").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "caller")
    with Courier(cwd=tmp_path / "elsewhere", **courier_kwargs) as c:
        # When a download names a relative destination (a str, then a Path)
        first = c.fetch(origin.url("/bytes/300"), destination="out/a.bin")
        second = c.fetch(origin.url("/bytes/30"), destination=Path("b.bin"))

    # Then the files are where the caller's relative paths point
    assert first["ok"] and first["path"] == str(tmp_path / "caller" / "out" / "a.bin")
    assert (tmp_path / "caller" / "out" / "a.bin").read_bytes() == pattern(300)
    assert second["ok"] and (tmp_path / "caller" / "b.bin").read_bytes() == pattern(30)
    assert not (tmp_path / "elsewhere" / "out").exists()


def test_keep_copies_a_temporary_path_before_close_removes_it(
        courier_kwargs: Dict[str, Any], origin, tmp_path: Path, monkeypatch) -> None:
    work = tmp_path / "work"
    (work / "dir").mkdir(parents=True)
    monkeypatch.chdir(work)
    with Courier(**courier_kwargs) as c:
        # Given an outcome without destination: a temporary file
        outcome = c.fetch(origin.url("/bytes/2000?name=x"))
        temporary = Path(outcome["path"])
        assert temporary.read_bytes() == pattern(2000)

        # When it is kept under a relative name, and into a directory
        kept = c.keep(outcome, "kept.bin")
        nested = c.keep(outcome, "new/dir/nested.bin")
        into = c.keep(outcome, "dir")
        with pytest.raises(ValueError):
            c.keep(c.fetch(origin.url("/bytes/5"), body="text"), "text.bin")

    # Then the copies stay after close, which removed the temporary file
    assert kept == str(work / "kept.bin") and Path(kept).read_bytes() == pattern(2000)
    assert into == str(work / "dir" / "2000") and Path(into).read_bytes() == pattern(2000)
    assert Path(nested).read_bytes() == pattern(2000)
    assert not temporary.exists()
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == [
        "dir", "dir/2000", "kept.bin", "new", "new/dir", "new/dir/nested.bin"]


# -- courier not found --------------------------------------------------------------------


def test_courier_not_found_names_the_binary_and_how_to_set_it(tmp_path: Path, monkeypatch) -> None:
    # A path that does not exist
    missing = tmp_path / "no" / "courier"
    with pytest.raises(CourierNotFound) as caught:
        Courier(missing)
    message = str(caught.value)
    assert str(missing) in message and "COURIER" in message and "PATH" in message
    assert isinstance(caught.value, FileNotFoundError) and isinstance(caught.value, CourierError)

    # A file that cannot be run
    plain = tmp_path / "courier"
    plain.write_text("not a program")
    with pytest.raises(CourierNotFound, match="cannot be run"):
        Courier(plain)

    # Neither COURIER nor PATH has one
    monkeypatch.delenv("COURIER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no"))
    with pytest.raises(CourierNotFound) as on_path:
        Courier()
    assert "no 'courier' on PATH" in str(on_path.value) and "COURIER" in str(on_path.value)

    # COURIER names one that is not there
    monkeypatch.setenv("COURIER", str(missing))
    with pytest.raises(CourierNotFound, match=r"from \$COURIER"):
        Courier()


def test_courier_from_the_environment(binary: str, env, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COURIER", binary)
    with Courier(args=["--cache-dir", str(tmp_path / "cache")], env=env) as c:
        assert c.argv[0] == binary
        assert c.initialize()["serverInfo"]["name"] == "courier"


# -- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize("url, name", [
    ("http://h/a/my%20file.txt", "my file.txt"),
    ("http://h/caf%C3%A9.txt?x=1#f", "café.txt"),
    ("http://h/dir/", "index.html"),
    ("http://h", "index.html"),
    ("http://h/a%2Fb", "a_b"),
    ("http://h/%2e%2e", "index.html"),
    ("http://h/x%00y%0A", "x_y_"),
])
def test_file_names_from_urls(url: str, name: str) -> None:
    assert file_name(url) == name


def run_cli(*args: str, env: Dict[str, Any], cwd: Path) -> subprocess.CompletedProcess:
    child_env = {**os.environ, **{k: v for k, v in env.items() if v is not None}}
    for name in [k for k, v in env.items() if v is None]:
        child_env.pop(name, None)
    src = str(REPO / "clients" / "python" / "src")
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "courier_client", *args],
                          capture_output=True, text=True, env=child_env, cwd=cwd, timeout=60)


def test_the_command_line_saves_files_and_prints_each_outcome(binary: str, origin, env, tmp_path: Path) -> None:
    cache = ["--arg=--cache-dir", f"--arg={tmp_path / 'cache'}"]
    work = tmp_path / "work"
    work.mkdir()

    # URLs into the current directory, named after their last segment
    run = run_cli("--courier", binary, *cache, "--body", "text",
                  origin.url("/text"), origin.url("/status/404"), env=env, cwd=work)
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [line["ok"] for line in lines] == [True, False], run.stderr
    assert lines[0]["path"] == str(work / "text") and "café" in lines[0]["text"]
    assert "café" in (work / "text").read_text()
    assert run.returncode == 1

    # -o names the file; -d the directory; the paths printed exist after exit
    run = run_cli("--courier", binary, *cache, "-o", "one.bin", origin.url("/bytes/10"),
                  env=env, cwd=work)
    assert json.loads(run.stdout)["path"] == str(work / "one.bin"), run.stderr
    run = run_cli("--courier", binary, *cache, "-d", "many", origin.url("/bytes/7"),
                  origin.url("/image/png"), env=env, cwd=work)
    paths = [json.loads(line)["path"] for line in run.stdout.splitlines()]
    assert paths == [str(work / "many" / "7"), str(work / "many" / "png")], run.stderr
    assert all(Path(path).is_file() for path in paths) and run.returncode == 0
    assert (work / "one.bin").read_bytes() == pattern(10)


def test_the_command_line_refuses_what_it_cannot_do(binary: str, origin, env, tmp_path: Path) -> None:
    # -o with two URLs, two URLs with one name: usage errors before any download
    two = run_cli("--courier", binary, "-o", "f", origin.url("/bytes/1"), origin.url("/bytes/2"),
                  env=env, cwd=tmp_path)
    assert two.returncode == 2 and "-o FILE saves one URL" in two.stderr
    same = run_cli("--courier", binary, origin.url("/a/x"), origin.url("/b/x"), env=env, cwd=tmp_path)
    assert same.returncode == 2 and "would both be saved as" in same.stderr

    # No courier: one line naming it, no traceback
    missing = str(tmp_path / "nowhere" / "courier")
    run = run_cli("--courier", missing, origin.url("/bytes/1"), env=env, cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert missing in run.stderr and "COURIER" in run.stderr and "Traceback" not in run.stderr
    assert list(tmp_path.iterdir()) == []
