"""The resilience params and what they give back, through both clients,
against the real binary and origin: ``download/retrying`` as a typed
event, ``attempts``, ``resumedFrom``, ``error.retryAfter``, mirrors, and
``integrity_mismatch`` with its digests on the outcome and on
``DownloadError``."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any, Dict, List

import pytest

from courier_client import Courier, DownloadError, DownloadParams, DownloadRetrying, OutcomeError
from courier_client.aio import AsyncCourier
from origin import pattern


@pytest.fixture
def fast_retries(courier_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """courier with retries that wait a few milliseconds, not half a second."""
    return {**courier_kwargs, "args": [*courier_kwargs["args"], "--retry-delay", "0.01"]}


def keys(shape: Any) -> set:
    return set(shape.__required_keys__) | set(shape.__optional_keys__)


def sri(body: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(body).digest()).decode()


def test_a_retried_download_sends_a_typed_retrying_event_and_counts_its_attempts(fast_retries, origin) -> None:
    url = origin.url("/flaky/py-retry?statuses=503,503,200&size=500")
    seen: List[DownloadRetrying] = []
    with Courier(**fast_retries) as c:
        c.on_notification(lambda _method, params: seen.append(params), "download/retrying")
        params: DownloadParams = {"retries": 3}
        outcome = c.fetch(url, body="base64", **params)
    assert outcome["ok"] and base64.b64decode(outcome["base64"]) == pattern(500, "py-retry")
    assert outcome["attempts"] == 3
    assert [event["attempt"] for event in seen] == [2, 3]
    for event in seen:
        assert set(event) <= keys(DownloadRetrying) and set(DownloadRetrying.__required_keys__) <= set(event)
        assert event["error"]["code"] == "http_status" and event["error"]["httpStatus"] == 503
        assert set(event["error"]) <= keys(OutcomeError)
        assert event["delay"] >= 0 and event["receipts"]


def test_retries_zero_fails_at_once(fast_retries, origin) -> None:
    with Courier(**fast_retries) as c:
        outcome = c.fetch(origin.url("/flaky/py-none?statuses=503,200"), retries=0)
    assert not outcome["ok"] and outcome["error"]["code"] == "http_status" and outcome["attempts"] == 1
    assert origin.hits("/flaky/py-none") == 1


def test_a_retry_after_past_the_caps_is_on_the_error(fast_retries, origin) -> None:
    url = origin.url("/flaky/py-after?statuses=503,200&retry-after=3600")
    with Courier(**fast_retries) as c:
        with pytest.raises(DownloadError) as raised:
            c.fetch(url, raise_on_error=True)
    assert raised.value.code == "http_status" and raised.value.retry_after == 3600
    assert raised.value.outcome["error"]["retryAfter"] == 3600 and raised.value.attempts == 1


def test_a_mirror_serves_when_the_url_fails(fast_retries, origin) -> None:
    url = origin.url("/flaky/py-main?statuses=503&seed=shared")
    mirror = origin.url("/flaky/py-mirror?seed=shared&size=300")
    with Courier(**fast_retries) as c:
        outcome = c.fetch(url, mirrors=[mirror], body="base64")
    assert outcome["ok"] and outcome["url"] == url and outcome["finalUrl"] == mirror
    assert base64.b64decode(outcome["base64"]) == pattern(300, "shared") and outcome["attempts"] == 2


def test_a_cut_download_resumes_and_says_from_where(fast_retries, origin, tmp_path) -> None:
    url = origin.url("/ranged/py-cut?size=200000&cut=50000")
    with Courier(**fast_retries) as c:
        outcome = c.fetch(url, destination=str(tmp_path / "cut.bin"))
    assert outcome["ok"] and outcome["resumedFrom"] == 50000 and outcome["attempts"] == 2
    assert (tmp_path / "cut.bin").read_bytes() == origin.ranged_body("py-cut", 200000)
    assert origin.ranged_log("py-cut")[1]["range"] == "bytes=50000-"


def test_integrity_mismatch_names_both_digests(fast_retries, origin, tmp_path) -> None:
    wrong = sri(b"something else")
    with Courier(**fast_retries) as c:
        with pytest.raises(DownloadError) as raised:
            c.fetch(origin.url("/bytes/100"), destination=str(tmp_path / "x"), integrity=wrong, retries=0,
                    raise_on_error=True)
        good = c.fetch(origin.url("/bytes/100"), body="base64", integrity=sri(pattern(100)))
    assert raised.value.code == "integrity_mismatch"
    assert raised.value.expected == wrong and raised.value.actual == sri(pattern(100))
    assert not (tmp_path / "x").exists()
    assert good["ok"] and base64.b64decode(good["base64"]) == pattern(100)


def test_the_async_client_streams_retrying_events(fast_retries, origin) -> None:
    url = origin.url("/flaky/py-async?statuses=429,200&size=64")

    async def main() -> tuple:
        async with AsyncCourier(**fast_retries) as courier:
            async with courier.notifications("download/retrying") as stream:
                outcome = await asyncio.wait_for(courier.fetch(url, retries=2), 30)
                event: DownloadRetrying = (await asyncio.wait_for(stream.__anext__(), 5)).params
        return outcome, event

    outcome, event = asyncio.run(main())
    assert outcome["ok"] and outcome["attempts"] == 2
    assert event["attempt"] == 2 and event["error"]["code"] == "http_status" and event["error"]["httpStatus"] == 429
