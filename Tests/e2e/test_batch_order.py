"""End-to-end tests of the order of a batch's answers and the notifications
about what they introduce, read as raw lines from courier's stdout: a
`download` answer comes before any notification naming its receipt and a
`bind` answer before its view's state, when the requests come in a batch as
when they come alone; a `wait: true` answer still comes after its receipt's
`download/finished`."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

import pytest

from conftest import COURIER


class Raw:
    """courier on pipes: lines written, every line read kept in order."""

    def __init__(self, cache_dir):
        self.proc = subprocess.Popen([COURIER, "--cache-dir", str(cache_dir)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, message) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, condition, timeout: float = 30) -> list:
        """Reads until ``condition(seen)`` holds; returns everything seen."""
        deadline = time.monotonic() + timeout
        while not condition(self.seen):
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert message is not None, "courier closed its output"
            self.seen.append(message)
        return self.seen

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def raw(cache_dir):
    session = Raw(cache_dir)
    yield session
    session.close()


def request(id_, method, params):
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def get(message, key: str):
    """A member of a single message; nothing for a batch's array."""
    return message.get(key) if isinstance(message, dict) else None


def position(seen, predicate) -> int:
    return next(i for i, message in enumerate(seen) if predicate(message))


def finished_index(seen, receipt) -> int:
    return position(seen, lambda m: get(m, "method") == "download/finished" and m["params"]["receipt"] == receipt)


def test_cache_hits_in_a_batch_are_answered_before_they_are_finished(raw, origin):
    url = origin.url("/cache?max-age=600&body=kept")
    raw.send(request(1, "download", {"url": url, "wait": True}))
    raw.until(lambda seen: any(get(m, "id") == 1 for m in seen))

    raw.send([request(10 + i, "download", {"url": url}) for i in range(5)]
             + [request(20, "download", {"url": origin.url("/bytes/9"), "cachePolicy": "cacheOnly"})])
    seen = raw.until(lambda seen: isinstance(seen[-1], list) or sum(
        get(m, "method") == "download/finished" for m in seen) >= 7 and any(isinstance(m, list) for m in seen))
    array_at = position(seen, lambda m: isinstance(m, list))
    answers = {entry["id"]: entry["result"] for entry in seen[array_at]}
    assert sorted(answers) == [10, 11, 12, 13, 14, 20]
    assert all(answers[10 + i]["source"] == "memory" for i in range(5))
    seen = raw.until(lambda seen: all(
        any(get(m, "method") == "download/finished" and m["params"]["receipt"] == a["receipt"] for m in seen)
        for a in answers.values()))
    for answer in answers.values():
        assert finished_index(seen, answer["receipt"]) > array_at, (answer, seen)


def test_a_wait_answer_in_a_batch_follows_its_notice_and_a_plain_one_precedes_its_own(raw, origin):
    cached = origin.url("/cache?max-age=600&body=mixed")
    raw.send(request(1, "download", {"url": cached, "wait": True}))
    raw.until(lambda seen: any(get(m, "id") == 1 for m in seen))

    slow = origin.url("/drip?size=2000&chunks=4&interval=0.05")
    raw.send([request(2, "download", {"url": slow, "wait": True}),
              request(3, "download", {"url": cached})])
    seen = raw.until(lambda seen: any(isinstance(m, list) for m in seen))
    array_at = position(seen, lambda m: isinstance(m, list))
    answers = {entry["id"]: entry["result"] for entry in seen[array_at]}
    waited, plain = answers[2]["receipt"], answers[3]["receipt"]
    assert answers[2]["outcome"]["ok"] is True
    assert finished_index(seen, waited) < array_at
    seen = raw.until(lambda seen: any(
        get(m, "method") == "download/finished" and m["params"]["receipt"] == plain for m in seen))
    assert finished_index(seen, plain) > array_at
    late_progress = [m for m in seen[array_at:] if get(m, "method") == "download/progress"
                     and waited in m["params"]["receipts"]]
    assert late_progress == []


def test_a_bind_in_a_batch_is_answered_before_its_view_state(raw, origin):
    slow = origin.url("/drip?size=4000&chunks=40&interval=0.05")
    raw.send(request(1, "download", {"url": slow}))
    seen = raw.until(lambda seen: any(get(m, "id") == 1 for m in seen))
    task = next(m for m in seen if get(m, "id") == 1)["result"]["task"]
    raw.until(lambda seen: any(get(m, "method") == "download/progress" for m in seen))

    raw.send([request(2, "bind", {"view": "spinner", "task": task, "kind": "animating"}),
              request(3, "progress", {})])
    seen = raw.until(lambda seen: any(isinstance(m, list) for m in seen) and any(
        (get(m, "method") or "").startswith("view/") for m in seen))
    array_at = position(seen, lambda m: isinstance(m, list))
    assert position(seen, lambda m: (get(m, "method") or "").startswith("view/")) > array_at


def test_a_long_batch_runs_every_entry_and_is_answered_in_order(raw, origin, tmp_path):
    # 600 downloads, some 100 KiB of text: long enough to be parsed in halves
    entries = [request(i, "download", {"url": origin.url(f"/bytes/{100 + i}"), "destination": str(tmp_path / f"f{i}")})
               for i in range(600)]
    assert len(json.dumps(entries)) > 64 * 1024
    raw.send(entries)
    seen = raw.until(lambda seen: any(isinstance(m, list) for m in seen)
                     and sum(get(m, "method") == "download/finished" for m in seen) >= 600, timeout=60)
    array = next(m for m in seen if isinstance(m, list))
    assert [entry["id"] for entry in array] == list(range(600))
    finished = {m["params"]["receipt"]: m["params"] for m in seen if get(m, "method") == "download/finished"}
    for i, entry in enumerate(array):
        assert finished[entry["result"]["receipt"]]["outcome"]["ok"] is True
        assert (tmp_path / f"f{i}").stat().st_size == 100 + i


def test_a_long_batch_broken_in_its_second_half_is_one_parse_error_and_runs_nothing(raw, origin, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    entries = [request(i, "download", {"url": origin.url(f"/bytes/{i}"), "destination": str(out / f"f{i}")})
               for i in range(600)]
    text = json.dumps(entries)
    broken = text[:-1] + ', {"jsonrpc": "2.0", "id": 600, "method": "ping"'  # the last entry and the array unclosed
    assert len(broken) > 64 * 1024
    raw.proc.stdin.write(broken.encode() + b"\n")
    raw.proc.stdin.flush()
    raw.send(request("after", "progress", {}))
    seen = raw.until(lambda seen: any(get(m, "id") == "after" for m in seen))
    errors = [m for m in seen if get(m, "error")]
    assert len(errors) == 1 and errors[0]["error"]["code"] == -32700 and errors[0]["id"] is None
    assert not any(isinstance(m, list) or get(m, "method") == "download/finished" for m in seen)
    assert list(out.iterdir()) == []
    assert origin.hits("/bytes/1") == 0
