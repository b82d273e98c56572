"""`integrity`: a body is delivered only when it hashes to what the request
gave (W3C Subresource Integrity, sha256/384/512), against the real origin.

A body that does not match fails `integrity_mismatch` with `expected` and
`actual`, leaves nothing at the destination and nothing in either cache
tier; coalesced receipts are each checked against their own digests; a
stored body is served only when it matches, else the origin is asked."""

from __future__ import annotations

import base64
import gzip
import hashlib
import time

import pytest
import xxhash

import disk_tier
from courier_client import RpcError
from origin import gzip_plain, pattern

LONG = {"Cache-Control": "max-age=3600"}
# Bodies up to 256 KiB are written by the transfers' thread as they arrive;
# larger ones by the body writer's thread: both take the digests.
SMALL = 3001
LARGE = (1 << 20) + 7
# A body that fails its integrity is fetched once more: without a wait worth
# waiting for.
QUICK = ("--retry-delay", "0.001")


def sri(algorithm: str, data: bytes) -> str:
    return f"{algorithm}-{base64.b64encode(hashlib.new(algorithm, data).digest()).decode()}"


def lookup(c, url: str) -> dict:
    return c.request("cache/lookup", {"url": url})


def assert_mismatch(outcome: dict, expected: str, actual: str) -> None:
    assert outcome["ok"] is False, outcome
    error = outcome["error"]
    assert error["code"] == "integrity_mismatch", error
    assert error["expected"] == expected
    assert error["actual"] == actual
    for member in ("path", "text", "base64"):
        assert member not in outcome, outcome


def leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ------------------------------------------------------------------ the network


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["small", "large"])
@pytest.mark.parametrize("algorithm", ["sha256", "sha384", "sha512"])
def test_a_body_that_matches_is_delivered_and_stored(courier, origin, tmp_path, algorithm, size):
    # Given a body and its digest
    url = origin.url(f"/bytes/{size}?seed={algorithm}&cache-control=max-age%3D3600")
    body = pattern(size, algorithm)
    target = tmp_path / "out" / "file.bin"
    c = courier()

    # When it is downloaded with that digest, to a file and as base64
    outcome = c.fetch(url, integrity=sri(algorithm, body), destination=str(target))
    encoded = c.fetch(url, integrity=sri(algorithm, body), body="base64")

    # Then both have it, the second from the cache, and the origin was asked once
    assert outcome["ok"] is True, outcome
    assert outcome["source"] == "network"
    assert target.read_bytes() == body
    assert encoded["ok"] is True and encoded["source"] == "memory", encoded
    assert base64.b64decode(encoded["base64"]) == body
    assert origin.hits(f"/bytes/{size}") == 1


def test_the_digest_is_of_the_decoded_body(courier, origin):
    # Given a body the origin sends gzip-compressed
    url = origin.url("/gzip?size=200000")
    decoded = gzip_plain(200000)
    encoded = gzip.compress(decoded, compresslevel=6, mtime=0)
    c = courier()

    # When it is downloaded with the digest of the decoded bytes, then of the compressed ones
    outcome = c.fetch(url, integrity=sri("sha256", decoded), body="base64")
    compressed = c.fetch(url, integrity=sri("sha256", encoded), cachePolicy="reload")

    # Then the first matches (the body is delivered as decoded) and the second does not
    assert outcome["ok"] is True and outcome["headers"]["content-encoding"] == "gzip", outcome
    assert base64.b64decode(outcome["base64"]) == decoded
    assert_mismatch(compressed, sri("sha256", encoded), sri("sha256", decoded))


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["small", "large"])
@pytest.mark.parametrize("damage", ["flip", "keep"], ids=["corrupted", "truncated"])
def test_a_body_that_does_not_match_fails_and_leaves_nothing(courier, origin, tmp_path, damage, size):
    # Given an origin that sends a complete 200 with one byte inverted, or
    # with its body cut short and no length to tell
    query = f"seed=t&{damage}={size // 2}"
    url = origin.url(f"/tampered/{size}?{query}")
    good = pattern(size, "t")
    sent = bytearray(good)
    if damage == "flip":
        sent[size // 2] ^= 0xFF
    else:
        del sent[size // 2:]
    out = tmp_path / "out"
    out.mkdir()
    c = courier(*QUICK)

    # When it is downloaded with the good body's digest, to a file, as
    # base64, and as a path
    outcomes = [
        c.fetch(url, integrity=sri("sha384", good), destination=str(out / "file.bin")),
        c.fetch(url, integrity=sri("sha384", good), body="base64"),
        c.fetch(url, integrity=sri("sha384", good)),
    ]

    # Then each fails integrity_mismatch, saying what was expected and what
    # came, once the body came wrong a second time
    for outcome in outcomes:
        assert_mismatch(outcome, sri("sha384", good), sri("sha384", bytes(sent)))
        assert outcome["status"] == 200
        assert outcome["size"] == len(sent)
        assert outcome["attempts"] == 2
    # And nothing is at the destination, not even a partial file beside it
    assert leftovers(out) == []
    # And nothing was stored: each attempt went to the origin
    assert origin.hits(f"/tampered/{size}") == 6
    assert lookup(c, url)["cached"] is False


def test_coalesced_receipts_are_each_checked_against_their_own_digests(courier, origin, tmp_path):
    # Given a transfer held after its first bytes
    size = 300_000
    url = origin.url(f"/hold/mixed?size={size}")
    body = pattern(size, "mixed")
    other = pattern(size, "other")
    c = courier(*QUICK)
    right = c.download(url, integrity=sri("sha256", body), destination=str(tmp_path / "right.bin"))
    origin.wait_held("mixed")

    # When receipts join it asking for another algorithm that does not
    # match, for none, and for another that does (none of which the
    # transfer was asked for when it started)
    wrong = c.download(url, integrity=f"{sri('sha256', body)} {sri('sha512', other)}",
                       destination=str(tmp_path / "wrong.bin"))
    plain = c.download(url, body="base64")
    late = c.download(url, integrity=sri("sha384", body), destination=str(tmp_path / "late.bin"))
    assert {r["task"] for r in (right, wrong, plain, late)} == {right["task"]}
    origin.release("mixed")
    outcomes = c.wait_all([r["receipt"] for r in (right, wrong, plain, late)])

    # Then each receipt has its own verdict: the origin was asked once, and
    # once more for the receipt the body failed alone
    assert origin.hits("/hold/mixed") == 2
    assert [n.params["receipts"] for n in c.notifications("download/retrying")] == [[wrong["receipt"]]]
    assert outcomes[wrong["receipt"]]["attempts"] == 2
    assert outcomes[right["receipt"]]["ok"] is True
    assert (tmp_path / "right.bin").read_bytes() == body
    assert_mismatch(outcomes[wrong["receipt"]], sri("sha512", other), sri("sha512", body))
    assert not (tmp_path / "wrong.bin").exists()
    assert base64.b64decode(outcomes[plain["receipt"]]["base64"]) == body
    assert outcomes[late["receipt"]]["ok"] is True
    assert (tmp_path / "late.bin").read_bytes() == body
    # And a body one receipt refused is not stored
    assert lookup(c, url)["cached"] is False
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


# ------------------------------------------------------------------ retries


def retried(session, receipt: str) -> list[dict]:
    return [n.params for n in session.notifications("download/retrying") if receipt in n.params["receipts"]]


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["small", "large"])
def test_a_body_corrupted_in_flight_once_is_fetched_again(courier, origin, tmp_path, size):
    # Given an origin whose first answer has one byte inverted
    key = f"once{size}"
    url = origin.url(f"/corrupt-once/{key}?size={size}")
    good = pattern(size, key)
    bad = bytearray(good)
    bad[size // 2] ^= 0xFF
    out = tmp_path / "out"
    out.mkdir()
    target = out / "file.bin"
    c = courier(*QUICK)

    # When it is downloaded with the good body's digest
    result = c.download(url, integrity=sri("sha256", good), destination=str(target))
    outcome = c.wait(result["receipt"])

    # Then the first body was refused and the second delivered
    assert outcome["ok"] is True, outcome
    assert outcome["attempts"] == 2
    assert target.read_bytes() == good
    notices = retried(c, result["receipt"])
    assert [(n["attempt"], n["error"]["code"]) for n in notices] == [(2, "integrity_mismatch")]
    assert notices[0]["error"]["expected"] == sri("sha256", good)
    assert notices[0]["error"]["actual"] == sri("sha256", bytes(bad))
    assert [e["corrupt"] for e in origin.corrupt_log(key)] == [True, False]
    assert leftovers(out) == ["file.bin"]


def test_a_body_that_fails_twice_fails_at_once_with_the_second_mismatch(courier, origin, tmp_path):
    # Given an origin that corrupts a body on every request
    size = SMALL
    url = origin.url(f"/tampered/{size}?seed=twice&flip=7")
    good = pattern(size, "twice")
    out = tmp_path / "out"
    out.mkdir()
    c = courier(*QUICK)

    # When it is downloaded with retries to spare
    result = c.download(url, integrity=sri("sha512", good), destination=str(out / "f"), retries=5)
    outcome = c.wait(result["receipt"])

    # Then the second mismatch ends it: two requests, one retry
    assert outcome["error"]["code"] == "integrity_mismatch", outcome
    assert outcome["attempts"] == 2
    assert origin.hits(f"/tampered/{size}") == 2
    assert len(retried(c, result["receipt"])) == 1
    assert leftovers(out) == []


def test_only_the_receipts_a_body_fails_are_fetched_again(courier, origin, tmp_path):
    # Given a held transfer, and receipts joining it: one whose digest the
    # first (corrupted) body matches, one expecting the good body, one
    # without integrity
    size = 300_000
    key = "mixedretry"
    url = origin.url(f"/corrupt-once/{key}?size={size}&hold=1")
    good = pattern(size, key)
    bad = bytearray(good)
    bad[size // 2] ^= 0xFF
    c = courier(*QUICK)
    wants_bad = c.download(url, integrity=sri("sha256", bytes(bad)), body="base64")
    origin.wait_held(f"corrupt-once/{key}")
    wants_good = c.download(url, integrity=sri("sha384", good), body="base64")
    plain = c.download(url, body="base64")
    origin.release(f"corrupt-once/{key}")
    outcomes = c.wait_all([r["receipt"] for r in (wants_bad, wants_good, plain)])

    # Then those the first body suits have it after one attempt; the other
    # was fetched again, alone, and has the good body
    assert {r["task"] for r in (wants_bad, wants_good, plain)} == {wants_bad["task"]}
    assert base64.b64decode(outcomes[wants_bad["receipt"]]["base64"]) == bytes(bad)
    assert base64.b64decode(outcomes[plain["receipt"]]["base64"]) == bytes(bad)
    assert outcomes[wants_bad["receipt"]]["attempts"] == 1 and outcomes[plain["receipt"]]["attempts"] == 1
    assert outcomes[wants_good["receipt"]]["ok"] is True, outcomes[wants_good["receipt"]]
    assert base64.b64decode(outcomes[wants_good["receipt"]]["base64"]) == good
    assert outcomes[wants_good["receipt"]]["attempts"] == 2
    assert [n.params["receipts"] for n in c.notifications("download/retrying")] == [[wants_good["receipt"]]]
    assert len(origin.corrupt_log(key)) == 2


def test_a_body_continued_from_corrupt_kept_bytes_starts_anew(courier, origin, tmp_path):
    # Given an origin whose first answer carries a corrupted byte and ends
    # early, and which honours Range
    size = 400_000
    key = "resumed"
    url = origin.url(f"/corrupt-once/{key}?size={size}&flip=1000&cut=100000")
    good = pattern(size, key)
    c = courier(*QUICK)

    # When it is downloaded with the good body's digest
    outcome = c.fetch(url, integrity=sri("sha256", good), body="base64")

    # Then the rest was asked for, the spliced body refused, and the third
    # attempt asked for the whole body, not the rest of the corrupt one
    assert outcome["ok"] is True, outcome
    assert base64.b64decode(outcome["base64"]) == good
    assert outcome["attempts"] == 3 and "resumedFrom" not in outcome
    log = origin.corrupt_log(key)
    assert [(e["range"], e["status"]) for e in log] == [(None, 200), ("bytes=100000-", 206), (None, 200)]
    codes = [n.params["error"]["code"] for n in c.notifications("download/retrying")]
    assert codes == ["network", "integrity_mismatch"]


# ------------------------------------------------------------------ stored bodies


def test_a_stored_body_is_served_only_when_it_matches(courier, origin, cache_dir):
    # Given a stored response, and an origin that has changed it since
    old, new = pattern(5000, "old"), pattern(5000, "new")
    url = origin.set_resource("doc", old, LONG)
    c = courier(*QUICK)
    assert c.fetch(url)["source"] == "network"
    origin.set_resource("doc", new, LONG)

    # When it is asked for with the new body's digest, the stored one does
    # not match: the origin is asked, and its answer is stored
    fetched = c.fetch(url, integrity=sri("sha256", new), body="base64")
    assert fetched["ok"] is True and fetched["source"] == "network", fetched
    assert base64.b64decode(fetched["base64"]) == new
    assert origin.hits("/res/doc") == 2

    # Then a hit that matches is served from memory, and from disk by the
    # next process on the directory, without the origin
    again = c.fetch(url, integrity=sri("sha256", new), body="base64")
    assert again["source"] == "memory" and base64.b64decode(again["base64"]) == new
    c.close()
    d = courier(*QUICK)
    from_disk = d.fetch(url, integrity=sri("sha512", new), body="base64")
    assert from_disk["source"] == "disk" and base64.b64decode(from_disk["base64"]) == new
    assert origin.hits("/res/doc") == 2

    # And one that matches neither what is stored nor what the origin sends
    # asks the origin (twice: once more after the first mismatch) and
    # fails, leaving the stored body in place
    refused = d.fetch(url, integrity=sri("sha256", old))
    assert_mismatch(refused, sri("sha256", old), sri("sha256", new))
    assert origin.hits("/res/doc") == 4
    assert lookup(d, url)["cached"] is True
    assert d.fetch(url, integrity=sri("sha256", old), cachePolicy="cacheOnly")["error"]["code"] == "not_cached"
    assert d.fetch(url, cachePolicy="cacheOnly")["source"] == "memory"


def test_a_recorded_digest_on_disk_is_not_taken_on_its_word(courier, origin, cache_dir):
    # Given a body stored with its digest, which another process then
    # rewrote to other bytes of the same length, fixing the row's checksum
    # but not the digest it records
    body, forged = pattern(4096, "true"), pattern(4096, "forged")
    url = origin.set_resource("signed", body, LONG)
    writer = courier()
    assert writer.fetch(url, integrity=sri("sha256", body))["ok"] is True
    writer.close()
    row = disk_tier.row(cache_dir, url)
    assert disk_tier.decode_head(row["head"])["digests"] == {"sha256": hashlib.sha256(body).digest()}
    assert disk_tier.digests(cache_dir, url)["sha256"] == hashlib.sha256(body).digest()
    checksum = xxhash.xxh3_64_intdigest(forged)
    disk_tier.update(cache_dir, url, body=forged, body_checksum=checksum - (1 << 64) if checksum >= 1 << 63 else checksum)

    # (sound by its checksum: a process that asks without integrity is served it)
    probe = courier()
    served = probe.fetch(url, body="base64")
    assert served["source"] == "disk" and base64.b64decode(served["base64"]) == forged
    probe.close()

    # When a new process is asked for it with the true digest
    c = courier()
    outcome = c.fetch(url, integrity=sri("sha256", body), body="base64")

    # Then the forged body is not served: the origin is asked
    assert outcome["ok"] is True and outcome["source"] == "network", outcome
    assert base64.b64decode(outcome["base64"]) == body
    assert origin.hits("/res/signed") == 2


def test_a_revalidated_body_that_does_not_match_is_fetched_again(courier, origin):
    # Given a stored response that must be revalidated, and an origin that
    # changes the body but not its ETag (so it answers 304 to the old one)
    old, new = pattern(2000, "v1"), pattern(2000, "v2")
    headers = {"Cache-Control": "no-cache", "ETag": '"same"'}
    url = origin.set_resource("etag", old, headers)
    c = courier()
    assert c.fetch(url)["source"] == "network"
    origin.set_resource("etag", new, headers)

    # When it is asked for with the new body's digest
    outcome = c.fetch(url, integrity=sri("sha256", new), body="base64")

    # Then the 304 did not serve the stored body: it was fetched again,
    # without conditions
    assert outcome["ok"] is True and outcome["source"] == "network", outcome
    assert base64.b64decode(outcome["base64"]) == new
    assert origin.hits("/res/etag") == 3
    assert "if-none-match" not in origin.last_headers("/res/etag")


def test_a_stored_body_known_not_to_match_is_not_revalidated(courier, origin):
    # Given a stored response that must be revalidated, stored with its digest
    old, new = pattern(2000, "r1"), pattern(2000, "r2")
    headers = {"Cache-Control": "no-cache", "ETag": '"r1"'}
    url = origin.set_resource("known", old, headers)
    c = courier()
    assert c.fetch(url, integrity=sri("sha512", old))["ok"] is True
    origin.set_resource("known", new, {"Cache-Control": "no-cache", "ETag": '"r2"'})

    # When it is asked for with another digest
    outcome = c.fetch(url, integrity=sri("sha512", new))

    # Then no conditional request was sent for it
    assert outcome["ok"] is True and outcome["source"] == "network", outcome
    assert origin.hits("/res/known") == 2
    assert "if-none-match" not in origin.last_headers("/res/known")


# ------------------------------------------------------------------ content addressing


def only_head(cache_dir) -> bytes:
    """The stored head of the one row."""
    with disk_tier.connect(cache_dir) as db:
        [(head,)] = db.execute("SELECT head FROM responses").fetchall()
    return head


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["small", "large"])
def test_a_stored_body_answers_another_url_by_its_digest(courier, origin, tmp_path, size):
    # Given a body stored from one URL, fetched with its digest
    body = pattern(size, "addressed")
    first = origin.set_resource("first", body, LONG)
    other = origin.set_resource("other", b"never asked", LONG)
    c = courier()
    assert c.fetch(first, integrity=sri("sha256", body))["source"] == "network"

    # When another URL is asked for with that digest, in this process and the next
    out = tmp_path / "out"
    out.mkdir()
    here = c.fetch(other, integrity=sri("sha256", body), destination=str(out / "here.bin"))
    c.close()
    d = courier()
    there = d.fetch(other, integrity=f"sha256-{'A' * 43}= {sri('sha256', body)}", body="base64")

    # Then the stored body answers both, without asking the origin for it
    for outcome, source in ((here, "memory"), (there, "disk")):
        assert outcome["ok"] is True, outcome
        assert outcome["source"] == source
        assert outcome["attempts"] == 0
        assert outcome["url"] == other
        assert outcome["finalUrl"] == first
        assert outcome["size"] == size
    assert (out / "here.bin").read_bytes() == body
    assert base64.b64decode(there["base64"]) == body
    assert origin.hits("/res/other") == 0 and origin.hits("/res/first") == 1
    # And nothing was stored under the URL it answered
    assert lookup(d, other)["cached"] is False


def test_a_stale_stored_body_answers_by_its_digest_without_revalidation(courier, origin):
    body = pattern(2000, "stale")
    first = origin.set_resource("stale", body, {"Cache-Control": "no-cache", "ETag": '"s"'})
    other = origin.set_resource("fresh-name", body, LONG)
    c = courier()
    assert c.fetch(first, integrity=sri("sha384", body))["ok"] is True
    outcome = c.fetch(other, integrity=sri("sha384", body), body="base64")
    assert outcome["source"] == "memory" and base64.b64decode(outcome["base64"]) == body, outcome
    assert origin.hits("/res/stale") == 1 and origin.hits("/res/fresh-name") == 0


def test_content_addressing_follows_the_cache_policy(courier, origin):
    body = pattern(3000, "policy")
    first = origin.set_resource("policy", body, LONG)
    other = origin.set_resource("policy-copy", body, LONG)
    c = courier()
    assert c.fetch(first, integrity=sri("sha256", body))["ok"] is True
    # cacheOnly is answered by a body stored under another URL
    only = c.fetch(other, integrity=sri("sha256", body), cachePolicy="cacheOnly")
    assert only["ok"] is True and only["source"] == "memory", only
    # reload asks the origin, and a digest no stored body has is a miss
    reload = c.fetch(other, integrity=sri("sha256", body), cachePolicy="reload")
    assert reload["source"] == "network"
    missing = c.fetch(other, integrity=sri("sha256", b"other bytes"), cachePolicy="cacheOnly")
    assert missing["error"]["code"] == "not_cached"
    assert origin.hits("/res/policy-copy") == 1


def test_a_body_stored_without_a_digest_is_found_once_a_read_proves_it(courier, origin, cache_dir):
    # Given a body stored by a download without integrity: no digest is taken
    body = pattern(4000, "later")
    first = origin.set_resource("later", body, LONG)
    other = origin.set_resource("later-copy", body, LONG)
    writer = courier()
    assert writer.fetch(first)["ok"] is True
    writer.close()
    assert disk_tier.decode_head(only_head(cache_dir))["digests"] == {}
    probe = courier()
    assert probe.fetch(other, integrity=sri("sha512", body), cachePolicy="cacheOnly")["error"]["code"] == "not_cached"
    probe.close()

    # When a process serves it from disk for its own URL with a digest
    c = courier()
    assert c.fetch(first, integrity=sri("sha512", body))["source"] == "disk"

    # Then the digest the read proved is recorded with the entry, and the
    # next process finds the body by it for another URL
    deadline = time.monotonic() + 10
    while "sha512" not in disk_tier.decode_head(only_head(cache_dir))["digests"]:
        assert time.monotonic() < deadline, "the digest was not recorded"
        time.sleep(0.01)
    c.close()
    d = courier()
    found = d.fetch(other, integrity=sri("sha512", body), body="base64")
    assert found["source"] == "disk" and base64.b64decode(found["base64"]) == body, found
    assert origin.hits("/res/later-copy") == 0


def test_a_stored_body_is_not_served_by_its_recorded_digest_alone(courier, origin, cache_dir):
    # Given a body stored with its digest, which another process then
    # rewrote to other bytes of the same length, fixing the row's checksum
    # but not the digest it records
    body, forged = pattern(4096, "genuine"), pattern(4096, "forgery")
    first = origin.set_resource("genuine", body, LONG)
    other = origin.set_resource("genuine-copy", body, LONG)
    writer = courier()
    assert writer.fetch(first, integrity=sri("sha256", body))["ok"] is True
    writer.close()
    checksum = xxhash.xxh3_64_intdigest(forged)
    disk_tier.update(cache_dir, first, body=forged, body_checksum=checksum - (1 << 64) if checksum >= 1 << 63 else checksum)

    # When another URL is asked for with the true digest
    c = courier()
    outcome = c.fetch(other, integrity=sri("sha256", body), body="base64")

    # Then the forged body is not served: the origin is asked
    assert outcome["ok"] is True and outcome["source"] == "network", outcome
    assert base64.b64decode(outcome["base64"]) == body
    assert origin.hits("/res/genuine-copy") == 1


# ------------------------------------------------------------------ bad input

GOOD = sri("sha256", b"x")


@pytest.mark.parametrize("integrity", [
    "", "   ", "md5-AAAA", "sha1-" + base64.b64encode(hashlib.sha1(b"x").digest()).decode(),
    "sha256", "sha256-", "sha256-!!!!", GOOD[:-1], GOOD + "=", GOOD.replace("sha256", "sha512"),
    "sha256-_" + GOOD[8:], "sha256--" + GOOD[8:],
    f"{sri('sha512', b'x')} sha384-AAAA", GOOD + "\u00e9", GOOD + "\u0000",
])
def test_a_malformed_integrity_is_invalid_params(courier, origin, integrity):
    c = courier()
    with pytest.raises(RpcError) as error:
        c.download(origin.url("/bytes/10"), integrity=integrity)
    assert error.value.code == -32602
    assert error.value.data == {"param": "integrity"}
    with pytest.raises(RpcError):
        c.download(origin.url("/bytes/10"), integrity=7)
    # And the server keeps serving, with a request made of the same parts
    outcome = c.fetch(origin.url("/bytes/10"), integrity=f"md5-x sha1 {sri('sha256', pattern(10))}?opt\t")
    assert outcome["ok"] is True, outcome
    assert origin.hits("/bytes/10") == 1
