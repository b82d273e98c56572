"""Neither client gives up on a download by itself: ``wait()`` and ``fetch()``
follow a receipt to its end however long the transfer takes (courier's
transfer ``timeout`` bounds it, 300 s by default).

The downloads here take about 32 s; this file holds nothing else, so that
pytest-xdist (``--dist loadfile``) runs it beside the other files."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List

from courier_client import Courier, Outcome
from courier_client.aio import AsyncCourier

SIZE = 33 * 1024
CHUNKS = 33
INTERVAL = 1.0  # 32 s from the first chunk to the last


def test_waits_follow_a_download_longer_than_30_s(courier_kwargs: Dict[str, Any], origin) -> None:
    def url(name: str) -> str:
        return origin.url(f"/drip?size={SIZE}&chunks={CHUNKS}&interval={INTERVAL}&seed={name}")

    outcomes: Dict[str, Outcome] = {}
    errors: List[BaseException] = []

    def in_thread(work: Callable[[], None]) -> threading.Thread:
        def target() -> None:
            try:
                work()
            except BaseException as error:  # reported by the assertion below
                errors.append(error)
        thread = threading.Thread(target=target)
        thread.start()
        return thread

    def sync_fetch() -> None:
        outcomes["sync fetch"] = c.fetch(url("sync-fetch"))

    async def asynchronous() -> None:
        async with AsyncCourier(**courier_kwargs) as a:
            receipt = (await a.download(url("async-wait")))["receipt"]
            outcomes["async fetch"], outcomes["async wait"] = await asyncio.gather(
                a.fetch(url("async-fetch")), a.wait(receipt))

    started = time.monotonic()
    with Courier(**courier_kwargs) as c:
        # Given four downloads of 32 s each, through both clients at once
        receipt = c.download(url("sync-wait"))["receipt"]
        threads = [in_thread(sync_fetch), in_thread(lambda: asyncio.run(asynchronous()))]

        # When the clients wait for them with no wait_timeout
        outcomes["sync wait"] = c.wait(receipt)
        for thread in threads:
            thread.join(120)
    elapsed = time.monotonic() - started

    # Then every wait returned the whole body, after more than 30 s
    assert errors == []
    assert sorted(outcomes) == ["async fetch", "async wait", "sync fetch", "sync wait"]
    assert all(o["ok"] and o["size"] == SIZE for o in outcomes.values()), outcomes
    assert elapsed > 31
