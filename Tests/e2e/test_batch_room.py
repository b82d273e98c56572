"""End-to-end test of the room a batch's answers take while they wait for
the rest of their batch (8 MiB), with `download` answers, which courier makes
after the request's handler returned (once each download is done): each takes
the bytes of its JSON text, escapes included, not the size of its body."""

from __future__ import annotations

from test_batch_order import Raw, get, request

BATCH_ANSWER_LIMIT = 8 << 20
BATCH_TOO_LARGE = -32002


def test_download_answers_past_the_room_are_replaced_by_their_encoded_size(cache_dir, origin):
    # Given six downloads of some 600,000 bytes of 0x01 as text: each answer
    # is some 3.6 MB of JSON (`\u0001` for each byte), so two fit in 8 MiB,
    # though six bodies would
    raw = Raw(cache_dir)
    try:
        sizes = [600_000 + n for n in range(6)]
        raw.send([request(n, "download", {"url": origin.url(f"/gzip-fill?size={size}&byte=1"),
                                          "body": "text", "wait": True})
                  for n, size in enumerate(sizes)])

        # When every download is done and the batch is answered
        seen = raw.until(lambda seen: any(isinstance(m, list) for m in seen), timeout=60)
    finally:
        raw.close()

    # Then every request is answered once, in order: the answers that fit
    # come whole, and those that found no room say their download ran
    array = next(m for m in seen if isinstance(m, list))
    assert [entry["id"] for entry in array] == list(range(6))
    kept = [entry for entry in array if "result" in entry]
    refused = [entry for entry in array if "error" in entry]
    assert len(kept) == 2, [entry.get("error") for entry in array]
    for entry in kept:
        outcome = entry["result"]["outcome"]
        assert outcome["ok"] is True
        assert outcome["text"] == "\x01" * sizes[entry["id"]]
    assert all(entry["error"]["code"] == BATCH_TOO_LARGE
               and entry["error"]["data"] == {"limit": BATCH_ANSWER_LIMIT, "ran": True} for entry in refused)
    # And every download was made, its notice before the array
    finished = [m for m in seen if get(m, "method") == "download/finished"]
    assert len(finished) == 6 and all(m["params"]["outcome"]["ok"] for m in finished)
