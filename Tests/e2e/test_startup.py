"""End-to-end tests of what courier does at start with a cache directory
that already holds many entries: the first count runs beside serving, and
what reports it waits for it."""

from __future__ import annotations

import base64
import os
import shutil

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
    # names, many copies of its entry and body files
    body = pattern(500, "many")
    url = origin.set_resource("many", body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    directory = os.path.join(str(cache_dir), "http")
    [entry] = [name for name in os.listdir(directory) if len(name) == 64]
    [body_file] = [name for name in os.listdir(directory) if name.startswith(entry + ".")]
    for index in range(COPIES):
        name = f"{index:064x}"
        shutil.copyfile(os.path.join(directory, entry), os.path.join(directory, name))
        shutil.copyfile(os.path.join(directory, body_file), os.path.join(directory, name + body_file[64:]))
    on_disk = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))

    # When a new courier is asked for its statistics as its first request
    c = courier()
    stats = c.cache_stats()

    # Then the disk figures count the whole directory, not part of it
    assert stats["disk"]["entries"] == COPIES + 1
    assert stats["disk"]["usage"] == on_disk

    # And the stored response is served from disk
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["source"] == "disk" and outcome["bytes"] == body
