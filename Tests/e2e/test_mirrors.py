"""Mirrors end to end: after a failed attempt the next asks the next of
`url` and the mirrors of every receipt of the task, round again after the
last; the outcome's `url` stays the requested one and `finalUrl` names the
one that served. The origin's request log says which was asked, in order."""

from __future__ import annotations

import base64
import socket

import pytest

from origin import pattern

QUICK = ("--retry-delay", "0.001")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mirrors_are_tried_in_turn_and_final_url_names_the_one_that_served(courier, origin):
    c = courier(*QUICK)
    url = origin.url("/flaky/main?statuses=503&seed=same")
    mirrors = [origin.url("/flaky/second?statuses=502&seed=same"), origin.url("/flaky/third?statuses=200&seed=same")]
    out = c.fetch(url, mirrors=mirrors, body="base64")
    assert out["ok"] is True, out
    assert out["url"] == url and out["finalUrl"] == mirrors[1]
    assert base64.b64decode(out["base64"]) == pattern(1000, "same")
    assert out["attempts"] == 3
    assert [target.split("?")[0] for target in origin.request_log()] == ["/flaky/main", "/flaky/second", "/flaky/third"]
    errors = [n.params["error"]["httpStatus"] for n in c.notifications("download/retrying")]
    assert errors == [503, 502]
    # The body is stored under the URL asked for.
    lookup = c.cache_lookup(url)
    assert lookup["cached"] is True and lookup["size"] == 1000


def test_attempts_go_round_again_until_the_budget_is_spent(courier, origin):
    c = courier(*QUICK)
    url = origin.url("/flaky/a?statuses=503")
    out = c.fetch(url, mirrors=[origin.url("/flaky/b?statuses=500")], retries=4)
    assert out["error"]["httpStatus"] == 503 and out["attempts"] == 5
    assert out["finalUrl"] == url, "the last attempt asked the URL again"
    assert [target.split("?")[0] for target in origin.request_log()] == ["/flaky/a", "/flaky/b"] * 2 + ["/flaky/a"]


def test_a_refused_connection_falls_over_to_a_mirror(courier, origin):
    c = courier(*QUICK)
    url = f"http://127.0.0.1:{closed_port()}/bytes/10"
    mirror = origin.url("/bytes/10")
    out = c.fetch(url, mirrors=[mirror])
    assert out["ok"] is True and out["attempts"] == 2
    assert out["url"] == url and out["finalUrl"] == mirror


def test_a_failure_without_a_response_names_the_url_it_asked_last(courier):
    c = courier(*QUICK)
    url, mirror = f"http://127.0.0.1:{closed_port()}/x", f"http://127.0.0.1:{closed_port()}/y"
    out = c.fetch(url, mirrors=[mirror], retries=1)
    assert out["error"]["code"] == "connect_failed" and out["attempts"] == 2
    assert out["url"] == url and out["finalUrl"] == mirror


def test_a_task_tries_the_mirrors_of_all_its_receipts(courier, origin):
    # Given two receipts of one task, each naming its own mirror
    c = courier(*QUICK)
    url = origin.url("/flaky/shared?statuses=503&hold=1")
    first = c.download(url, mirrors=[origin.url("/flaky/m1?statuses=503")])
    origin.wait_held("flaky/shared")
    second = c.download(url, mirrors=[origin.url("/flaky/m2?statuses=200&seed=shared"), url])
    assert second["task"] == first["task"], "mirrors are not part of the identity"
    origin.release("flaky/shared")
    outcomes = c.wait_all([first["receipt"], second["receipt"]])
    # Then the attempts go to the URL, then each mirror once, in the order given
    assert [o["finalUrl"] for o in outcomes.values()] == [origin.url("/flaky/m2?statuses=200&seed=shared")] * 2
    assert [o["attempts"] for o in outcomes.values()] == [3, 3]
    assert [target.split("?")[0] for target in origin.request_log()] == ["/flaky/shared", "/flaky/m1", "/flaky/m2"]


@pytest.mark.parametrize("mirrors", [
    ["ftp://127.0.0.1/x"], ["file:///etc/passwd"], ["not a url"], ["http://"], ["http://:80/"], [""],
    ["http://127.0.0.1/ x"], ["http://127.0.0.1/\r\nX: y"], [5], [None], "http://127.0.0.1/", {"url": "http://127.0.0.1/"},
])
def test_bad_mirrors_are_invalid_params_and_courier_goes_on(courier, origin, mirrors):
    c = courier("--allow-scheme", "ftp", "--allow-scheme", "file")
    response = c.wait_response(c.send_request("download", {"url": origin.url("/bytes/1"), "mirrors": mirrors}))
    assert response["error"]["code"] == -32602 and response["error"]["data"] == {"param": "mirrors"}
    assert origin.hits("/bytes/1") == 0
    assert c.fetch(origin.url("/bytes/1"), mirrors=["HTTPS://127.0.0.1:9/x"])["ok"] is True
