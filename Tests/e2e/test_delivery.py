"""End-to-end tests of what reaches each receipt: coalesced receipts asking
for different kinds of body each get the whole, correct body; one receipt's
limit never fails another's; bodies held in memory are capped (decoded bytes
counted); and what a killed courier left is removed at the next start."""

from __future__ import annotations

import base64
import os
import signal
from pathlib import Path

import pytest

from origin import gzip_plain, pattern

MEMORY_BODY_LIMIT = 64 << 20


def read_status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


@pytest.mark.parametrize("memory", ["0", "100MiB"])
def test_coalesced_receipts_each_get_their_own_kind_of_body(courier, origin, tmp_path, memory):
    # Given one slow body that every request below joins while it is in flight
    size = 200_000
    url = origin.url(f"/drip?size={size}&chunks=4&interval=0.05&delay=0.2&seed=mix")
    expected = pattern(size, "mix")
    c = courier("--memory-capacity", memory)
    # (the receipts that need the body in memory come after the last one
    # that takes the file, which may move it away)
    kinds = [
        {"destination": str(tmp_path / "a" / "first")},
        {"body": "none"},
        {"destination": str(tmp_path / "b" / "second")},
        {"destination": str(tmp_path / "a" / "third")},
        {"body": "none"},
        {"body": "text", "textEncoding": "iso-8859-1"},
        {"body": "base64"},
    ]

    # When they are sent at once
    results = c.batch([("download", {"url": url, **kind}) for kind in kinds])
    assert len({r["result"]["task"] for r in results}) == 1, results
    outcomes = c.wait_all([r["result"]["receipt"] for r in results])

    # Then the origin was asked once and every receipt has the whole body in its kind
    assert origin.hits("/drip") == 1
    for kind, result in zip(kinds, results):
        out = outcomes[result["result"]["receipt"]]
        assert out["ok"] and out["size"] == size, out
        if kind.get("body") == "text":
            assert out["text"].encode("latin-1") == expected
        if kind.get("body") == "base64":
            assert base64.b64decode(out["base64"]) == expected
        if "destination" in kind or kind.get("body") == "none":
            assert Path(out["path"]).read_bytes() == expected, kind
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["first", "third"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["second"]


def test_a_receipt_without_max_bytes_is_not_failed_by_another_receipts_limit(courier, origin):
    size = 50_000
    # Chunked, so the limit is found while bytes arrive
    url = origin.url(f"/drip?size={size}&chunks=5&interval=0.05&delay=0.2&length=0&seed=limit")
    c = courier()
    limited, unlimited = c.batch([
        ("download", {"url": url, "maxBytes": 1000, "body": "base64"}),
        ("download", {"url": url, "body": "base64"}),
    ])
    assert limited["result"]["task"] == unlimited["result"]["task"]
    outcomes = c.wait_all([limited["result"]["receipt"], unlimited["result"]["receipt"]])
    assert outcomes[limited["result"]["receipt"]]["error"]["code"] == "too_large"
    out = outcomes[unlimited["result"]["receipt"]]
    assert out["ok"], out
    assert base64.b64decode(out["base64"]) == pattern(size, "limit")
    assert origin.hits("/drip") == 1


def test_a_gzip_that_expands_past_the_memory_limit_is_too_large_in_memory_only(courier, origin):
    # Given a response of a few hundred KiB that decodes to more than the limit
    size = MEMORY_BODY_LIMIT + (1 << 20)
    url = origin.url(f"/gzip?size={size}")
    c = courier("--memory-capacity", "0")

    # When it is asked for as text, as base64, and as a file
    text = c.fetch(url, body="text", timeout=60)
    encoded = c.fetch(url, body="base64", timeout=60)
    out = c.fetch(url, body="none", timeout=60)

    # Then the bodies held in memory fail too_large, and the file is whole
    assert text["error"]["code"] == "too_large" and "text" not in text
    assert encoded["error"]["code"] == "too_large"
    assert out["ok"] and out["size"] == size, out
    assert os.path.getsize(out["path"]) == size
    with open(out["path"], "rb") as file:
        assert file.read(1 << 16) == gzip_plain(1 << 16)
    # and courier never held the decoded body in memory
    assert read_status_kib(c.pid, "VmHWM") < 200 * 1024


def test_a_body_at_the_memory_limit_is_delivered(courier, origin):
    c = courier()
    size = 1 << 20
    out = c.fetch(origin.url(f"/gzip?size={size}"), body="text", timeout=60)
    assert out["ok"] and out["text"].encode() == gzip_plain(size)


def test_what_a_killed_courier_left_is_removed_at_the_next_start(courier, origin, cache_dir, tmp_path):
    downloads = tmp_path / "out"
    downloads.mkdir()
    # Given a courier that streamed into a destination directory and into
    # tmp/, and kept a `path` file, when it was killed
    killed = courier()
    done = killed.fetch(origin.url("/bytes/1000"), body="none")
    beside = killed.download(origin.url("/stall?after=5000&seed=a"), destination=str(downloads / "file"))
    in_tmp = killed.download(origin.url("/stall?after=5000&seed=b"))
    killed.wait_progress(beside["task"])
    killed.wait_progress(in_tmp["task"])
    partials = [p for p in downloads.iterdir() if p.name.endswith(".part")]
    assert len(partials) == 1 and partials[0].name.startswith(".file.courier-")
    assert [p for p in (cache_dir / "tmp").iterdir() if p.name.endswith(".part")]
    assert Path(done["path"]).exists()
    # and another courier still running on the same cache directory
    alive = courier()
    alive_stream = alive.download(origin.url("/stall?after=5000&seed=c"))
    alive.wait_progress(alive_stream["task"])
    alive_files = {p.name for p in (cache_dir / "tmp").iterdir() if p.name.startswith(f"{alive.pid}-")}
    assert any(name.endswith(".part") for name in alive_files)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait_exit(10)

    # When courier starts again on that cache directory
    again = courier()
    again.initialize()

    # Then the dead process's files are gone, and the live one's are not
    assert [p for p in downloads.iterdir()] == []
    assert not Path(done["path"]).exists()
    assert not (cache_dir / "downloads" / str(killed.pid)).exists()
    left = {p.name for p in (cache_dir / "tmp").iterdir()}
    assert not [name for name in left if name.startswith(f"{killed.pid}-")], left
    assert alive_files <= left
    assert again.fetch(origin.url("/bytes/10"))["ok"]


def test_a_hostile_journal_cannot_make_courier_delete_other_files(courier, cache_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    decoy = tmp_path / ".victim.courier-999999-x.part"
    decoy.write_bytes(b"keep too")
    (cache_dir / "journals").mkdir(parents=True, exist_ok=True)
    (cache_dir / "journals" / "999998-abc").write_text(
        f"downloads {tmp_path}\npartial {victim}\npartial {decoy}\ndownloads /\n")
    c = courier()
    c.initialize()
    assert victim.read_bytes() == b"keep"
    assert decoy.read_bytes() == b"keep too"  # named for another process id
    assert not (cache_dir / "journals" / "999998-abc").exists()


def test_the_memory_limit_is_a_setting(courier, origin):
    c = courier("--max-memory-body", "1KiB")
    assert c.initialize()["config"]["maxMemoryBody"] == 1024
    url = origin.url("/bytes/2000")
    assert c.fetch(url, body="text")["error"]["code"] == "too_large"
    assert c.fetch(url, body="none")["ok"]
    c.request("initialize", {"options": {"maxMemoryBody": 4096}})
    assert c.fetch(url, body="base64", cachePolicy="reload")["ok"]
