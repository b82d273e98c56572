"""End-to-end tests of `courier get` on an unreliable network, through
pipes against the real test origin: retries (`--retries`, curl's `--retry`)
and how they are reported, `--integrity` and aria2c's `--checksum` (on the
command line and per URL in an `-i` file), a re-run that continues an
interrupted download from the bytes kept in the cache directory, and a
re-run over a file that is already complete. The terminal's side (a retry
on the bar line) is in test_get_terminal.py."""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import COURIER
from origin import pattern
from test_get import failures, get, summary


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "out"


def sha256_hex(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def sri(body: bytes, algorithm: str = "sha256") -> str:
    return f"{algorithm}-" + base64.b64encode(hashlib.new(algorithm, body).digest()).decode()


# -- retries --------------------------------------------------------------------


def test_transient_failures_are_retried_and_each_retry_is_reported(origin, cache, out):
    url = origin.url("/flaky/get-retry?statuses=503,503,200&size=3000")
    done = get("-d", str(out), "--retry-delay", "0.01", url, cache=cache)
    assert done.returncode == 0, done.stderr
    assert (out / "get-retry").read_bytes() == pattern(3000, "get-retry")
    assert origin.hits("/flaky/get-retry") == 3
    assert done.stdout.startswith(f"{url} -> {out}/get-retry (2.9 KiB, ") and done.stdout.endswith(", 3 attempts)\n")
    notes = failures(done)
    assert [line.split("; ")[1].split(" in ")[0] for line in notes] == ["retry 1/3", "retry 2/3"], notes
    assert all(line.startswith(f"{url}: http_status: the origin answered HTTP 503; ") for line in notes)
    assert summary(done)["counts"] == "1 ok (1 retried)"


def test_retries_zero_fails_at_once(origin, cache, out):
    url = origin.url("/flaky/get-none?statuses=503,200")
    done = get("-d", str(out), "--retries", "0", url, cache=cache)
    assert done.returncode == 1
    assert failures(done) == [f"{url}: http_status: the origin answered HTTP 503"]
    assert origin.hits("/flaky/get-none") == 1 and not out.joinpath("get-none").exists()


def test_curls_retry_is_read_as_retries_and_a_failure_counts_its_attempts(origin, cache, out):
    url = origin.url("/flaky/get-curl?statuses=500")
    done = get("-d", str(out), "--retry", "1", "--retry-delay", "0.01", url, cache=cache)
    assert done.returncode == 1
    assert origin.hits("/flaky/get-curl") == 2
    assert failures(done)[-1] == f"{url}: http_status: the origin answered HTTP 500 (after 2 attempts)"
    bad = get("--retry=1001", url, cache=cache)
    assert bad.returncode == 64 and "--retry must be 0 to 1000" in bad.stderr


def test_a_retry_after_past_the_caps_fails_at_once_and_says_so(origin, cache, out):
    url = origin.url("/flaky/get-after?statuses=429,200&retry-after=3600")
    done = get("-d", str(out), url, "--json", cache=cache)
    assert done.returncode == 1 and origin.hits("/flaky/get-after") == 1
    assert json.loads(done.stdout)["error"]["retryAfter"] == 3600
    assert failures(done) == [f"{url}: http_status: the origin answered HTTP 429; Retry-After asked for 3600 s, "
                              "past --retry-max-delay or --retry-max-time"]


# -- integrity ------------------------------------------------------------------


def test_integrity_and_aria2cs_checksum_accept_the_right_body(origin, cache, out):
    body = pattern(5000)
    url = origin.url("/bytes/5000")
    by_sri = get("-o", str(out / "a"), "--integrity", sri(body, "sha384"), url, cache=cache)
    assert by_sri.returncode == 0, by_sri.stderr
    by_hex = get("-o", str(out / "b"), "--checksum", "sha-256=" + sha256_hex(body).upper(), url, cache=cache)
    assert by_hex.returncode == 0, by_hex.stderr
    assert (out / "a").read_bytes() == body == (out / "b").read_bytes()


def test_a_body_that_does_not_match_is_not_saved_and_both_digests_are_printed(origin, cache, out):
    url = origin.url("/tampered/4000?flip=100")
    right = pattern(4000)
    done = get("-d", str(out), "--retries", "0", "--checksum", "sha-256=" + sha256_hex(right), url, cache=cache)
    assert done.returncode == 1
    wrong = bytearray(right)
    wrong[100] ^= 0xFF
    assert failures(done) == [f"{url}: integrity_mismatch: expected {sri(right)}, got {sri(bytes(wrong))}"]
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--checksum", "md5=0123"], "checksum 'md5=0123' is not TYPE=HEX with TYPE sha-256, sha-384 or sha-512"),
    (["--checksum", "sha-256=abc"], "the sha-256 checksum is not 64 hexadecimal digits"),
    (["--integrity", "sha256-abc"], "the sha256 digest in integrity is not the base64 of 32 bytes"),
    (["--integrity", "md5-abc"], "integrity names no sha256, sha384 or sha512 digest"),
    (["--integrity", sri(b""), "--checksum", "sha-256=" + sha256_hex(b"")], "give --integrity or --checksum"),
])
def test_a_malformed_digest_is_a_usage_error(origin, cache, args, message):
    done = get(*args, origin.url("/bytes/1"), cache=cache)
    assert done.returncode == 64 and message in done.stderr, done.stderr
    assert origin.hits("/bytes/1") == 0


def test_a_digest_on_the_command_line_is_for_one_url(origin, cache):
    done = get("--integrity", sri(b""), origin.url("/bytes/1"), origin.url("/bytes/2"), cache=cache)
    assert done.returncode == 64 and "--integrity and --checksum are for one URL" in done.stderr


def test_an_input_file_gives_each_url_its_own_digest_as_aria2c_reads_them(origin, cache, out, tmp_path):
    good, bad, plain = (origin.url(f"/bytes/{n}") for n in (100, 200, 300))
    listing = tmp_path / "urls.txt"
    listing.write_text(f"{good}\n  checksum=sha-256={sha256_hex(pattern(100))}\n"
                       f"{bad}\n\tintegrity={sri(b'not it')}\n# a comment\n{plain}\n")
    done = get("-d", str(out), "-i", str(listing), "--retries", "0", cache=cache)
    assert done.returncode == 1
    assert [line.split(": ")[:2] for line in failures(done)] == [[bad, "integrity_mismatch"]]
    assert sorted(p.name for p in out.iterdir()) == ["100", "300"]
    broken = tmp_path / "broken.txt"
    broken.write_text(f"  checksum=sha-256={sha256_hex(b'')}\n{good}\n")
    refused = get("-i", str(broken), cache=cache)
    assert refused.returncode == 64 and f"{broken}:1: 'checksum=sha-256=" in refused.stderr
    assert "comes before any URL" in refused.stderr


# -- re-runs ----------------------------------------------------------------------


def test_a_rerun_of_an_interrupted_download_continues_from_the_kept_bytes(origin, cache, out):
    size, held = 3_000_000, 1_000_000
    url = origin.url(f"/ranged/get-resume?size={size}&hold={held}")
    first = subprocess.Popen([COURIER, "get", "--cache-dir", str(cache), "-d", str(out), url],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Once the origin has sent what it sends before it stalls, and
        # courier has begun to keep it
        deadline = time.monotonic() + 20
        while not (origin.ranged_log("get-resume") and origin.ranged_log("get-resume")[0]["sent"] == held
                   and sum(p.stat().st_size for p in (cache / "partials").glob("*.part")) > 0):
            assert time.monotonic() < deadline, "the first part of the body did not arrive"
            time.sleep(0.02)
        # Ctrl-C ends the run
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=20)
    finally:
        first.kill()
    assert first.returncode == 130, stderr
    assert not out.joinpath("get-resume").exists()
    [part] = (cache / "partials").glob("*.part")
    kept = part.stat().st_size
    assert 0 < kept <= held

    # The same command again asks only for the rest, and the file is whole
    again = get("-d", str(out), url, cache=cache)
    assert again.returncode == 0, again.stderr
    log = origin.ranged_log("get-resume")
    assert [(entry["range"], entry["if_range"]) for entry in log] == [
        (None, None), (f"bytes={kept}-", '"get-resume-v1"')]
    assert log[1]["sent"] == size - kept
    assert (out / "get-resume").read_bytes() == origin.ranged_body("get-resume", size)
    shown = f"{kept} B" if kept < 1024 else f"{kept / 1024:.1f} KiB"
    assert again.stdout.endswith(f", resumed at {shown})\n"), again.stdout


def test_a_rerun_over_a_complete_file_fetches_nothing_and_says_already_complete(origin, cache, out):
    url = origin.url("/files/report.pdf?size=5000")
    assert get("-d", str(out), url, cache=cache).returncode == 0
    assert origin.hits("/files/report.pdf") == 1

    for args in ([], ["-c"], ["--continue"]):
        again = get("-d", str(out), *args, url, cache=cache)
        assert again.returncode == 0, again.stderr
        assert again.stdout == f"{url} -> {out}/report.pdf (already complete)\n"
        assert failures(again) == [] and summary(again)["counts"] == "0 ok, 1 already complete"
    assert origin.hits("/files/report.pdf") == 1
    as_json = json.loads(get("-d", str(out), "--json", url, cache=cache).stdout)
    assert as_json["ok"] and as_json["alreadyComplete"] and as_json["path"] == str(out / "report.pdf")

    # A copy with the same bytes is complete too
    copy = (out / "report.pdf").read_bytes()
    (out / "report.pdf").unlink()
    (out / "report.pdf").write_bytes(copy)
    assert get("-d", str(out), url, cache=cache).stdout.endswith("(already complete)\n")


@pytest.mark.parametrize("change", ["edited in place", "replaced", "no cache"])
def test_a_rerun_over_a_file_the_cache_cannot_prove_keeps_it_and_fails_file_exists(origin, cache, out, tmp_path,
                                                                                    change):
    url = origin.url("/files/notes.txt?size=3000")
    assert get("-d", str(out), url, cache=cache).returncode == 0
    target = out / "notes.txt"
    if change == "edited in place":
        with target.open("r+b") as file:
            file.seek(10)
            file.write(b"X")
    elif change == "replaced":
        target.unlink()
        target.write_bytes(pattern(3000, "something else"))
    kept = target.read_bytes()
    again = get("-d", str(out), url, cache=tmp_path / "other-cache" if change == "no cache" else cache)
    assert again.returncode == 1
    assert failures(again) == [
        f"{url}: file_exists: {out}/notes.txt exists (--no-clobber skips it, --overwrite replaces it)"]
    assert target.read_bytes() == kept and origin.hits("/files/notes.txt") == 1


def test_continue_and_overwrite_exclude_each_other(origin, cache):
    done = get("-c", "--overwrite", origin.url("/bytes/1"), cache=cache)
    assert done.returncode == 64 and "--continue and --overwrite exclude each other" in done.stderr
