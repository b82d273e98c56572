"""The asyncio client against the real binary and a real origin. Each test
runs its own event loop with ``asyncio.run``."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Tuple

import pytest

from courier_client import (
    INVALID_PARAMS,
    UNKNOWN_RECEIPT,
    CourierExited,
    CourierNotFound,
    DownloadError,
    Notification,
    RpcError,
    WaitTimeout,
)
from courier_client._common import Deframer
from courier_client.aio import AsyncCourier
from origin import pattern

Body = Callable[[AsyncCourier], Awaitable[Any]]


def run(courier_kwargs: Dict[str, Any], body: Body, **extra: Any) -> AsyncCourier:
    """Runs ``body(courier)`` inside ``async with AsyncCourier(...)``; returns
    the closed client."""

    async def main() -> AsyncCourier:
        async with AsyncCourier(**courier_kwargs, **extra) as courier:
            await asyncio.wait_for(body(courier), 60)
        return courier

    return asyncio.run(main())


def test_download_then_wait(courier_kwargs, origin) -> None:
    async def body(c: AsyncCourier) -> None:
        result = await c.download(origin.url("/bytes/300"), body="base64")
        assert result["state"] in ("queued", "running", "finished")
        outcome = await c.wait(result["receipt"])
        assert outcome["ok"] and base64.b64decode(outcome["base64"]) == pattern(300)

    closed = run(courier_kwargs, body)
    assert closed.returncode == 0 and closed.stdout_garbage == []


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
def test_fetch_and_concurrent_requests(courier_kwargs, origin, framing: str) -> None:
    async def body(c: AsyncCourier) -> None:
        info = await c.initialize(clientInfo={"name": "aio"}, maxActive=2)
        assert info["config"]["maxActive"] == 2 and info["capabilities"]["framing"] == framing
        outcomes = await asyncio.gather(*(c.fetch(origin.url(f"/bytes/{n}")) for n in range(1, 9)))
        assert [o["size"] for o in outcomes] == list(range(1, 9))
        text = await c.fetch(origin.url("/text"), body="text")
        assert "café" in text["text"]

    run(courier_kwargs, body, framing=framing)


def test_outcome_that_arrives_before_wait_is_kept(courier_kwargs, origin) -> None:
    async def body(c: AsyncCourier) -> None:
        receipts = [(await c.download(origin.url(f"/bytes/{n}")))["receipt"] for n in (1, 2, 3)]
        await c.fetch(origin.url("/bytes/4"))  # by now the three have finished
        assert [(await c.wait(r))["size"] for r in receipts] == [1, 2, 3]
        with pytest.raises(TimeoutError):
            await c.wait(receipts[0], wait_timeout=0.2)  # an outcome is returned once

    run(courier_kwargs, body)


def test_errors(courier_kwargs, origin) -> None:
    async def body(c: AsyncCourier) -> None:
        with pytest.raises(RpcError) as bad:
            await c.download("not a url")
        assert bad.value.code == INVALID_PARAMS and bad.value.data == {"param": "url"}
        with pytest.raises(RpcError) as unknown:
            await c.cancel("r424242")
        assert unknown.value.code == UNKNOWN_RECEIPT
        with pytest.raises(RpcError) as missing:
            await c.request("no/such/method")
        assert missing.value.code == -32601

        receipt = (await c.download(origin.url("/status/503")))["receipt"]
        with pytest.raises(DownloadError) as failed:
            await c.wait(receipt, raise_on_error=True)
        assert (failed.value.code, failed.value.http_status) == ("http_status", 503)
        assert failed.value.receipt == receipt and failed.value.outcome["ok"] is False
        with pytest.raises(DownloadError) as fetched:
            await c.fetch(origin.url("/status/404"), raise_on_error=True)
        assert fetched.value.code == "http_status"
        outcome = await c.fetch(origin.url("/status/404"))
        assert outcome["error"]["code"] == "http_status"

    run(courier_kwargs, body)


def test_notifications_as_callbacks(courier_kwargs, origin) -> None:
    plain: List[Tuple[str, Any]] = []
    awaited: List[str] = []

    async def coroutine_callback(method: str, params: Any) -> None:
        await asyncio.sleep(0)
        awaited.append(params["receipt"])

    async def body(c: AsyncCourier) -> None:
        remove = c.on_notification(lambda m, p: plain.append((m, p)))
        c.on_notification(coroutine_callback, "download/finished")
        outcome = await c.fetch(origin.url("/drip?size=3000&chunks=3&interval=0.05"))
        assert outcome["ok"]
        remove()
        await c.fetch(origin.url("/bytes/1"))
        await asyncio.sleep(0.05)

    run(courier_kwargs, body)
    methods = [m for m, _ in plain]
    assert "download/progress" in methods and methods.count("download/finished") == 1
    assert awaited == ["r1", "r2"]


def test_notifications_as_async_iterators(courier_kwargs, origin) -> None:
    async def body(c: AsyncCourier) -> None:
        received: List[Notification] = []
        async with c.notifications("download/finished") as finished:
            receipt = (await c.download(origin.url("/bytes/7")))["receipt"]
            async for note in finished:
                received.append(note)
                break
        assert received[0].params["receipt"] == receipt
        assert received[0].params["outcome"]["size"] == 7

        result = await c.download(origin.url("/drip?size=5000&chunks=5&interval=0.05"))
        updates = [p async for p in c.progress_updates(result["receipt"])]
        assert updates and updates[-1]["received"] == 5000
        assert [u["received"] for u in updates] == sorted(u["received"] for u in updates)
        assert (await c.wait(result["receipt"]))["ok"]

    run(courier_kwargs, body)


def test_a_stream_ends_when_courier_exits(courier_kwargs) -> None:
    async def main() -> List[Notification]:
        async with AsyncCourier(**courier_kwargs) as c:
            stream = c.notifications()
            await c.shutdown()
            await c.exit()
            notes = [note async for note in stream]
            assert await c.wait_exit() == 0
            with pytest.raises(CourierExited):
                await c.cache_stats()
            return notes

    assert asyncio.run(main()) == []


def test_cancel_suspend_resume_progress_and_bind(courier_kwargs, origin) -> None:
    async def body(c: AsyncCourier) -> None:
        views = c.notifications("view/animating")
        result = await c.download(origin.url("/drip?size=2000&chunks=20&interval=0.1"))
        assert await c.bind("spinner", task=result["task"]) == {"bound": True}
        assert (await views.next(wait_timeout=5)).params == {"view": "spinner", "animating": True}
        assert (await c.suspend(receipt=result["receipt"]))["task"] == result["task"]
        assert (await views.next(wait_timeout=5)).params["animating"] is False
        assert (await c.resume(task=result["task"]))["task"] == result["task"]
        assert (await views.next(wait_timeout=5)).params["animating"] is True
        assert (await c.progress(result["receipt"]))["receipt"] == result["receipt"]
        assert "tasks" in await c.progress()
        assert await c.cancel(result["receipt"]) == {"cancelled": True, "count": 1}
        with pytest.raises(DownloadError) as cancelled:
            await c.wait(result["receipt"], raise_on_error=True)
        assert cancelled.value.code == "cancelled"
        assert await c.bind("spinner", task=None) == {"bound": False}

    run(courier_kwargs, body)


def test_indicator_and_cache_calls(courier_kwargs, origin) -> None:
    async def body(c: AsyncCourier) -> None:
        configured = await c.indicator_configure(activationDelay=0.05, completionDelay=0.05)
        assert configured["activationDelay"] == 0.05
        visibility = c.notifications("indicator/visibility")
        assert (await c.indicator_increment())["activityCount"] == 1
        assert (await visibility.next(wait_timeout=5)).params["visible"] is True
        assert (await c.indicator_decrement())["activityCount"] == 0
        assert (await visibility.next(wait_timeout=5)).params["visible"] is False
        assert (await c.indicator_state())["visible"] is False

        url = origin.url("/cache?max-age=600&body=stored")
        assert (await c.fetch(url, body="text"))["text"] == "stored"
        assert (await c.cache_lookup(url))["cached"] is True
        assert (await c.fetch(url, body="text"))["source"] in ("memory", "disk")
        assert (await c.cache_stats())["hits"] == 1
        assert await c.cache_remove(url) == {"removed": True}
        assert (await c.cache_lookup(url))["cached"] is False
        assert set(await c.cache_clear(memory=True, disk=True)) == {"memory", "disk"}

    run(courier_kwargs, body)


def test_a_killed_courier_fails_every_waiter(courier_kwargs, origin) -> None:
    async def main() -> None:
        async with AsyncCourier(**courier_kwargs) as c:
            result = await c.download(origin.url("/stall?after=10&hold=30"))
            waiter = asyncio.ensure_future(c.wait(result["receipt"]))
            await asyncio.sleep(0.1)
            await c.kill()
            with pytest.raises(CourierExited):
                await waiter
            with pytest.raises(CourierExited):
                await c.progress()
            assert not c.alive

    asyncio.run(main())


def test_stderr_is_captured(courier_kwargs) -> None:
    async def body(c: AsyncCourier) -> None:
        await c.initialize(logLevel="debug")
        await c.cache_stats()

    closed = run(courier_kwargs, body)
    assert closed.stderr_text != ""


def test_timeout_is_couriers_and_wait_timeout_the_clients(courier_kwargs, origin) -> None:
    async def body(c: AsyncCourier) -> None:
        # courier's transfer limit ends a stalled download with an outcome
        stalled = await c.fetch(origin.url("/stall?after=10"), timeout=0.5)
        assert stalled["error"]["code"] == "timeout"

        # the client's wait gives up alone: the download goes on
        receipt = (await c.download(origin.url("/drip?size=5000&chunks=5&interval=0.25")))["receipt"]
        with pytest.raises(WaitTimeout) as caught:
            await c.wait(receipt, wait_timeout=0.1)
        assert isinstance(caught.value, TimeoutError) and "goes on" in str(caught.value)
        assert (await c.wait(receipt))["size"] == 5000

    run(courier_kwargs, body)


def test_relative_destination_and_keep(courier_kwargs, origin, tmp_path: Path, monkeypatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    kept: List[str] = []

    async def body(c: AsyncCourier) -> None:
        saved = await c.fetch(origin.url("/bytes/64"), destination="sub/a.bin")
        assert saved["path"] == str(work / "sub" / "a.bin")
        temporary = await c.fetch(origin.url("/bytes/128"))
        kept.append(await c.keep(temporary, "b.bin"))
        kept.append(temporary["path"])

    run(courier_kwargs, body)
    assert (work / "sub" / "a.bin").read_bytes() == pattern(64)
    assert kept[0] == str(work / "b.bin") and (work / "b.bin").read_bytes() == pattern(128)
    assert not Path(kept[1]).exists()  # the temporary file went with courier


def test_courier_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "courier"

    async def main() -> None:
        async with AsyncCourier(missing):
            pass

    with pytest.raises(CourierNotFound) as caught:
        asyncio.run(main())
    assert str(missing) in str(caught.value) and "COURIER" in str(caught.value)


# -- framing, without courier ------------------------------------------------------


def test_deframer_splits_messages_wherever_the_chunks_end() -> None:
    ndjson = b'{"a":1}\n\n{"b":2}\r\n{"c":'
    deframer = Deframer("ndjson")
    pieces = [item for byte in ndjson for item in deframer.feed(bytes([byte]))]
    assert pieces == [(True, b'{"a":1}\n'), (True, b'{"b":2}\r\n')]
    assert deframer.finish() == [(True, b'{"c":')]

    lsp = b'Content-Length: 7\r\n\r\n{"a":1}\r\nX-Bad: 1\r\n\r\nContent-Length: 2\r\n\r\n{}'
    deframer = Deframer("lsp")
    pieces = [item for byte in lsp for item in deframer.feed(bytes([byte]))]
    assert pieces == [(True, b'{"a":1}'), (False, b"X-Bad: 1\r\n"), (True, b"{}")]
    assert deframer.finish() == []
    deframer = Deframer("lsp")
    assert deframer.feed(b"Content-Length: 10\r\n\r\n{}") == []
    assert deframer.finish() == [(False, b"Content-Length: 10\r\n{}")]
