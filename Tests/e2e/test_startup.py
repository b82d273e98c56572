"""End-to-end tests of what courier does at start with a cache directory
that already holds many entries: they are counted from the rows, whatever
count another program left."""

from __future__ import annotations

import base64

import disk_tier
from origin import pattern

LONG = {"Cache-Control": "max-age=3600"}
COPIES = 2000


def fetch(c, url: str) -> dict:
    outcome = c.download(url, wait=True, body="base64", rpc_timeout=30)["outcome"]
    if outcome.get("base64") is not None:
        outcome["bytes"] = base64.b64decode(outcome["base64"])
    return outcome


def test_stats_right_after_start_count_every_entry_already_there(courier, origin, cache_dir):
    # Given a cache directory holding one stored response and, under other
    # keys, many copies of its row
    body = pattern(500, "many")
    url = origin.set_resource("many", body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    with disk_tier.connect(cache_dir) as db:
        columns = "used, size, body_length, body_checksum, body_file, head, head_checksum, body"
        for index in range(COPIES):
            db.execute(f"INSERT INTO responses (key, {columns}) SELECT ?, {columns} FROM responses WHERE key = ?",
                       (f"copy {index}".encode(), disk_tier.key_of(url)))
        # and a count of them another program left wrong
        db.execute("UPDATE response_usage SET bytes = 1, entries = 1")
    on_disk, entries = disk_tier.usage(cache_dir)
    assert entries == COPIES + 1

    # When a new courier is asked for its statistics as its first request
    c = courier()
    stats = c.cache_stats()

    # Then the disk figures count every row
    assert stats["disk"]["entries"] == COPIES + 1
    assert stats["disk"]["usage"] == on_disk

    # And the stored response is served from disk
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["source"] == "disk" and outcome["bytes"] == body
