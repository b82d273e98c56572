"""The two-tier cache end to end (issue 4): the memory tier's
AFAutoPurgingImageCache rules, RFC 9111 on the disk tier, the four
`cachePolicy` values and `cacheKey` on both tiers, the bounded disk tier, the
`cache/*` methods and the hit, miss and revalidation counters, all against a
real origin whose hit counters say when the network was used."""

from __future__ import annotations

import base64
import datetime
import hashlib
import os

import pytest

import disk_tier
from disk_tier import body_file, entry_cost
from origin import gzip_plain, http_date, pattern

KIB = 1024
SMALL_MEMORY = ("--memory-capacity", "64KiB", "--memory-after-purge", "40KiB")
NO_MEMORY = ("--memory-capacity", "0", "--memory-after-purge", "0")
LONG = {"Cache-Control": "max-age=3600"}


# ------------------------------------------------------------------ helpers


def fetch(c, url: str, **params) -> dict:
    """The outcome of a `download` with `wait: true`, its body decoded into
    ``outcome["bytes"]`` (base64 unless a destination or another body is asked)."""
    params.setdefault("body", "base64")
    result = c.download(url, wait=True, **params)
    outcome = result["outcome"]
    outcome["result"] = result
    if outcome.get("base64") is not None:
        outcome["bytes"] = base64.b64decode(outcome["base64"])
    return outcome


def counters(c) -> tuple[int, int, int]:
    stats = c.cache_stats()
    return stats["hits"], stats["misses"], stats["revalidations"]


def seconds_until(iso: str) -> float:
    when = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return when.timestamp() - datetime.datetime.now(datetime.timezone.utc).timestamp()


def resource(origin, name: str, size: int, headers: dict | None = None) -> tuple[str, bytes]:
    body = pattern(size, name)
    return origin.set_resource(name, body, dict(LONG if headers is None else headers)), body


# ------------------------------------------------------------------ memory tier


def test_memory_purges_to_after_purge_in_lru_order(courier, origin):
    c = courier(*SMALL_MEMORY)
    names = [f"m{i:02}" for i in range(10)]
    urls, bodies, costs = {}, {}, {}
    for name in names[:9]:
        urls[name], bodies[name] = resource(origin, name, 6 * KIB)
        before = c.cache_stats()["memory"]["usage"]
        outcome = fetch(c, urls[name])
        assert outcome["ok"] and outcome["source"] == "network" and outcome["bytes"] == bodies[name]
        memory = c.cache_stats()["memory"]
        costs[name] = memory["usage"] - before
        assert costs[name] > 6 * KIB, "an entry costs its body plus an overhead"
    memory = c.cache_stats()["memory"]
    # Nine entries fit: no purge yet, although usage is above the after-purge figure.
    assert memory["entries"] == 9
    assert 40 * KIB < memory["usage"] <= 64 * KIB
    assert memory["usage"] == sum(costs.values())

    # Reading m00 makes it the most recently used.
    again = fetch(c, urls["m00"])
    assert again["source"] == "memory" and again["bytes"] == bodies["m00"]

    urls["m09"], bodies["m09"] = resource(origin, "m09", 6 * KIB)
    assert fetch(c, urls["m09"])["source"] == "network"
    memory = c.cache_stats()["memory"]
    assert memory["usage"] <= 40 * KIB

    # Expected survivors: least recently used go first until usage <= afterPurge.
    costs["m09"] = costs["m08"]
    order = names[1:9] + ["m00", "m09"]  # least to most recently used
    usage = sum(costs[n] for n in order)
    survivors = list(order)
    while usage > 40 * KIB:
        usage -= costs[survivors.pop(0)]
    assert memory["entries"] == len(survivors)
    assert "m00" in survivors and "m01" not in survivors
    for name in names:
        lookup = c.cache_lookup(urls[name])
        assert lookup["cached"] is True, name  # the disk tier still has every one
        assert lookup["tier"] == ("memory" if name in survivors else "disk"), name
    assert origin.hits("/res/m00") == 1


def test_memory_replacing_an_entry_adjusts_usage(courier, origin):
    c = courier(*SMALL_MEMORY)
    url, _ = resource(origin, "rep", 6000)
    assert fetch(c, url)["source"] == "network"
    first = c.cache_stats()["memory"]
    assert first["entries"] == 1

    url, smaller = resource(origin, "rep", 5000)
    outcome = fetch(c, url, cachePolicy="reload")
    assert outcome["source"] == "network" and outcome["bytes"] == smaller
    second = c.cache_stats()["memory"]
    assert second["entries"] == 1
    assert second["usage"] == first["usage"] - 1000
    lookup = c.cache_lookup(url)
    assert lookup["tier"] == "memory" and lookup["size"] == 5000
    served = fetch(c, url)
    assert served["source"] == "memory" and served["bytes"] == smaller
    assert origin.hits("/res/rep") == 2


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_past_the_engines_own_writes_is_stored_whole(courier, origin, tmp_path, chunked):
    # 700,000 bytes: courier's transfer loop writes bodies up to 256 KiB
    # itself and hands larger ones to its body writer, at the first byte
    # when the length is announced, past 256 KiB (the checksum carried on
    # from the loop's) when it is not.
    size = 700_000
    url = origin.url(f"/bytes/{size}?seed=big&cache-control=max-age%3D3600" + ("&chunked=1" if chunked else ""))
    c = courier(*NO_MEMORY)
    first = c.fetch(url, destination=str(tmp_path / "first.bin"))
    assert first["ok"] and first["source"] == "network" and first["size"] == size
    assert (tmp_path / "first.bin").read_bytes() == pattern(size, "big")
    # The disk tier checks a body against its stored checksum when it reads it.
    again = c.fetch(url, destination=str(tmp_path / "again.bin"))
    assert again["ok"] and again["source"] == "disk"
    assert (tmp_path / "again.bin").read_bytes() == pattern(size, "big")
    assert origin.hits(f"/bytes/{size}") == 1


def test_memory_cost_is_body_plus_overhead_and_large_bodies_stay_on_disk(courier, origin):
    c = courier(*SMALL_MEMORY)
    sizes = {"c1": 1000, "c2": 3000, "c3": 8 * KIB}  # 8 KiB = 1/8 of 64 KiB: still kept
    urls = {}
    for name, size in sizes.items():
        urls[name], _ = resource(origin, name, size)
        assert fetch(c, urls[name])["source"] == "network"
    memory = c.cache_stats()["memory"]
    assert memory["entries"] == 3
    # The documented overhead is 512 bytes an entry, plus key, URL and headers.
    assert memory["usage"] >= sum(sizes.values()) + 3 * 512
    assert memory["usage"] < sum(sizes.values()) + 3 * 2048

    big_url, big = resource(origin, "c4", 8 * KIB + 1)
    assert fetch(c, big_url)["source"] == "network"
    assert c.cache_stats()["memory"]["entries"] == 3
    assert c.cache_lookup(big_url)["tier"] == "disk"
    served = fetch(c, big_url)
    assert served["source"] == "disk" and served["bytes"] == big
    assert c.cache_lookup(big_url)["tier"] == "disk", "a body over 1/8 of the memory capacity stays on disk"
    assert origin.hits("/res/c4") == 1


# ------------------------------------------------------------------ RFC 9111


def test_no_store_is_never_stored(courier, origin, cache_dir):
    c = courier()
    url = origin.url("/cache?no-store=1&max-age=3600&etag=ns")
    for _ in range(2):
        outcome = fetch(c, url)
        assert outcome["ok"] and outcome["source"] == "network"
    assert origin.hits("/cache") == 2
    assert c.cache_lookup(url)["cached"] is False
    stats = c.cache_stats()
    assert stats["memory"]["entries"] == 0 and stats["disk"]["entries"] == 0
    assert disk_tier.row(cache_dir, url) is None


def test_max_age_fresh_is_served_from_memory_without_the_origin(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=3600")
    first = fetch(c, url)
    assert first["source"] == "network"
    second = fetch(c, url)
    assert second["source"] == "memory" and second["bytes"] == first["bytes"]
    assert second["result"]["state"] == "finished" and second["result"]["source"] == "memory"
    plain = c.download(url)
    assert plain["state"] == "finished" and plain["source"] == "memory"
    assert c.wait(plain["receipt"])["source"] == "memory"
    assert origin.hits("/cache") == 1
    lookup = c.cache_lookup(url)
    assert lookup["fresh"] is True and 3500 < seconds_until(lookup["expires"]) <= 3601


def test_expires_in_the_future_is_fresh_and_in_the_past_stale(courier, origin):
    c = courier()
    future = origin.url("/cache?expires=3600")
    past = origin.url("/cache?expires=-60")
    for url in (future, past):
        assert fetch(c, url)["source"] == "network"
    assert c.cache_lookup(future)["fresh"] is True
    assert 3500 < seconds_until(c.cache_lookup(future)["expires"]) <= 3601
    assert fetch(c, future)["source"] == "memory"
    assert origin.hits("/cache?expires=3600") == 1

    lookup = c.cache_lookup(past)
    assert lookup["cached"] is True and lookup["fresh"] is False
    assert fetch(c, past)["source"] == "network"
    assert origin.hits("/cache?expires=-60") == 2


def test_age_beyond_max_age_is_stale(courier, origin):
    c = courier()
    old = origin.url("/cache?max-age=60&age=120")
    young = origin.url("/cache?max-age=600&age=300")
    for url in (old, young):
        assert fetch(c, url)["source"] == "network"
    assert c.cache_lookup(old)["fresh"] is False
    assert fetch(c, old)["source"] == "network"
    assert origin.hits("/cache?max-age=60&age=120") == 2

    lookup = c.cache_lookup(young)
    assert lookup["fresh"] is True
    assert 240 < seconds_until(lookup["expires"]) <= 301, "Age counts against max-age"
    assert fetch(c, young)["source"] == "memory"
    assert origin.hits("/cache?max-age=600&age=300") == 1


def test_heuristic_freshness_from_last_modified(courier, origin):
    c = courier()
    ten_days = origin.url("/cache?last-modified=-864000")
    ten_hours = origin.url("/cache?last-modified=-36000")
    for url in (ten_days, ten_hours):
        assert fetch(c, url)["source"] == "network"
    # 10 % of the time since Last-Modified: 10 days -> 1 day, 10 hours -> 1 hour.
    for url, lifetime in ((ten_days, 86400), (ten_hours, 3600)):
        lookup = c.cache_lookup(url)
        assert lookup["fresh"] is True, url
        assert lifetime - 120 < seconds_until(lookup["expires"]) <= lifetime + 1, (url, lookup)
        assert lookup["lastModified"] is not None
        assert fetch(c, url)["source"] == "memory"
    assert origin.hits("/cache") == 2


def test_no_cache_always_revalidates(courier, origin):
    c = courier()
    url = origin.url("/cache?no-cache=1&max-age=3600&etag=nc1")
    first = fetch(c, url)
    assert first["source"] == "network"
    for round_ in (2, 3):
        outcome = fetch(c, url)
        assert outcome["ok"] and outcome["source"] == "revalidated", outcome
        assert outcome["bytes"] == first["bytes"] and outcome["status"] == 200
        assert origin.hits("/cache") == round_
        assert origin.last_headers("/cache").get("if-none-match") == '"nc1"'
    assert counters(c) == (0, 1, 2)


def test_etag_revalidation_refreshes_stored_headers(courier, origin):
    c = courier()
    body = pattern(3000, "etag")
    url = origin.set_resource("et", body, {"ETag": '"v1"', "Cache-Control": "max-age=0",
                                           "X-Generation": "1"})
    first = fetch(c, url)
    assert first["source"] == "network" and first["headers"]["x-generation"] == "1"
    assert c.cache_lookup(url)["fresh"] is False

    origin.set_resource("et", body, {"ETag": '"v1"', "Cache-Control": "max-age=3600",
                                     "X-Generation": "2"})
    second = fetch(c, url)
    assert second["source"] == "revalidated" and second["bytes"] == body
    assert origin.last_headers("/res/et").get("if-none-match") == '"v1"'
    assert second["headers"]["x-generation"] == "2"
    assert second["headers"]["cache-control"] == "max-age=3600"
    assert second["headers"]["content-length"] == "3000"

    lookup = c.cache_lookup(url)
    assert lookup["fresh"] is True and lookup["etag"] == '"v1"'
    third = fetch(c, url)
    assert third["source"] == "memory" and third["headers"]["x-generation"] == "2"
    c.cache_clear(memory=True, disk=False)
    from_disk = fetch(c, url)
    assert from_disk["source"] == "disk" and from_disk["headers"]["x-generation"] == "2"
    assert from_disk["bytes"] == body
    assert origin.hits("/res/et") == 2


def test_etag_with_raw_bytes_is_sent_back_byte_for_byte(courier, origin):
    """An ETag is opaque (RFC 9110 §8.8.3): bytes that are not UTF-8 (obs-text,
    here 0xE9 and 0xFF) go back in If-None-Match as they came, as curl sends
    them, and the origin's 304 revalidates the stored body."""
    c = courier()
    body = pattern(2000, "raw-etag")
    # The origin's header strings are latin-1: one character per byte.
    tag = '"caf\xe9-\xff"'
    url = origin.set_resource("raw-etag", body, {"ETag": tag, "Cache-Control": "max-age=0"})
    assert fetch(c, url)["source"] == "network"
    outcome = fetch(c, url)
    sent = origin.last_headers("/res/raw-etag").get("if-none-match")
    assert sent is not None and sent.encode("latin-1") == b'"caf\xe9-\xff"', sent
    assert outcome["source"] == "revalidated" and outcome["bytes"] == body
    assert origin.hits("/res/raw-etag") == 2


def test_etag_with_raw_bytes_is_sent_back_byte_for_byte_from_the_disk_tier_after_a_restart(courier, origin):
    """The disk tier keeps a validator that is not UTF-8 as its bytes (JSON
    strings cannot hold them): the next courier on the same cache directory
    sends them back as they came, while the outcome shows them as text."""
    body = pattern(2000, "raw-etag-disk")
    tag = '"caf\xe9-\xff"'
    url = origin.set_resource("raw-etag-disk", body, {"ETag": tag, "Cache-Control": "max-age=0"})
    first = courier()
    assert fetch(first, url)["source"] == "network"
    assert first.close() == 0
    second = courier()
    outcome = fetch(second, url)
    sent = origin.last_headers("/res/raw-etag-disk").get("if-none-match")
    assert sent is not None and sent.encode("latin-1") == b'"caf\xe9-\xff"', sent
    assert outcome["source"] == "revalidated" and outcome["bytes"] == body
    assert outcome["headers"]["etag"] == '"caf\ufffd-\ufffd"'
    assert origin.hits("/res/raw-etag-disk") == 2


def test_last_modified_revalidation_sends_if_modified_since(courier, origin):
    c = courier()
    body = pattern(2000, "lm")
    modified = http_date(1_700_000_000)
    url = origin.set_resource("lm", body, {"Last-Modified": modified, "Cache-Control": "max-age=0"})
    assert fetch(c, url)["source"] == "network"
    outcome = fetch(c, url)
    assert outcome["source"] == "revalidated" and outcome["bytes"] == body
    sent = origin.last_headers("/res/lm")
    assert sent.get("if-modified-since") == modified
    assert "if-none-match" not in sent
    assert origin.hits("/res/lm") == 2
    assert counters(c) == (0, 1, 1)


def test_vary_is_respected(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=3600&vary=Accept-Language")
    en, fr = {"Accept-Language": "en"}, {"Accept-Language": "fr"}
    assert fetch(c, url, headers=en)["source"] == "network"
    assert fetch(c, url, headers=en)["source"] == "memory"
    assert fetch(c, url, headers=fr)["source"] == "network"
    assert origin.last_headers("/cache").get("accept-language") == "fr"
    assert fetch(c, url, headers=fr)["source"] == "memory"
    assert fetch(c, url)["source"] == "network", "a request without the header does not match"
    assert origin.hits("/cache") == 3
    # Formatting around list items does not defeat Vary.
    listed = origin.url("/cache?max-age=3600&vary=Accept-Language&x=1")
    assert fetch(c, listed, headers={"Accept-Language": "en, fr"})["source"] == "network"
    assert fetch(c, listed, headers={"Accept-Language": "en,fr"})["source"] == "memory"
    # The disk tier applies Vary too.
    c.cache_clear(memory=True, disk=False)
    assert fetch(c, listed, headers={"Accept-Language": "de"})["source"] == "network"
    c.cache_clear(memory=True, disk=False)
    assert fetch(c, listed, headers={"Accept-Language": "de"})["source"] == "disk"
    assert fetch(c, listed, headers={"Accept-Language": "it"})["source"] == "network"


def test_changed_resource_after_staleness_is_fetched_and_stored(courier, origin):
    c = courier()
    old, new = pattern(4000, "old"), pattern(5000, "new")
    url = origin.set_resource("chg", old, {"ETag": '"v1"', "Cache-Control": "max-age=0"})
    assert fetch(c, url)["bytes"] == old
    origin.set_resource("chg", new, {"ETag": '"v2"', "Cache-Control": "max-age=0"})
    outcome = fetch(c, url)
    assert origin.last_headers("/res/chg").get("if-none-match") == '"v1"'
    assert outcome["status"] == 200 and outcome["source"] == "network"
    assert outcome["bytes"] == new and outcome["size"] == 5000
    lookup = c.cache_lookup(url)
    assert lookup["etag"] == '"v2"' and lookup["size"] == 5000
    only = fetch(c, url, cachePolicy="cacheOnly")
    assert only["source"] == "memory" and only["bytes"] == new
    c.cache_clear(memory=True, disk=False)
    only = fetch(c, url, cachePolicy="cacheOnly")
    assert only["source"] == "disk" and only["bytes"] == new
    assert origin.hits("/res/chg") == 2
    assert counters(c) == (2, 1, 1)


# ------------------------------------------------------------------ cache policies on both tiers


TIERS = ("memory", "disk", "new-process")


def on_tier(courier, c, tier: str, url: str, **key):
    """Leaves the stored response of ``url`` in ``tier`` only; returns the session to use."""
    if tier == "memory":
        assert c.cache_lookup(url, **key)["tier"] == "memory"
        return c
    if tier == "disk":
        assert c.cache_clear(memory=True, disk=False)["memory"] >= 1
        assert c.cache_lookup(url, **key)["tier"] == "disk"
        return c
    assert c.close() == 0
    fresh = courier()
    assert fresh.cache_lookup(url, **key)["tier"] == "disk"
    return fresh


def served_from(tier: str) -> str:
    return "memory" if tier == "memory" else "disk"


@pytest.mark.parametrize("tier", TIERS)
def test_policy_default_serves_fresh_and_revalidates_stale(courier, origin, tier):
    c = courier()
    fresh_url, body = resource(origin, "fresh", 3000)
    stale_url, stale_body = resource(origin, "stale", 3000, {"Cache-Control": "max-age=0", "ETag": '"s"'})
    for url in (fresh_url, stale_url):
        assert fetch(c, url, cachePolicy="default")["source"] == "network"
    c = on_tier(courier, c, tier, fresh_url)
    outcome = fetch(c, fresh_url, cachePolicy="default")
    assert outcome["source"] == served_from(tier) and outcome["bytes"] == body
    outcome = fetch(c, stale_url, cachePolicy="default")
    assert outcome["source"] == "revalidated" and outcome["bytes"] == stale_body
    assert origin.hits("/res/fresh") == 1 and origin.hits("/res/stale") == 2
    assert counters(c) == ((1, 0, 1) if tier == "new-process" else (1, 2, 1))


@pytest.mark.parametrize("tier", TIERS)
def test_policy_reload_fetches_even_when_fresh_then_stores(courier, origin, tier):
    c = courier()
    url, body = resource(origin, "rl", 3000)
    assert fetch(c, url)["source"] == "network"
    c = on_tier(courier, c, tier, url)
    newer = pattern(3500, "rl2")
    origin.set_resource("rl", newer, LONG)
    outcome = fetch(c, url, cachePolicy="reload")
    assert outcome["source"] == "network" and outcome["bytes"] == newer
    assert origin.hits("/res/rl") == 2
    assert c.cache_lookup(url)["size"] == 3500
    stored = fetch(c, url)
    assert stored["source"] == "memory" and stored["bytes"] == newer
    c.cache_clear(memory=True, disk=False)
    stored = fetch(c, url)
    assert stored["source"] == "disk" and stored["bytes"] == newer
    assert origin.hits("/res/rl") == 2


@pytest.mark.parametrize("tier", TIERS)
def test_policy_cache_else_load_serves_stale_without_the_origin(courier, origin, tier):
    c = courier()
    url, body = resource(origin, "cel", 3000, {"Cache-Control": "max-age=0", "ETag": '"c"'})
    assert fetch(c, url)["source"] == "network"
    c = on_tier(courier, c, tier, url)
    assert c.cache_lookup(url)["fresh"] is False
    outcome = fetch(c, url, cachePolicy="cacheElseLoad")
    assert outcome["source"] == served_from(tier) and outcome["bytes"] == body
    assert origin.hits("/res/cel") == 1
    missing, missing_body = resource(origin, "cel-miss", 2000)
    outcome = fetch(c, missing, cachePolicy="cacheElseLoad")
    assert outcome["source"] == "network" and outcome["bytes"] == missing_body
    assert origin.hits("/res/cel-miss") == 1
    assert fetch(c, missing, cachePolicy="cacheElseLoad")["source"] == "memory"


@pytest.mark.parametrize("tier", TIERS)
def test_policy_cache_only_serves_any_stored_else_not_cached(courier, origin, tier):
    c = courier()
    url, body = resource(origin, "co", 3000, {"Cache-Control": "max-age=0"})
    assert fetch(c, url)["source"] == "network"
    c = on_tier(courier, c, tier, url)
    before = counters(c)
    outcome = fetch(c, url, cachePolicy="cacheOnly")
    assert outcome["ok"] and outcome["source"] == served_from(tier) and outcome["bytes"] == body
    assert origin.hits("/res/co") == 1

    missing, _ = resource(origin, "co-miss", 2000)
    result = c.download(missing, cachePolicy="cacheOnly")
    assert result["state"] == "finished"
    outcome = c.wait(result["receipt"])
    assert outcome["ok"] is False and outcome["error"]["code"] == "not_cached"
    assert origin.hits("/res/co-miss") == 0
    assert counters(c) == (before[0] + 1, before[1], before[2])


@pytest.mark.parametrize("tier", TIERS)
def test_cache_key_shares_one_entry_between_urls(courier, origin, tier):
    c = courier()
    signed = [origin.url(f"/cache?max-age=3600&body=avatar&sig={n}") for n in (1, 2, 3)]
    first = fetch(c, signed[0], cacheKey="avatar-42")
    assert first["source"] == "network" and first["bytes"] == b"avatar"
    c = on_tier(courier, c, tier, signed[0], cacheKey="avatar-42")
    shared = fetch(c, signed[1], cacheKey="avatar-42")
    assert shared["source"] == served_from(tier) and shared["bytes"] == b"avatar"
    assert origin.hits("/cache?max-age=3600&body=avatar&sig=2") == 0
    assert c.cache_lookup(signed[2], cacheKey="avatar-42")["cached"] is True
    assert c.cache_lookup(signed[1])["cached"] is False, "the URL itself is not a key"
    assert fetch(c, signed[2])["source"] == "network", "without the cacheKey the URL is the key"
    assert c.cache_remove(signed[0], cacheKey="avatar-42") == {"removed": True}
    assert fetch(c, signed[1], cacheKey="avatar-42")["source"] == "network"
    assert origin.hits("/cache") == 3


def test_hits_of_one_entry_each_report_their_own_url_and_path(courier, origin, tmp_path):
    # Hits of one stored response whose outcomes differ in url, path or
    # body, one after another: each download/finished carries its own.
    c = courier()
    signed = [origin.url(f"/cache?max-age=3600&body=avatar&sig={n}") for n in (1, 2)]
    assert fetch(c, signed[0], cacheKey="avatar-43")["source"] == "network"
    # Two names that differ only in how their é is written: two files.
    composed, decomposed = (str(tmp_path / name) for name in ("caf\u00e9.bin", "cafe\u0301.bin"))
    asked = [
        (signed[0], {"body": "none"}),
        (signed[0], {"body": "none"}),
        (signed[1], {"body": "none"}),
        (signed[0], {"body": "none", "destination": composed}),
        (signed[0], {"body": "none", "destination": decomposed}),
        (signed[0], {"body": "text"}),
        (signed[0], {"body": "none"}),
        (signed[1], {"body": "base64"}),
        (signed[1], {"body": "base64"}),
    ]
    outcomes = []
    for url, params in asked:
        receipt = c.download(url, cacheKey="avatar-43", **params)["receipt"]
        outcomes.append(c.wait(receipt))
    for (url, params), outcome in zip(asked, outcomes):
        assert outcome["ok"] and outcome["source"] == "memory", outcome
        assert outcome["url"] == url and outcome["finalUrl"] in signed
        assert outcome["size"] == 6 and outcome["status"] == 200
        if "destination" in params:
            assert outcome["path"] == params["destination"]
            assert open(params["destination"], "rb").read() == b"avatar"
        elif params["body"] == "none":
            assert open(outcome["path"], "rb").read() == b"avatar"
        else:
            assert "path" not in outcome
        assert outcome.get("text") == ("avatar" if params["body"] == "text" else None)
        assert outcome.get("base64") == ("YXZhdGFy" if params["body"] == "base64" else None)
    none = [o for (_, p), o in zip(asked, outcomes) if p == {"body": "none"}]
    assert len({o["path"] for o in none}) == 1, "hits asking for no body share one path file"
    # A hit waited for carries its outcome in the answer too: the same one.
    for url in (signed[1], signed[0]):
        waited = fetch(c, url, cacheKey="avatar-43", body="none")
        assert waited["source"] == "memory" and waited["url"] == url and waited["finalUrl"] == signed[0]
        assert {k: v for k, v in waited.items() if k not in ("result", "durationMs")} == {
            k: v for k, v in none[0].items() if k not in ("url", "durationMs")} | {"url": url}
    assert origin.hits("/cache") == 1


# ------------------------------------------------------------------ bounded disk


def test_disk_capacity_evicts_least_recently_used(courier, origin, cache_dir):
    c = courier("--disk-capacity", "64KiB", *NO_MEMORY)
    names = [f"d{i:02}" for i in range(12)]
    urls, bodies, sizes = {}, {}, {}
    for name in names[:9]:
        urls[name], bodies[name] = resource(origin, name, 6 * KIB)
        assert fetch(c, urls[name])["source"] == "network"
        sizes[name] = entry_cost(cache_dir, urls[name])
    disk = c.cache_stats()["disk"]
    assert disk["entries"] == 9 and disk["usage"] == sum(sizes.values()) <= 64 * KIB
    assert disk["capacity"] == 64 * KIB

    served = fetch(c, urls["d00"])  # now the most recently used
    assert served["source"] == "disk" and served["bytes"] == bodies["d00"]

    order = names[1:9] + ["d00"]
    for name in names[9:]:
        urls[name], bodies[name] = resource(origin, name, 6 * KIB)
        assert fetch(c, urls[name])["source"] == "network"
        sizes[name] = entry_cost(cache_dir, urls[name])
        order.append(name)
        on_disk, _ = disk_tier.usage(cache_dir)
        assert on_disk <= 64 * KIB
        assert c.cache_stats()["disk"]["usage"] == on_disk

    # Simulate: a write that takes usage past the capacity deletes the
    # least recently used until usage is at most 80 % of it.
    survivors: list[str] = []
    for name in order:
        survivors.append(name)
        if sum(sizes[n] for n in survivors) > 64 * KIB:
            while sum(sizes[n] for n in survivors) > 0.8 * 64 * KIB:
                survivors.pop(0)
    assert "d00" in survivors and "d01" not in survivors
    for name in names:
        assert c.cache_lookup(urls[name])["cached"] is (name in survivors), name
    assert c.cache_stats()["disk"]["entries"] == len(survivors)
    for name in survivors:
        outcome = fetch(c, urls[name], cachePolicy="cacheOnly")
        assert outcome["source"] == "disk" and outcome["bytes"] == bodies[name]


def test_a_courier_without_a_disk_tier_leaves_what_another_stored(courier, origin, cache_dir):
    # --disk-capacity 0: nothing is stored on disk, and the entries another
    # courier on the same cache directory stored are neither read (a hit,
    # cache/lookup) nor removed, not even when the response fetched again
    # may not be stored.
    url, body = resource(origin, "kept-by-another", 20 * KIB)
    storing = courier(*NO_MEMORY)
    assert fetch(storing, url)["source"] == "network"
    assert storing.cache_lookup(url)["tier"] == "disk"

    without = courier("--disk-capacity", "0", *NO_MEMORY)
    assert without.cache_lookup(url)["cached"] is False
    again = fetch(without, url)
    assert again["source"] == "network" and again["bytes"] == body
    origin.set_resource("kept-by-another", b"changed", {"Cache-Control": "no-store"})
    changed = fetch(without, url)
    assert changed["source"] == "network" and changed["bytes"] == b"changed"
    assert origin.hits("/res/kept-by-another") == 3

    served = fetch(storing, url)
    assert served["source"] == "disk" and served["bytes"] == body
    assert origin.hits("/res/kept-by-another") == 3


def test_body_over_an_eighth_of_disk_capacity_is_not_stored_but_lands(courier, origin, cache_dir, tmp_path):
    c = courier("--disk-capacity", "64KiB", *NO_MEMORY)
    small_url, _ = resource(origin, "fits", 8 * KIB - 100)
    assert fetch(c, small_url)["source"] == "network"
    assert c.cache_lookup(small_url)["cached"] is True

    url, body = resource(origin, "huge", 8 * KIB + 1)
    destination = tmp_path / "out" / "huge.bin"
    destination.parent.mkdir()
    outcome = fetch(c, url, body="none", destination=str(destination))
    assert outcome["ok"] and outcome["path"] == str(destination)
    assert destination.read_bytes() == body
    assert c.cache_lookup(url)["cached"] is False
    assert disk_tier.row(cache_dir, url) is None and disk_tier.body_files(cache_dir) == []
    assert c.cache_stats()["disk"]["entries"] == 1
    again = fetch(c, url)
    assert again["source"] == "network" and again["bytes"] == body
    assert origin.hits("/res/huge") == 2


# ------------------------------------------------------------------ one write of the body


@pytest.mark.parametrize("size", [8 * KIB, 100 * KIB], ids=["held in memory", "streamed"])
def test_download_to_a_destination_stores_its_body_as_a_link(courier, origin, cache_dir, tmp_path, size):
    # Given a download to a destination on the cache directory's file system,
    # of a body small enough to be held in memory (and to be kept inline,
    # were it not written to its destination anyway) or streamed to a file
    c = courier(*NO_MEMORY)
    name = f"linked-{size}"
    url, body = resource(origin, name, size)
    destination = tmp_path / "out" / (name + ".bin")
    destination.parent.mkdir()
    outcome = fetch(c, url, body="none", destination=str(destination))
    assert outcome["ok"] and destination.read_bytes() == body
    # Then, once its store is made (a small body's is made behind its
    # outcome, and before courier answers a `cache/*` method), the cache's
    # body file is the destination's inode, and the row holds no body
    stats = c.cache_stats()
    linked = body_file(cache_dir, url)
    assert disk_tier.body_files(cache_dir) == [linked]
    assert os.stat(linked).st_ino == destination.stat().st_ino
    assert destination.stat().st_nlink == 2
    assert disk_tier.row(cache_dir, url)["body"] is None
    # And usage counts head and body once, and a new process serves it from disk
    assert stats["disk"]["usage"] == entry_cost(cache_dir, url)
    served = fetch(courier(*NO_MEMORY), url)
    assert served["source"] == "disk" and served["bytes"] == body
    assert origin.hits("/res/" + name) == 1


@pytest.mark.parametrize("ask", ["download", "cache/lookup", "cache/stats"])
def test_a_small_download_s_store_is_seen_by_its_own_process_at_once(courier, origin, cache_dir, tmp_path, ask):
    # Given small downloads to destinations, asked at once, whose stores
    # courier makes behind their outcomes
    c = courier(*NO_MEMORY)
    out = tmp_path / "out"
    out.mkdir()
    urls = [resource(origin, f"behind-{ask}-{i}", 8 * KIB)[0] for i in range(24)]
    answers = c.batch([("download", {"url": url, "destination": str(out / f"{i}.bin")}) for i, url in enumerate(urls)])
    finished = c.wait_all([answer["result"]["receipt"] for answer in answers])
    assert all(outcome["ok"] and outcome["source"] == "network" for outcome in finished.values())
    # When the client asks about the last one the moment its outcome is read
    last = urls[-1]
    if ask == "download":
        # Then it is served from the disk tier, the origin asked once
        assert fetch(c, last, cachePolicy="cacheOnly")["source"] == "disk"
    elif ask == "cache/lookup":
        assert c.cache_lookup(last)["cached"]
    else:
        assert c.cache_stats()["disk"]["entries"] == len(urls)
    assert origin.hits(f"/res/behind-{ask}-23") == 1


def test_every_store_behind_an_outcome_is_made_before_courier_exits(courier, origin, cache_dir, tmp_path):
    # Given many small downloads to destinations, the client ending its input
    # as soon as the last outcome is read
    c = courier()
    out = tmp_path / "out"
    out.mkdir()
    urls = [resource(origin, f"exit-{i}", 8 * KIB)[0] for i in range(64)]
    answers = c.batch([("download", {"url": url, "destination": str(out / f"{i}.bin")}) for i, url in enumerate(urls)])
    c.wait_all([answer["result"]["receipt"] for answer in answers])
    c.close_stdin()
    assert c.wait_exit(timeout=10) == 0
    # Then every response is in Cache.db, its body file linked to its destination
    assert disk_tier.usage(cache_dir)[1] == len(urls)
    for i, url in enumerate(urls):
        assert os.stat(body_file(cache_dir, url)).st_ino == (out / f"{i}.bin").stat().st_ino


def _rewrite_same_length(path, body):
    with open(path, "r+b") as f:
        f.seek(100)
        f.write(b"X" * 10)


def _append(path, body):
    with open(path, "ab") as f:
        f.write(b"appended")


def _truncate(path, body):
    os.truncate(path, len(body) // 2)


REWRITES = {"same length": _rewrite_same_length, "appended": _append, "truncated": _truncate}


@pytest.mark.parametrize("rewrite", list(REWRITES), ids=list(REWRITES))
def test_rewriting_a_linked_destination_in_place_is_never_served(courier, origin, cache_dir, tmp_path, rewrite):
    # Given a destination that shares its inode with the cache's body file
    name = "rewritten-" + str(list(REWRITES).index(rewrite))
    url, body = resource(origin, name, 80 * KIB)
    destination = tmp_path / "out" / (name + ".bin")
    destination.parent.mkdir()
    assert fetch(courier(*NO_MEMORY), url, body="none", destination=str(destination))["ok"]
    linked = body_file(cache_dir, url)
    assert os.stat(linked).st_ino == destination.stat().st_ino
    # When the client changes its file in place
    REWRITES[rewrite](destination, body)
    changed = destination.read_bytes()
    assert changed != body
    # Then a new process fetches the origin's bytes again, never the client's
    c = courier(*NO_MEMORY)
    outcome = fetch(c, url)
    assert outcome["source"] == "network" and outcome["bytes"] == body
    assert origin.hits("/res/" + name) == 2
    again = fetch(c, url)
    assert again["source"] == "disk" and again["bytes"] == body
    # And the client's file is as the client left it, no longer linked
    assert destination.read_bytes() == changed
    assert destination.stat().st_nlink == 1
    assert all(os.stat(path).st_ino != destination.stat().st_ino for path in disk_tier.body_files(cache_dir))


def test_the_memory_tier_stands_for_a_small_destination_s_file(courier, origin, cache_dir, tmp_path):
    # Given a small body downloaded to a destination, with both tiers on
    c = courier()
    url, body = resource(origin, "stood-for", 8 * KIB)
    destination = tmp_path / "out" / "stood-for.bin"
    destination.parent.mkdir()
    assert fetch(c, url, body="none", destination=str(destination))["ok"]
    # Then, once its store is made (before `cache/stats` is answered), the
    # disk tier links the destination and the memory tier counts it, and its
    # first hit serves it from memory
    assert c.cache_stats()["memory"]["usage"] >= len(body)
    assert os.stat(body_file(cache_dir, url)).st_ino == destination.stat().st_ino
    hit = fetch(c, url)
    assert hit["source"] == "memory" and hit["bytes"] == body
    # And since memory holds no second copy of a file download's bytes, a
    # file the client rewrote in place before any hit costs the same process
    # a fetch of the origin's bytes, never the client's
    url, body = resource(origin, "stood-for-rewritten", 8 * KIB)
    destination = tmp_path / "out" / "stood-for-rewritten.bin"
    assert fetch(c, url, body="none", destination=str(destination))["ok"]
    _rewrite_same_length(destination, body)
    again = fetch(c, url)
    assert again["source"] == "network" and again["bytes"] == body
    assert origin.hits("/res/stood-for-rewritten") == 2


def test_destination_on_another_file_system_is_copied(courier, origin, cache_dir):
    # Given a destination on tmpfs while the cache directory is elsewhere
    shm = "/dev/shm"
    if not os.path.isdir(shm) or os.stat(shm).st_dev == os.stat(cache_dir).st_dev:
        pytest.skip("needs /dev/shm on a file system of its own")
    c = courier(*NO_MEMORY)
    url, body = resource(origin, "elsewhere", 90 * KIB)
    destination = os.path.join(shm, f"courier-test-{os.getpid()}-elsewhere.bin")
    try:
        assert fetch(c, url, body="none", destination=destination)["ok"]
        # Then the cache holds a private copy of its own
        copy = body_file(cache_dir, url)
        assert os.stat(copy).st_ino != os.stat(destination).st_ino
        assert os.stat(copy).st_mode & 0o777 == 0o600
        with open(copy, "rb") as f:
            assert f.read() == body
    finally:
        if os.path.exists(destination):
            os.unlink(destination)
    served = fetch(courier(*NO_MEMORY), url)
    assert served["source"] == "disk" and served["bytes"] == body


def test_stored_checksums_are_of_the_bytes_written_after_redirects_and_decoding(courier, origin, tmp_path):
    # Given a permanent redirect that carries a body of its own, and a gzip-encoded response
    final_url, body = resource(origin, "moved-here", 30 * KIB)
    hop = origin.set_resource("moved", pattern(5 * KIB, "redirect body"), {"Location": final_url, **LONG}, status=301)
    gzip_url = origin.url("/gzip?size=60000")
    c = courier(*NO_MEMORY)
    for index, (url, expected) in enumerate(((hop, body), (gzip_url, gzip_plain(60000)))):
        # When each is downloaded to a destination, its checksum taken as the body streamed in
        destination = tmp_path / f"out{index}.bin"
        outcome = fetch(c, url, body="none", destination=str(destination))
        assert outcome["ok"] and destination.read_bytes() == expected
        # Then, once its store is made, a new process serves from disk what
        # the client received, whose checksum covers neither the redirect's
        # body nor the encoded bytes
        c.cache_stats()
        served = fetch(courier(*NO_MEMORY), url, cachePolicy="cacheOnly")
        assert served["source"] == "disk" and served["bytes"] == expected
    assert origin.hits("/res/moved") == 1 and origin.hits("/gzip") == 1


@pytest.mark.parametrize("size", [8 * KIB, 8 * KIB + 1, 200 * KIB])
def test_an_unannounced_body_is_kept_in_memory_only_within_the_entry_limit(courier, origin, size):
    # Given chunked bodies (no length announced) around the memory tier's
    # entry limit (1/8 of 64 KiB), which the transfer keeps while they fit
    url = origin.url(f"/drip?size={size}&chunks=7&interval=0&length=0&seed=unannounced")
    c = courier(*SMALL_MEMORY)
    outcome = fetch(c, url)
    assert outcome["source"] == "network" and outcome["bytes"] == pattern(size, "unannounced")
    # Then the memory tier holds it only when it fits, and both tiers serve the bytes received
    assert c.cache_lookup(url)["tier"] == ("memory" if size <= 8 * KIB else "disk")
    assert fetch(c, url, cachePolicy="cacheOnly")["bytes"] == pattern(size, "unannounced")
    c.cache_clear(memory=True, disk=False)
    served = fetch(c, url, cachePolicy="cacheOnly")
    assert served["source"] == "disk" and served["bytes"] == pattern(size, "unannounced")
    assert origin.hits("/drip") == 1


def test_revalidation_rewrites_the_head_only(courier, origin, cache_dir):
    # Given a stored response that must be revalidated, its body in a file
    c = courier(*NO_MEMORY)
    url = origin.set_resource(
        "reval-link", pattern(100 * KIB, "reval"), {"Cache-Control": "no-cache", "ETag": '"keep"'})
    first = fetch(c, url)
    assert first["source"] == "network"
    body_before = body_file(cache_dir, url)
    inode = os.stat(body_before).st_ino
    head_before = disk_tier.row(cache_dir, url)["head"]
    # When a 304 answers its revalidation
    outcome = fetch(c, url)
    assert outcome["source"] == "revalidated" and outcome["bytes"] == first["bytes"]
    # Then the same body file is kept under a new head, and a new process revalidates it again
    assert disk_tier.body_files(cache_dir) == [body_before] and os.stat(body_before).st_ino == inode
    assert disk_tier.row(cache_dir, url)["head"] != head_before
    again = fetch(courier(*NO_MEMORY), url)
    assert again["source"] == "revalidated" and again["bytes"] == first["bytes"]


# ------------------------------------------------------------------ cache/* methods and counters


def test_lookup_fields(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=600&etag=lk&last-modified=-7200&body=hello")
    assert c.cache_lookup(url) == {"cached": False, "fresh": False, "size": None, "tier": None,
                                   "expires": None, "etag": None, "lastModified": None}
    assert fetch(c, url)["bytes"] == b"hello"
    lookup = c.cache_lookup(url)
    assert lookup["cached"] is True and lookup["fresh"] is True
    assert lookup["size"] == 5 and lookup["tier"] == "memory"
    assert lookup["etag"] == '"lk"'
    assert abs(datetime.datetime.strptime(lookup["lastModified"], "%a, %d %b %Y %H:%M:%S GMT")
               .replace(tzinfo=datetime.timezone.utc).timestamp()
               - (datetime.datetime.now(datetime.timezone.utc).timestamp() - 7200)) < 60
    assert 540 < seconds_until(lookup["expires"]) <= 601
    before = counters(c)
    c.cache_lookup(url)
    assert counters(c) == before, "cache/lookup is not a hit"
    c.cache_clear(memory=True, disk=False)
    lookup = c.cache_lookup(url)
    assert lookup["tier"] == "disk" and lookup["size"] == 5 and lookup["etag"] == '"lk"'


def test_remove_and_clear(courier, origin, cache_dir):
    c = courier()
    urls = [origin.url(f"/cache?max-age=3600&n={n}") for n in range(3)]
    for url in urls:
        assert fetch(c, url)["source"] == "network"
    assert c.cache_remove(urls[0]) == {"removed": True}
    assert c.cache_remove(urls[0]) == {"removed": False}
    assert c.cache_remove(origin.url("/never")) == {"removed": False}
    assert c.cache_lookup(urls[0])["cached"] is False
    assert disk_tier.row(cache_dir, urls[0]) is None
    assert fetch(c, urls[0])["source"] == "network"
    assert origin.hits("/cache") == 4

    assert c.cache_clear(memory=True, disk=False) == {"memory": 3, "disk": 0}
    stats = c.cache_stats()
    assert stats["memory"] == {**stats["memory"], "entries": 0, "usage": 0}
    assert stats["disk"]["entries"] == 3
    assert c.cache_clear(memory=False, disk=True) == {"memory": 0, "disk": 3}
    assert disk_tier.usage(cache_dir) == (0, 0)
    for url in urls:
        assert fetch(c, url)["source"] == "network"
    assert c.cache_clear() == {"memory": 3, "disk": 3}
    stats = c.cache_stats()
    assert (stats["memory"]["entries"], stats["memory"]["usage"]) == (0, 0)
    assert (stats["disk"]["entries"], stats["disk"]["usage"]) == (0, 0)
    assert stats["disk"]["path"] == os.path.join(str(cache_dir), "http")


def test_counters_after_a_scripted_sequence(courier, origin):
    c = courier()
    fresh = origin.url("/cache?max-age=3600&n=fresh")
    revalidate = origin.url("/cache?no-cache=1&etag=rv&n=rv")
    stale = origin.url("/cache?max-age=0&n=stale")
    slow = origin.url("/slow-headers?delay=0.5")
    assert counters(c) == (0, 0, 0)
    assert fetch(c, fresh)["source"] == "network"                 # miss
    assert fetch(c, fresh)["source"] == "memory"                  # hit
    c.cache_clear(memory=True, disk=False)
    assert fetch(c, fresh)["source"] == "disk"                    # hit
    assert counters(c) == (2, 1, 0)
    assert fetch(c, revalidate)["source"] == "network"            # miss
    assert fetch(c, revalidate)["source"] == "revalidated"        # revalidation
    assert fetch(c, fresh, cachePolicy="reload")["source"] == "network"  # miss
    assert counters(c) == (2, 3, 1)
    outcome = fetch(c, origin.url("/cache?n=absent"), cachePolicy="cacheOnly")
    assert outcome["error"]["code"] == "not_cached"               # no task: neither
    assert fetch(c, stale)["source"] == "network"                 # miss
    assert fetch(c, stale)["source"] == "network"                 # stale, no validators: miss
    assert fetch(c, stale, cachePolicy="cacheElseLoad")["source"] == "memory"  # hit
    assert counters(c) == (3, 5, 1)
    # Two receipts joined on one task are one miss.
    first, second = c.batch([("download", {"url": slow}), ("download", {"url": slow})])
    assert first["result"]["task"] == second["result"]["task"]
    c.wait_all([first["result"]["receipt"], second["result"]["receipt"]])
    assert origin.hits("/slow-headers") == 1
    assert counters(c) == (3, 6, 1)
    assert origin.hits("/cache") == 6


# ------------------------------------------------------------------ fresh hits and the network


def test_fresh_hit_never_touches_the_network(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=3600&body=offline")
    stale = origin.url("/cache?max-age=0&etag=x&body=offline")
    for u in (url, stale):
        assert fetch(c, u)["source"] == "network"
    origin.stop()
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["source"] == "memory" and outcome["bytes"] == b"offline"
    failed = fetch(c, stale)  # proves the origin is really gone
    assert failed["ok"] is False and failed["error"]["code"] == "connect_failed"

    assert c.close() == 0
    again = courier()
    outcome = fetch(again, url)
    assert outcome["ok"] and outcome["source"] == "disk" and outcome["bytes"] == b"offline"
    assert fetch(again, url)["source"] == "memory"
    assert counters(again) == (2, 0, 0)


# ------------------------------------------------------------------ further RFC 9111 cases


@pytest.mark.parametrize("tier", TIERS)
def test_cache_hit_lands_at_its_destination(courier, origin, tier, tmp_path):
    c = courier()
    url, body = resource(origin, "dest", 20 * KIB)
    assert fetch(c, url)["source"] == "network"
    c = on_tier(courier, c, tier, url)
    destination = tmp_path / "placed" / "dest.bin"
    destination.parent.mkdir()
    outcome = fetch(c, url, body="none", destination=str(destination))
    assert outcome["ok"] and outcome["source"] == served_from(tier)
    assert outcome["path"] == str(destination) and destination.read_bytes() == body
    plain = fetch(c, url, body="none")
    assert open(plain["path"], "rb").read() == body
    assert origin.hits("/res/dest") == 1


def test_revalidation_of_a_body_kept_on_disk_only(courier, origin):
    c = courier(*SMALL_MEMORY)
    body = pattern(12 * KIB, "disk-only")
    url = origin.set_resource("dko", body, {"ETag": '"d1"', "Cache-Control": "max-age=0"})
    assert fetch(c, url)["source"] == "network"
    assert c.cache_lookup(url)["tier"] == "disk"
    origin.set_resource("dko", body, {"ETag": '"d1"', "Cache-Control": "max-age=3600"})
    outcome = fetch(c, url)
    assert outcome["source"] == "revalidated" and outcome["bytes"] == body
    lookup = c.cache_lookup(url)
    assert lookup["tier"] == "disk" and lookup["fresh"] is True and lookup["size"] == 12 * KIB
    again = fetch(c, url)
    assert again["source"] == "disk" and again["bytes"] == body
    assert origin.hits("/res/dko") == 2


def test_a_response_that_may_not_be_stored_removes_the_stored_one(courier, origin, cache_dir):
    c = courier()
    url, _ = resource(origin, "gone", 2000)
    assert fetch(c, url)["source"] == "network"
    assert c.cache_lookup(url)["cached"] is True
    origin.set_resource("gone", pattern(2100, "gone2"), {"Cache-Control": "no-store"})
    outcome = fetch(c, url, cachePolicy="reload")
    assert outcome["source"] == "network" and outcome["size"] == 2100
    assert c.cache_lookup(url)["cached"] is False
    assert disk_tier.row(cache_dir, url) is None
    result = c.download(url, cachePolicy="cacheOnly", wait=True)
    assert result["outcome"]["error"]["code"] == "not_cached"


def test_request_no_cache_revalidates_a_fresh_entry(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=3600&etag=rq")
    assert fetch(c, url)["source"] == "network"
    outcome = fetch(c, url, headers={"Cache-Control": "no-cache"})
    assert outcome["source"] == "revalidated"
    assert origin.last_headers("/cache").get("if-none-match") == '"rq"'
    assert fetch(c, url)["source"] == "memory"
    assert origin.hits("/cache") == 2


def test_vary_star_is_never_served(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=3600&vary=*")
    for _ in range(2):
        assert fetch(c, url)["source"] == "network"
    assert origin.hits("/cache") == 2


def test_requests_with_their_own_validators_pass_through(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=3600&etag=own")
    assert fetch(c, url)["source"] == "network"
    outcome = fetch(c, url, headers={"If-None-Match": '"other"'})
    assert outcome["ok"] and outcome["source"] == "network"
    assert origin.last_headers("/cache").get("if-none-match") == '"other"'
    assert origin.hits("/cache") == 2


def test_s_maxage_is_ignored_and_private_is_stored(courier, origin):
    c = courier()
    shared_only = origin.url("/cache?cache-control=s-maxage%3D3600")
    assert fetch(c, shared_only)["source"] == "network"
    assert c.cache_lookup(shared_only)["fresh"] is False
    assert fetch(c, shared_only)["source"] == "network"
    assert origin.hits("/cache?cache-control=s-maxage%3D3600") == 2

    private = origin.url("/cache?cache-control=private%2C%20max-age%3D3600")
    assert fetch(c, private)["source"] == "network"
    assert fetch(c, private)["source"] == "memory"
    assert origin.hits("/cache?cache-control=private%2C%20max-age%3D3600") == 1
