"""Resume: a download that ended without its whole body (it failed, was
cancelled, courier shut down or was killed) goes on where it stopped, with
`Range` and `If-Range`, in this courier or the next one sharing the cache
directory; only a 206 that carries exactly the rest of the same
representation is continued, so two versions are never spliced; what an
origin sends and what the cache directory holds are hostile input.

Every test asserts what the origin received (each request's `Range`,
`If-Range`, status and body bytes sent) and what was delivered, byte for
byte."""

from __future__ import annotations

import base64
import fcntl
import os
import signal
import sqlite3
import time

import pytest

from origin import pattern

MIB = 1 << 20


def kept_rows(cache_dir) -> list[tuple[str, int, int]]:
    """(file, kept length, complete length) of each partial body Cache.db
    names; empty when there is no database or table yet (courier makes them
    on a thread of its own after start-up)."""
    path = os.path.join(str(cache_dir), "Cache.db")
    if not os.path.exists(path):
        return []
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return [(bytes(file).decode(), kept, complete) for file, kept, complete in connection.execute(
            "SELECT file, kept_length, complete_length FROM partial_bodies")]
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return []
        raise
    finally:
        connection.close()


def wait_kept(cache_dir, at_least: int, timeout: float = 20) -> tuple[str, int, int]:
    """Waits until Cache.db names a kept body of at least `at_least` bytes:
    a bounded wait on that event, reading the database at each turn."""
    deadline = time.monotonic() + timeout
    while True:
        rows = [row for row in kept_rows(cache_dir) if row[1] >= at_least]
        if rows:
            return rows[0]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no kept body of {at_least} bytes within {timeout} s: {kept_rows(cache_dir)}")
        time.sleep(0.02)


def partial_files(cache_dir) -> list[str]:
    directory = os.path.join(str(cache_dir), "partials")
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def fetch_with_progress(session, url: str, **params) -> tuple[dict, list[dict]]:
    """The outcome of a download and the progress notifications of its task."""
    answer = session.download(url, **params)
    outcome = session.wait(answer["receipt"])
    return outcome, [params for _, params in session.progress_by_task[answer["task"]]]


def fail_once(session, origin, name: str, size: int, cut: int, query: str = "", **params) -> str:
    """Downloads /ranged/NAME, whose first response ends after `cut` bytes,
    without retries, and checks that it failed: its URL, for asking it
    again."""
    url = origin.url(f"/ranged/{name}?size={size}&cut={cut}{query}")
    first = session.fetch(url, retries=0, **params)
    assert not first["ok"] and first["error"]["code"] == "network", first
    return url


# --------------------------------------------------------------------------
# The channels a partial body survives


def test_a_failed_download_asked_again_asks_only_for_the_rest(courier, origin, cache_dir, tmp_path):
    # Given a 6 MiB resource whose first response ends cleanly after 2 MiB
    session = courier()
    url = origin.url("/ranged/failed?size=6291456&cut=2097152")
    destination = str(tmp_path / "out" / "failed.bin")
    first = session.fetch(url, destination=destination, retries=0)

    # Then that download fails `network`, and its size is the bytes received
    assert not first["ok"] and first["error"]["code"] == "network", first
    assert first["size"] == 2 * MIB, first
    assert "resumedFrom" not in first
    assert not os.path.exists(destination)

    # When it is asked again
    second, progress = fetch_with_progress(session, url, destination=destination)

    # Then the origin was asked only for the rest, if it is still the same
    # representation, without content codings
    log = origin.ranged_log("failed")
    assert [entry["range"] for entry in log] == [None, f"bytes={2 * MIB}-"]
    assert log[1]["if_range"] == '"failed-v1"'
    assert log[1]["accept_encoding"] is None
    assert [entry["status"] for entry in log] == [200, 206]
    assert log[1]["sent"] == 4 * MIB
    # And the whole body was delivered, as the whole 200, resumed from where it stopped
    assert second["ok"], second
    assert second["status"] == 200 and second["size"] == 6 * MIB
    assert second["headers"]["content-length"] == str(6 * MIB) and "content-range" not in second["headers"]
    assert second["resumedFrom"] == 2 * MIB
    with open(destination, "rb") as placed:
        assert placed.read() == origin.ranged_body("failed", 6 * MIB)
    # And its progress counted the kept bytes from the first notification on, never going down
    received = [params["received"] for params in progress]
    assert received and received[0] > 2 * MIB and received == sorted(received) and received[-1] == 6 * MIB
    assert all(params["expected"] == 6 * MIB for params in progress)
    # And nothing is kept any more
    assert kept_rows(cache_dir) == [] and partial_files(cache_dir) == []
    # And the cache stored the whole body, which it serves as it is
    third = session.fetch(url, body="base64")
    assert third["source"] in ("memory", "disk") and third["size"] == 6 * MIB and "resumedFrom" not in third, \
        {k: v for k, v in third.items() if k != "base64"}
    assert base64.b64decode(third["base64"]) == origin.ranged_body("failed", 6 * MIB)
    assert len(origin.ranged_log("failed")) == 2


def test_a_resume_sends_an_entity_tag_that_is_not_utf8_back_byte_for_byte(courier, origin, cache_dir):
    # Given a resource whose strong ETag holds the bytes 0xE9 0xFF, and whose
    # first response ends cleanly after 1 MiB
    session = courier()
    url = origin.url(f"/raw-etag/obs-text?size={3 * MIB}&cut={MIB}")
    first = session.fetch(url, retries=0)
    assert not first["ok"] and first["error"]["code"] == "network", first

    # When it is asked again
    second = session.fetch(url)

    # Then If-Range carried the entity tag's own bytes, the origin answered
    # the rest, and the body is exact
    log = origin.raw_etag_log("obs-text")
    assert [entry["range"] for entry in log] == [None, f"bytes={MIB}-"]
    assert log[1]["if_range"] == origin.raw_etag("obs-text") == b'"obs-text-\xe9\xff"'
    assert [entry["status"] for entry in log] == [200, 206]
    assert second["ok"] and second["resumedFrom"] == MIB, second
    with open(second["path"], "rb") as delivered:
        assert delivered.read() == pattern(3 * MIB, "obs-text")


@pytest.mark.parametrize("size, kept", [(64 * 1024, False), (64 * 1024 + 1, True)])
def test_only_a_body_over_64_kib_is_kept(courier, origin, cache_dir, size, kept):
    # Given a resource of `size` bytes whose first response ends cleanly after half of it
    session = courier("--retry-delay", "0.01")
    name = f"small-{size}"
    url = origin.url(f"/ranged/{name}?size={size}&cut={size // 2}")

    # When it is downloaded with retries
    outcome = session.fetch(url, body="base64")

    # Then a body over 64 KiB is continued from the bytes kept, and one of
    # 64 KiB or less (which costs about its first round trip to fetch again)
    # is asked again whole, with nothing kept meanwhile
    log = origin.ranged_log(name)
    assert [entry["range"] for entry in log] == [None, f"bytes={size // 2}-" if kept else None]
    assert outcome["ok"] and outcome["attempts"] == 2, {k: v for k, v in outcome.items() if k != "base64"}
    assert ("resumedFrom" in outcome) == kept
    assert base64.b64decode(outcome["base64"]) == origin.ranged_body(name, size)
    assert kept_rows(cache_dir) == [] and partial_files(cache_dir) == []


def test_a_retried_attempt_continues_from_the_bytes_kept(courier, origin, cache_dir):
    # Given a resource whose first two responses end cleanly after 2 and then 3 MiB more
    session = courier("--retry-delay", "0.01")
    url = origin.url(f"/ranged/retried?size={8 * MIB}&cut={2 * MIB}&cuts=2")

    # When it is downloaded with retries
    outcome = session.fetch(url)

    # Then each retry asked only for the rest, and the body is exact
    log = origin.ranged_log("retried")
    assert [entry["range"] for entry in log] == [None, f"bytes={2 * MIB}-", f"bytes={4 * MIB}-"]
    assert [entry["sent"] for entry in log] == [2 * MIB, 2 * MIB, 4 * MIB]
    assert outcome["ok"] and outcome["attempts"] == 3 and outcome["resumedFrom"] == 4 * MIB, outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("retried", 8 * MIB)
    assert kept_rows(cache_dir) == [] and partial_files(cache_dir) == []


def test_a_link_cut_more_often_than_the_retries_finishes_while_each_attempt_moves_the_body_on(
        courier, origin, cache_dir):
    # Given a resource whose every response ends cleanly after 256 KiB of
    # body, so that it takes eight attempts, each one continuing the last
    session = courier()
    size, cut = 2 * MIB, MIB // 4
    url = origin.url(f"/ranged/every-cut?size={size}&cut={cut}&cuts=7")

    # When it is downloaded at the default settings (3 retries)
    outcome = session.fetch(url)

    # Then each attempt asked only for the rest, the origin sent the body
    # once, and the body is exact
    log = origin.ranged_log("every-cut")
    assert [entry["range"] for entry in log] == [None] + [f"bytes={n * cut}-" for n in range(1, 8)], log
    assert sum(entry["sent"] for entry in log) == size
    assert outcome["ok"] and outcome["attempts"] == 8 and outcome["resumedFrom"] == 7 * cut, outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("every-cut", size)


@pytest.mark.parametrize("name, query, ranges", [
    ("cut-plain", "validator=none", [None] * 4),
    ("cut-ignoring", "ranges=ignore", [None] + [f"bytes={MIB // 4}-"] * 3),
])
def test_a_cut_body_that_never_continues_still_fails_after_its_retries(courier, origin, cache_dir, name, query, ranges):
    # Given a resource whose every response ends cleanly after 256 KiB of
    # body, and which cannot be continued: it has no validator, or its
    # origin answers every Range with the whole body
    session = courier("--retry-delay", "0.01")
    url = origin.url(f"/ranged/{name}?size={2 * MIB}&cut={MIB // 4}&cuts=8&{query}")

    # When it is downloaded with the default 3 retries
    outcome = session.fetch(url)

    # Then every attempt started anew, and the fourth was the last
    log = origin.ranged_log(name)
    assert [entry["range"] for entry in log] == ranges, log
    assert [entry["status"] for entry in log] == [200] * 4
    assert not outcome["ok"] and outcome["error"]["code"] == "network" and outcome["attempts"] == 4, outcome
    assert "resumedFrom" not in outcome


def test_a_retry_after_a_wrong_answer_to_a_range_starts_anew(courier, origin, cache_dir):
    # Given 2 MiB kept of a resource whose origin answers ranges with a wrong start
    session = courier("--retry-delay", "0.01")
    url = origin.url(f"/ranged/retry-bad?size={4 * MIB}&cut={2 * MIB}&bad=start")
    session.fetch(url, retries=0)

    # When it is asked again, with retries
    outcome = session.fetch(url)

    # Then the wrong 206 failed that attempt, and the next one asked for the whole body
    log = origin.ranged_log("retry-bad")
    assert [entry["range"] for entry in log] == [None, f"bytes={2 * MIB}-", None]
    assert outcome["ok"] and outcome["attempts"] == 2 and "resumedFrom" not in outcome, outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("retry-bad", 4 * MIB)


def test_a_reset_mid_body_continues_from_the_bytes_that_arrived(courier, origin, cache_dir):
    # Given a download whose connection is reset after 3 MiB were sent
    session = courier()
    url = origin.url("/ranged/reset?size=8388608&cut=3145728&how=reset")
    first = session.fetch(url, retries=0)
    assert not first["ok"] and first["error"]["code"] == "network", first
    # (bytes in flight may be lost with a reset: the size says what arrived)
    assert 0 < first["size"] <= 3 * MIB, first

    # When it is asked again, as a `path` download
    second = session.fetch(url)

    # Then the origin was asked from exactly the bytes that had arrived
    log = origin.ranged_log("reset")
    assert log[1]["range"] == f"bytes={first['size']}-" and log[1]["status"] == 206
    assert log[1]["sent"] == 8 * MIB - first["size"]
    assert second["ok"] and second["resumedFrom"] == first["size"], second
    with open(second["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("reset", 8 * MIB)


def test_a_cancelled_download_asked_again_at_once_continues(courier, origin, cache_dir, tmp_path):
    # Given a download under way whose origin holds it after 3 MiB (every
    # report of bytes notified)
    session = courier("--progress-interval", "0")
    url = origin.url("/ranged/cancelled?size=6291456&hold=3145728")
    answer = session.download(url, destination=str(tmp_path / "cancelled.bin"))
    session.wait_until(lambda: any(params["received"] >= 3 * MIB for _, params in session.progress_by_task[answer["task"]]),
                       what="3 MiB received")

    # When it is cancelled and asked again at once
    assert session.cancel(answer["receipt"])["cancelled"] is True
    cancelled = session.wait(answer["receipt"])
    second = session.fetch(url, destination=str(tmp_path / "cancelled.bin"))

    # Then the cancelled outcome said how far it got
    assert cancelled["error"]["code"] == "cancelled" and cancelled["size"] == 3 * MIB, cancelled
    # And the origin was asked for the rest only
    log = origin.ranged_log("cancelled")
    assert [entry["range"] for entry in log] == [None, f"bytes={3 * MIB}-"]
    assert second["ok"] and second["resumedFrom"] == 3 * MIB, second
    with open(tmp_path / "cancelled.bin", "rb") as placed:
        assert placed.read() == origin.ranged_body("cancelled", 6 * MIB)


def test_a_shut_down_download_continues_in_the_next_courier(courier, origin, cache_dir, tmp_path):
    # Given a download under way whose origin holds it after 3 MiB
    first = courier("--progress-interval", "0")
    url = origin.url("/ranged/shutdown?size=6291456&hold=3145728")
    answer = first.download(url)
    first.wait_until(lambda: any(params["received"] >= 3 * MIB for _, params in first.progress_by_task[answer["task"]]),
                     what="3 MiB received")

    # When courier shuts down, and another starts on the same cache directory
    first.shutdown()
    assert first.outcomes[answer["receipt"]][0]["error"]["code"] == "shutdown"
    first.notify("exit")
    assert first.wait_exit() == 0
    second = courier()
    outcome = second.fetch(url)

    # Then the new courier asked the origin for the rest only
    log = origin.ranged_log("shutdown")
    assert [entry["range"] for entry in log] == [None, f"bytes={3 * MIB}-"]
    assert log[1]["if_range"] == '"shutdown-v1"'
    assert outcome["ok"] and outcome["resumedFrom"] == 3 * MIB, outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("shutdown", 6 * MIB)


def test_a_killed_courier_leaves_a_body_the_next_one_continues(courier, origin, cache_dir, tmp_path):
    # Given a 40 MiB download whose origin holds it after 20 MiB
    first = courier("--progress-interval", "0", validate="none")
    url = origin.url("/ranged/killed?size=41943040&hold=20971520")
    destination = str(tmp_path / "killed.bin")
    answer = first.download(url, destination=destination)
    first.wait_until(lambda: any(params["received"] >= 20 * MIB for _, params in first.progress_by_task[answer["task"]]),
                     what="20 MiB received")
    # (its checkpoints are in Cache.db: 8 and 16 MiB)
    wait_kept(cache_dir, 16 * MIB)

    # When courier is killed, and another starts on the same cache directory
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait_exit() == -signal.SIGKILL
    [(_, kept, complete)] = kept_rows(cache_dir)
    assert 16 * MIB <= kept <= 20 * MIB and complete == 40 * MIB
    second = courier()
    outcome = second.fetch(url, destination=destination)

    # Then the origin saw a Range request from the last checkpoint, with If-Range
    log = origin.ranged_log("killed")
    assert [entry["range"] for entry in log] == [None, f"bytes={kept}-"]
    assert log[1]["if_range"] == '"killed-v1"' and log[1]["status"] == 206
    assert log[1]["sent"] == 40 * MIB - kept
    # And the file is exact
    assert outcome["ok"] and outcome["resumedFrom"] == kept, outcome
    with open(destination, "rb") as placed:
        assert placed.read() == origin.ranged_body("killed", 40 * MIB)
    assert partial_files(cache_dir) == []
    print(f"kill test: killed at >= 20 MiB received, resumed from {kept} bytes, "
          f"origin sent {log[0]['sent'] + log[1]['sent']} bytes for a 40 MiB file")


def test_files_a_killed_courier_left_unrecorded_go_at_the_next_start_unless_held(courier, origin, cache_dir):
    # Given a courier killed while a body streams into partials/ before its first checkpoint (no row names it)
    first = courier("--progress-interval", "0", validate="none")
    answer = first.download(origin.url("/ranged/unrecorded?size=8388608&hold=1048576"))
    first.wait_until(lambda: any(params["received"] >= MIB for _, params in first.progress_by_task[answer["task"]]),
                     what="1 MiB received")
    [left] = partial_files(cache_dir)
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait_exit() == -signal.SIGKILL
    assert kept_rows(cache_dir) == []
    # And a file of courier's form that another process holds, made just now
    held_path = os.path.join(str(cache_dir), "partials", "00000000000000aa.part")
    held = os.open(held_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)

        # When another courier starts on the cache directory, and has used its partial store once
        second = courier()
        assert second.fetch(origin.url(f"/ranged/after-sweep?size={MIB}"))["ok"]

        # Then the file no row names and nobody holds is gone at once, however new
        # (its writer locked it before it had its name), and the held one stays
        assert left not in partial_files(cache_dir)
        assert partial_files(cache_dir) == ["00000000000000aa.part"]
    finally:
        os.close(held)


def test_a_download_suspended_before_its_body_arrives_reads_nothing_until_resumed(courier, origin):
    # Given a download suspended once its response's head is in, before any of its body
    session = courier("--progress-interval", "0")
    answer = session.download(origin.url("/hold/suspended?size=1000&first=0"))
    origin.wait_held("suspended", 1)
    assert session.suspend(receipt=answer["receipt"])["state"] == "suspended"

    # When the origin has sent the whole body, and another download went through the same loop
    origin.release("suspended")
    origin.wait_sent("suspended", 1)
    assert session.fetch(origin.url("/bytes/10"))["ok"]

    # Then nothing of it was read while suspended
    assert session.progress(answer["receipt"])["received"] == 0
    assert session.progress_by_task[answer["task"]] == []
    # And once resumed it runs and finishes
    assert session.resume(receipt=answer["receipt"])["state"] == "running"
    outcome = session.wait(answer["receipt"])
    assert outcome["ok"] and outcome["size"] == 1000, outcome


# --------------------------------------------------------------------------
# Origins that change, ignore ranges or answer them wrongly


def test_a_resource_changed_meanwhile_starts_anew_and_is_never_spliced(courier, origin, cache_dir):
    # Given 2 MiB kept of a resource's first version
    session = courier()
    url = fail_once(session, origin, "changed", 6 * MIB, 2 * MIB)

    # When the resource changes, and it is asked again
    origin.ranged_bump("changed")
    outcome = session.fetch(url)

    # Then courier asked for the rest of the first version, got the whole second one, and delivered it alone
    log = origin.ranged_log("changed")
    assert log[1]["range"] == f"bytes={2 * MIB}-" and log[1]["if_range"] == '"changed-v1"'
    assert log[1]["status"] == 200 and log[1]["sent"] == 6 * MIB
    assert outcome["ok"] and "resumedFrom" not in outcome, outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("changed", 6 * MIB)


def test_an_origin_that_answers_200_to_every_range_starts_anew(courier, origin, cache_dir):
    # Given 2 MiB kept of a resource whose origin ignores Range
    session = courier()
    url = origin.url(f"/ranged/ignoring?size={6 * MIB}&cut={2 * MIB}&ranges=ignore")
    first = session.fetch(url, retries=0)
    assert not first["ok"]

    # When it is asked again
    outcome = session.fetch(url)

    # Then the whole body came anew and was delivered alone
    log = origin.ranged_log("ignoring")
    assert log[1]["range"] == f"bytes={2 * MIB}-" and log[1]["status"] == 200 and log[1]["sent"] == 6 * MIB
    assert outcome["ok"] and "resumedFrom" not in outcome and outcome["size"] == 6 * MIB, outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("ignoring", 6 * MIB)


@pytest.mark.parametrize("bad, message", [
    ("start", "starts at byte"),
    ("length", "complete length"),
    ("star", "complete length (unknown)"),
    ("huge", "not a byte range courier can read"),
    ("past", "not a byte range courier can read"),
    ("long", "more than the bytes"),
    ("etag", "entity tag"),
])
def test_a_wrong_answer_to_a_range_fails_and_the_next_download_starts_anew(courier, origin, cache_dir, bad, message):
    # Given 2 MiB kept of a resource whose origin answers ranges wrongly
    session = courier()
    name = f"bad-{bad}"
    url = origin.url(f"/ranged/{name}?size={4 * MIB}&cut={2 * MIB}&bad={bad}")
    session.fetch(url, retries=0)

    # When it is asked again (without retries), then again
    second = session.fetch(url, retries=0)
    third = session.fetch(url)

    # Then the wrong 206 failed that download with `network`, saying why
    assert not second["ok"] and second["error"]["code"] == "network", second
    assert message in second["error"]["message"], second
    # And the kept bytes went with it: the next download asked for the whole body and got it exactly
    log = origin.ranged_log(name)
    assert [entry["range"] for entry in log] == [None, f"bytes={2 * MIB}-", None]
    assert third["ok"] and "resumedFrom" not in third, third
    with open(third["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body(name, 4 * MIB)
    assert kept_rows(cache_dir) == [] and partial_files(cache_dir) == []


def test_a_206_to_a_request_without_range_fails(courier, origin):
    session = courier()
    outcome = session.fetch(origin.url(f"/ranged/unasked?size={MIB}&bad=unasked"), retries=0)
    assert not outcome["ok"] and outcome["error"]["code"] == "network", outcome
    assert "206 Partial Content to a request without Range" in outcome["error"]["message"]
    assert "path" not in outcome


def test_a_client_range_is_its_own_and_nothing_is_kept_of_it(courier, origin, cache_dir):
    # A client's own Range gets its 206, and courier neither keeps nor continues it
    session = courier()
    outcome = session.fetch(origin.url(f"/ranged/own?size={MIB}"), headers={"Range": "bytes=10-19"})
    assert outcome["ok"] and outcome["status"] == 206 and outcome["size"] == 10, outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body("own", MIB)[10:20]
    assert kept_rows(cache_dir) == []


@pytest.mark.parametrize("query, if_range", [
    ("validator=etag", '"which-v1"'),
    ("validator=lm", "Mon, 14 Sep 2020 12:26:40 GMT"),
    ("validator=weak", None),
    ("validator=none", None),
    ("gzip=1", None),
])
def test_what_is_kept_needs_a_strong_validator_and_no_content_coding(courier, origin, query, if_range):
    # Given a download cut short, of a response with a strong ETag, only a
    # Last-Modified, a weak ETag, no validator, or a gzip coding (whose
    # compressed body is small: cut after 10,000 of its bytes)
    session = courier()
    cut = 10_000 if query == "gzip=1" else MIB
    url = origin.url(f"/ranged/which?size={4 * MIB}&cut={cut}&{query}")
    session.fetch(url, retries=0)

    # When it is asked again
    outcome = session.fetch(url)

    # Then only a body with a strong validator and no coding was asked the rest of
    log = origin.ranged_log("which")
    assert log[1]["if_range"] == if_range
    assert log[1]["range"] == (f"bytes={cut}-" if if_range else None)
    assert outcome["ok"], outcome


def test_credentials_and_no_store_keep_nothing(courier, origin, cache_dir):
    session = courier()
    url = origin.url(f"/ranged/private?size={4 * MIB}&cut={MIB}")
    first = session.fetch(url, headers={"Authorization": "Bearer x"}, retries=0)
    assert not first["ok"]
    second = session.fetch(url, headers={"Authorization": "Bearer x"})
    assert origin.ranged_log("private")[1]["range"] is None
    assert second["ok"] and kept_rows(cache_dir) == [] and partial_files(cache_dir) == []


def test_a_body_kept_from_another_url_continues_only_with_its_strong_etag(courier, origin):
    # Given bodies kept from one URL under a cacheKey: one with a strong ETag, one with only a Last-Modified
    session = courier()
    for name, validator in (("mirrored", "etag"), ("dated", "lm")):
        fail_once(session, origin, name, 4 * MIB, MIB, f"&validator={validator}", cacheKey=name)

        # When the same cacheKey is asked from another URL
        outcome = session.fetch(origin.url(f"/ranged/{name}?size={4 * MIB}&cut={MIB}&validator={validator}&from=b"),
                                cacheKey=name)

        # Then the strong ETag's body continued there, the dated one started anew
        log = origin.ranged_log(name)
        assert log[1]["range"] == (f"bytes={MIB}-" if validator == "etag" else None), log
        assert outcome["ok"], outcome
        with open(outcome["path"], "rb") as delivered:
            assert delivered.read() == origin.ranged_body(name, 4 * MIB)


# --------------------------------------------------------------------------
# The kept bodies and the database are hostile input


def keep_one(courier, origin, name: str, cache_dir) -> tuple[str, str, int]:
    """Keeps 2 MiB of a 4 MiB /ranged/NAME in a courier that then exits:
    its URL, the kept file's path and length."""
    session = courier()
    url = fail_once(session, origin, name, 4 * MIB, 2 * MIB)
    assert session.close() == 0
    [(file, kept, _)] = kept_rows(cache_dir)
    assert kept == 2 * MIB
    return url, os.path.join(str(cache_dir), "partials", file), kept


@pytest.mark.parametrize("change, asks_from", [
    ("truncated", None),
    ("rewritten", None),
    ("replaced by a symbolic link", None),
    ("grown", 2 * MIB),
])
def test_a_kept_body_changed_on_disk_is_never_trusted(courier, origin, cache_dir, tmp_path, change, asks_from):
    # Given 2 MiB kept by a courier that has exited
    name = "changed-" + change.split()[0]
    url, path, kept = keep_one(courier, origin, name, cache_dir)
    victim = tmp_path / "victim"
    victim.write_bytes(b"v" * kept)

    # When the kept file is changed on disk
    if change == "truncated":
        os.truncate(path, kept - 1000)
    elif change == "rewritten":
        with open(path, "r+b") as file:
            file.seek(kept // 2)
            file.write(b"\x00\x01\x02")
    elif change == "replaced by a symbolic link":
        os.unlink(path)
        os.symlink(victim, path)
    else:
        with open(path, "ab") as file:
            file.write(b"not the origin's bytes" * 1000)

    # Then the next courier asks from the bytes it can prove (a checksum
    # over the kept length): none of a truncated, rewritten or replaced
    # file, the kept length of a grown one, whose extra bytes it drops
    session = courier()
    outcome = session.fetch(url)
    log = origin.ranged_log(name)
    assert log[1]["range"] == (f"bytes={asks_from}-" if asks_from else None), log
    assert outcome["ok"], outcome
    with open(outcome["path"], "rb") as delivered:
        assert delivered.read() == origin.ranged_body(name, 4 * MIB)
    # And nothing outside the cache directory was touched
    assert victim.read_bytes() == b"v" * kept
    if asks_from is None:
        assert "dropped it" in session.stderr_text


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "foreign", "a symbolic link", "a directory"])
def test_a_damaged_or_foreign_database_is_made_anew_and_never_stops_courier(courier, origin, cache_dir, tmp_path, damage):
    # Given a cache directory whose Cache.db is damaged, another program's, or not a file
    database = os.path.join(str(cache_dir), "Cache.db")
    outside = tmp_path / "outside.db"
    if damage in ("corrupt", "truncated"):
        keep_one(courier, origin, f"db-{damage.split()[0]}-before", cache_dir)
        with open(database, "r+b") as file:
            if damage == "corrupt":
                file.seek(0)
                file.write(os.urandom(4096))
            else:
                file.truncate(100)
        for side in ("-wal", "-shm"):
            if os.path.exists(database + side):
                os.unlink(database + side)
    elif damage == "foreign":
        connection = sqlite3.connect(database)
        connection.execute("CREATE TABLE accounts (name TEXT, balance INTEGER)")
        connection.execute("INSERT INTO accounts VALUES ('alice', 10)")
        connection.commit()
        connection.close()
    elif damage == "a symbolic link":
        outside.write_bytes(b"someone else's file")
        os.symlink(outside, database)
    else:
        os.mkdir(database)

    # When courier starts there, and a download is cut short and asked again
    session = courier()
    name = "db-" + damage.split()[-1]
    url = fail_once(session, origin, name, 4 * MIB, MIB)
    outcome = session.fetch(url)

    # Then courier went on with a database of its own, and resumed
    assert outcome["ok"] and outcome["resumedFrom"] == MIB, outcome
    assert os.path.isfile(database) and not os.path.islink(database)
    assert os.stat(database).st_mode & 0o777 == 0o600
    assert "Cache.db" in session.stderr_text
    # And what a link pointed at is untouched
    if damage == "a symbolic link":
        assert outside.read_bytes() == b"someone else's file"
    if damage == "foreign":
        assert "accounts" not in str(sqlite3.connect(f"file:{database}?mode=ro", uri=True).execute(
            "SELECT name FROM sqlite_schema").fetchall())


def test_a_cache_directory_that_is_a_symbolic_link_keeps_partial_bodies(courier, origin, tmp_path):
    real = tmp_path / "real-cache"
    real.mkdir()
    link = tmp_path / "linked-cache"
    os.symlink(real, link)
    session = courier(cache=str(link))
    url = fail_once(session, origin, "linked", 4 * MIB, MIB)
    outcome = session.fetch(url)
    assert outcome["ok"] and outcome["resumedFrom"] == MIB, outcome
    assert os.path.isfile(real / "Cache.db")


# --------------------------------------------------------------------------
# --partial-capacity


def test_the_oldest_kept_bodies_go_first_past_the_partial_capacity(courier, origin, cache_dir):
    # Given a capacity of 3 MiB and two downloads that each keep 2 MiB, one after the other
    session = courier("--partial-capacity", "3MiB")
    older_url = fail_once(session, origin, "older", 4 * MIB, 2 * MIB)
    newer_url = fail_once(session, origin, "newer", 4 * MIB, 2 * MIB)

    # Then only the newer is kept, once the store has recorded it (on its
    # own queue, which the failed outcome does not wait for)
    deadline = time.monotonic() + 10
    while not (len(partial_files(cache_dir)) == 1 and [row[0] for row in kept_rows(cache_dir)] == partial_files(cache_dir)):
        assert time.monotonic() < deadline, (kept_rows(cache_dir), partial_files(cache_dir))
        time.sleep(0.01)
    assert [kept for _, kept, _ in kept_rows(cache_dir)] == [2 * MIB]
    # And asked again, the older starts anew while the newer continues
    older = session.fetch(older_url)
    newer = session.fetch(newer_url)
    assert origin.ranged_log("older")[1]["range"] is None
    assert origin.ranged_log("newer")[1]["range"] == f"bytes={2 * MIB}-"
    assert older["ok"] and newer["ok"] and newer["resumedFrom"] == 2 * MIB


@pytest.mark.parametrize("capacity", ["0", "1MiB"])
def test_a_body_past_the_partial_capacity_is_not_kept(courier, origin, cache_dir, capacity):
    session = courier("--partial-capacity", capacity)
    assert session.initialize()["config"]["partialCapacity"] == {"0": 0, "1MiB": MIB}[capacity]
    url = fail_once(session, origin, "toolarge", 4 * MIB, 2 * MIB)
    outcome = session.fetch(url)
    assert origin.ranged_log("toolarge")[1]["range"] is None
    assert outcome["ok"] and kept_rows(cache_dir) == [] and partial_files(cache_dir) == []
