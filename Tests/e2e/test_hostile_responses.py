"""Hostile numbers end to end: no response header and no file in the cache
directory can crash courier. Origins send absurd dates, ages, lifetimes,
lengths and status codes; other processes write absurd cache entries. For
each, courier answers `download` and `cache/lookup`, stays up, and serves
the next request."""

from __future__ import annotations

import base64
import datetime
import json
import os
import struct

import pytest
import xxhash

from origin import pattern

LONG = {"Cache-Control": "max-age=3600"}
MAGIC = b"CRCH\r\n\x1a\n"
HEADER = struct.Struct("<8sIIQQQQ")  # magic, version, metadata length, body length, two XXH3-64s, body id

# ------------------------------------------------------------------ XXH3-64


def xxh3(data: bytes) -> int:
    """XXH3-64 as the disk cache checksums entries (seed 0), from the xxhash
    package's own copy of the reference implementation."""
    return xxhash.xxh3_64_intdigest(data)


def test_xxh3_reference_values():
    assert xxh3(b"") == 0x2D06800538D394C2
    assert xxh3(b"abc") == 0x78AF5F94892F3950
    assert xxh3(b"Nobody inspects the spammish repetition") == 0x6CB00603B5CC47E9


# ------------------------------------------------------------------ entries


def entry_bytes(metadata: bytes, body: bytes, **overrides: int) -> bytes:
    """An entry file as DiskCacheEntry.swift describes it, for ``body``;
    ``overrides`` replace header fields (version, metadata_length,
    body_length, metadata_sum, body_sum, body_id) with values of their own.
    The body itself lives in the body file the body id names."""
    fields = {"version": 3, "metadata_length": len(metadata), "body_length": len(body),
              "metadata_sum": xxh3(metadata), "body_sum": xxh3(body), "body_id": 0}
    fields.update(overrides)
    header = HEADER.pack(MAGIC, fields["version"], fields["metadata_length"], fields["body_length"],
                         fields["metadata_sum"], fields["body_sum"], fields["body_id"])
    return header + metadata


def body_path(entry_path: str, body_id: int) -> str:
    """The body file an entry file names: its path, a dot, the body id in 16 hex digits."""
    return f"{entry_path}.{body_id:016x}"


def read_entry(path: str) -> tuple[dict, bytes, bytes, int]:
    """The metadata object, the metadata's bytes, the body and the body id
    of an entry, after checking its header against our own XXH3-64."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, metadata_length, body_length, metadata_sum, body_sum, body_id = HEADER.unpack_from(data)
    assert magic == MAGIC and version == 3
    metadata = data[HEADER.size:]
    assert len(metadata) == metadata_length
    with open(body_path(path, body_id), "rb") as f:
        body = f.read()
    assert len(body) == body_length
    assert xxh3(metadata) == metadata_sum and xxh3(body) == body_sum, "XXH3-64 differs from courier's"
    return json.loads(metadata), metadata, body, body_id


def only_entry(cache_dir) -> str:
    """The one entry file courier has written (named by a hash of its key,
    however keys are formed)."""
    directory = os.path.join(str(cache_dir), "http")
    names = [name for name in os.listdir(directory) if len(name) == 64]
    assert len(names) == 1, names
    return os.path.join(directory, names[0])


# ------------------------------------------------------------------ helpers


def fetch(c, url: str) -> dict:
    """The outcome of a `download` with `wait: true`, body in ``bytes``."""
    outcome = c.download(url, wait=True, body="base64", rpc_timeout=30)["outcome"]
    if outcome.get("base64") is not None:
        outcome["bytes"] = base64.b64decode(outcome["base64"])
    return outcome


def assert_lookup_answers(c, url: str) -> dict:
    lookup = c.cache_lookup(url)
    assert isinstance(lookup["cached"], bool)
    if lookup["expires"] is not None:
        datetime.datetime.fromisoformat(lookup["expires"].replace("Z", "+00:00"))
    return lookup


def assert_still_serving(c, origin) -> None:
    """courier is up and fetches an ordinary resource."""
    body = pattern(100, "after")
    url = origin.set_resource("after", body, LONG)
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["bytes"] == body
    assert c.alive


# ------------------------------------------------------------------ hostile responses

HUGE_YEARS = ("999999999999", "-999999999999", "9223372036854775808", "99999999999999999999999")
ABSURD_NUMBERS = ("inf", "nan", "1e400", "-5", "99999999999999999999", "9223372036854775808", "0x10", "")

HEADER_CASES = (
    [(f"date-{i}", [f"Date: Sun, 06 Nov {year} 08:49:37 GMT", "Expires: Wed, 01 May 2024 12:00:00 GMT"])
     for i, year in enumerate(HUGE_YEARS)]
    + [(f"expires-{i}", [f"Expires: Sun, 06 Nov {year} 08:49:37 GMT"]) for i, year in enumerate(HUGE_YEARS)]
    + [(f"last-modified-{i}", [f"Last-Modified: Sun, 06 Nov {year} 08:49:37 GMT"])
       for i, year in enumerate(HUGE_YEARS)]
    + [("date-9999", ["Date: Fri, 31 Dec 9999 23:59:59 GMT", "Cache-Control: max-age=60"]),
       ("expires-9999", ["Expires: Fri, 31 Dec 9999 23:59:59 GMT", "Date: Mon, 01 Jan 1583 00:00:00 GMT"]),
       ("last-modified-1583", ["Last-Modified: Mon, 01 Jan 1583 00:00:00 GMT"])]
    + [(f"age-{i}", ["Cache-Control: max-age=60", f"Age: {value}"]) for i, value in enumerate(ABSURD_NUMBERS)]
    + [(f"max-age-{i}", [f"Cache-Control: max-age={value}"]) for i, value in enumerate(ABSURD_NUMBERS)]
    + [("everything", ["Date: Sun, 06 Nov 999999999999 08:49:37 GMT", "Age: 1e400",
                       "Cache-Control: max-age=99999999999999999999, max-stale",
                       "Expires: Sun, 06 Nov -999999999999 08:49:37 GMT",
                       "Last-Modified: Sun, 06 Nov 99999999999999999999999 08:49:37 GMT"])]
)


@pytest.mark.parametrize("name,lines", HEADER_CASES, ids=[case[0] for case in HEADER_CASES])
def test_absurd_header_values(courier, origin, name, lines):
    # Given an origin whose response carries absurd numbers
    c = courier()
    body = pattern(64, name)
    head = "\r\n".join(["HTTP/1.1 200 OK", "Content-Type: application/octet-stream",
                        f"Content-Length: {len(body)}", *lines])
    url = origin.set_raw_response(name, head, body)
    # When it is downloaded twice (network, then cache or network again) and looked up
    for _ in range(2):
        outcome = fetch(c, url)
        assert outcome["ok"] and outcome["bytes"] == body
    assert_lookup_answers(c, url)
    # Then courier is still up and serving
    assert_still_serving(c, origin)


LENGTH_AND_STATUS_CASES = [
    ("length-negative", "HTTP/1.1 200 OK", ["Content-Length: -5"]),
    ("length-huge", "HTTP/1.1 200 OK", ["Content-Length: 99999999999999999999"]),
    ("length-2^63", "HTTP/1.1 200 OK", ["Content-Length: 9223372036854775808"]),
    ("length-2^63-1", "HTTP/1.1 200 OK", ["Content-Length: 9223372036854775807"]),
    ("length-plus", "HTTP/1.1 200 OK", ["Content-Length: +5"]),
    ("length-float", "HTTP/1.1 200 OK", ["Content-Length: 1e400"]),
    ("length-list", "HTTP/1.1 200 OK", ["Content-Length: 5, 6"]),
    ("status-huge", "HTTP/1.1 99999999999999999999 OK", []),
    ("status-2^63", "HTTP/1.1 9223372036854775808 OK", []),
    ("status-negative", "HTTP/1.1 -200 OK", []),
    ("status-four-digits", "HTTP/1.1 2000 OK", []),
    ("status-two-digits", "HTTP/1.1 99 OK", []),
    ("status-missing", "HTTP/1.1", []),
    ("status-trailing-letter", "HTTP/1.1 200x OK", []),
]


@pytest.mark.parametrize("name,status_line,lines", LENGTH_AND_STATUS_CASES,
                         ids=[case[0] for case in LENGTH_AND_STATUS_CASES])
def test_absurd_lengths_and_status_lines(courier, origin, name, status_line, lines):
    # Given an origin that frames its response absurdly (the body then ends
    # when the connection closes, if curl reads it at all)
    c = courier()
    url = origin.set_raw_response(name, "\r\n".join([status_line, *lines, *[f"{k}: {v}" for k, v in LONG.items()]]),
                                  pattern(5, name))
    # When it is downloaded twice and looked up, courier answers each time
    for _ in range(2):
        outcome = fetch(c, url)
        assert isinstance(outcome["ok"], bool)
        if outcome.get("status") is not None:
            assert 100 <= outcome["status"] <= 999
    assert_lookup_answers(c, url)
    # Then courier is still up and serving
    assert_still_serving(c, origin)


def test_status_is_the_three_digits_curl_reads(courier, origin):
    c = courier()
    url = origin.set_raw_response("status-200x", "HTTP/1.1 200x OK\r\nContent-Length: 5", "hello")
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["status"] == 200, outcome


# ------------------------------------------------------------------ hostile cache entries


def _set(field, value):
    def change(meta: dict) -> dict:
        meta[field] = value
        return meta
    return change


def _drop(field):
    def change(meta: dict) -> dict:
        del meta[field]
        return meta
    return change


def _headers(pairs):
    def change(meta: dict) -> dict:
        meta["headers"] = pairs
        return meta
    return change


def _times(request_time, response_time):
    def change(meta: dict) -> dict:
        meta["requestTime"], meta["responseTime"] = request_time, response_time
        return meta
    return change


METADATA_CASES = {
    "requestTime 1e308": _set("requestTime", 1e308),
    "requestTime -1e308": _set("requestTime", -1e308),
    "responseTime 1e308": _set("responseTime", 1e308),
    "responseTime -1e308": _set("responseTime", -1e308),
    "storedAt 1e308": _set("storedAt", 1e308),
    "request -1e308 response 1e308": _times(-1e308, 1e308),
    "request 1e308 response -1e308": _times(1e308, -1e308),
    "responseTime year 10000": _set("responseTime", 253402300800),
    "requestTime string": _set("requestTime", "NaN"),
    "responseTime null": _set("responseTime", None),
    "status 2^62": _set("status", 2 ** 62),
    "status 2^63-1": _set("status", 2 ** 63 - 1),
    "status -1": _set("status", -1),
    "status 0": _set("status", 0),
    "status string": _set("status", "200"),
    "status real": _set("status", 200.5),
    "no status": _drop("status"),
    "no key": _drop("key"),
    "no url": _drop("url"),
    "no headers": _drop("headers"),
    "no vary": _drop("vary"),
    "no storedAt": _drop("storedAt"),
    "headers object": _headers({"a": "b"}),
    "header pair of three": _headers([["a", "b", "c"]]),
    "header value number": _headers([["a", 5]]),
    "header name with space": _headers([["a b", "c"]]),
    "header value with CRLF": _headers([["x", "a\r\nset-cookie: y"]]),
    "header value with NUL": _headers([["x", "a\u0000b"]]),
    "vary value number": _set("vary", {"accept": 1}),
    "metadata array": lambda meta: [meta],
}

# Sound metadata whose header values are absurd: a valid entry, served or
# revalidated, never a crash.
HOSTILE_HEADER_ENTRIES = {
    "absurd header values": _headers([
        ["content-type", "application/octet-stream"], ["age", "1e400"],
        ["date", "Sun, 06 Nov 999999999999 08:49:37 GMT"],
        ["cache-control", "max-age=99999999999999999999"],
        ["expires", "Sun, 06 Nov -999999999999 08:49:37 GMT"],
        ["last-modified", "Sun, 06 Nov 9223372036854775808 08:49:37 GMT"],
    ]),
    "age inf, max-age huge": _headers([["age", "inf"], ["cache-control", "max-age=9223372036854775808"]]),
    "times at the edges": _times(0, 253402300799),
}


# Whole entry files: (metadata, body, body id) → file bytes.
FILE_CASES = {
    "body length 2^63-1": lambda m, b, i: entry_bytes(m, b, body_id=i, body_length=2 ** 63 - 1),
    "body length 2^64-1": lambda m, b, i: entry_bytes(m, b, body_id=i, body_length=2 ** 64 - 1),
    "body length one more": lambda m, b, i: entry_bytes(m, b, body_id=i, body_length=len(b) + 1),
    "body length 0": lambda m, b, i: entry_bytes(m, b, body_id=i, body_length=0, body_sum=xxh3(b"")),
    "metadata length 2^32-1": lambda m, b, i: entry_bytes(m, b, body_id=i, metadata_length=2 ** 32 - 1),
    "metadata length 0": lambda m, b, i: entry_bytes(m, b, body_id=i, metadata_length=0),
    "wrong metadata checksum": lambda m, b, i: entry_bytes(m, b, body_id=i, metadata_sum=xxh3(m) ^ 1),
    "wrong body checksum": lambda m, b, i: entry_bytes(m, b, body_id=i, body_sum=xxh3(b) ^ 1),
    "another body id": lambda m, b, i: entry_bytes(m, b, body_id=i ^ 1),
    "version 1": lambda m, b, i: entry_bytes(m, b, body_id=i, version=1),
    "version 2 (XXH64 checksums)": lambda m, b, i: entry_bytes(m, b, body_id=i, version=2),
    "version 2^32-1": lambda m, b, i: entry_bytes(m, b, body_id=i, version=2 ** 32 - 1),
    "version 1 with its body inline": lambda m, b, i: (
        struct.pack("<8sIIQQQ", MAGIC, 1, len(m), len(b), xxh3(m), xxh3(b)) + m + b),
    "metadata cut": lambda m, b, i: entry_bytes(m, b, body_id=i)[:-1],
    "bytes past the metadata": lambda m, b, i: entry_bytes(m, b, body_id=i) + b"x",
    "header only": lambda m, b, i: entry_bytes(m, b, body_id=i)[:HEADER.size],
    "header cut": lambda m, b, i: entry_bytes(m, b, body_id=i)[:HEADER.size - 1],
    "empty": lambda m, b, i: b"",
    "random bytes": lambda m, b, i: pattern(4096, "random"),
    "metadata 1e400": lambda m, b, i: entry_bytes(m.replace(b'"requestTime":', b'"requestTime":1e400,"x":'), b, body_id=i),
    "metadata NaN": lambda m, b, i: entry_bytes(m.replace(b'"requestTime":', b'"requestTime":NaN,"x":'), b, body_id=i),
    "metadata integer past 64 bits": lambda m, b, i: entry_bytes(
        m.replace(b'"status":', b'"status":99999999999999999999999,"x":'), b, body_id=i),
    "metadata not JSON": lambda m, b, i: entry_bytes(b"{" * 1000, b, body_id=i),
}


def _flip_byte(path: str, body: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(len(body) // 2)
        f.write(bytes([body[len(body) // 2] ^ 0x20]))


def _replace_with(make):
    def change(path: str, body: bytes) -> None:
        os.unlink(path)
        make(path, body)
    return change


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


# Body files an entry file names: (path, body) → None, changing what is there.
BODY_CASES = {
    "missing": lambda path, body: os.unlink(path),
    "one byte flipped": _flip_byte,
    "one byte longer": lambda path, body: _write(path, body + b"!"),
    "one byte shorter": lambda path, body: _write(path, body[:-1]),
    "empty": lambda path, body: _write(path, b""),
    "symlink to the same bytes": _replace_with(lambda path, body: (
        _write(path + ".target", body), os.symlink(os.path.basename(path) + ".target", path))),
    "symlink to /dev/zero": _replace_with(lambda path, body: os.symlink("/dev/zero", path)),
    "symlink loop": _replace_with(lambda path, body: os.symlink(os.path.basename(path), path)),
    "fifo": _replace_with(lambda path, body: os.mkfifo(path, 0o600)),
    "directory": _replace_with(lambda path, body: os.mkdir(path, 0o700)),
    "unix socket": _replace_with(lambda path, body: _bind_socket(path)),
}


def _bind_socket(path: str) -> None:
    """A Unix socket at ``path``, bound by a relative name (the whole path
    is longer than a socket address holds)."""
    import socket
    here = os.getcwd()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.chdir(os.path.dirname(path))
        sock.bind(os.path.basename(path))
    finally:
        os.chdir(here)
        sock.close()


def _store_and_corrupt(courier, origin, cache_dir, name: str, make_file) -> tuple[str, bytes, int]:
    """Lets one courier store ``name``, rewrites its entry file with
    ``make_file(metadata bytes, body, body id)``, and returns (url, body,
    origin hits)."""
    body = pattern(300, name)
    url = origin.set_resource(name, body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    path = only_entry(cache_dir)
    _meta, metadata, stored_body, body_id = read_entry(path)
    assert stored_body == body
    with open(path, "wb") as f:
        f.write(make_file(metadata, body, body_id))
    return url, body, origin.hits("/res/" + name)


def _metadata_file(change):
    def make(metadata: bytes, body: bytes, body_id: int) -> bytes:
        return entry_bytes(json.dumps(change(json.loads(metadata)), separators=(",", ":")).encode(), body,
                           body_id=body_id)
    return make


def _check_fresh_courier(courier, origin, url: str, body: bytes) -> dict:
    c = courier()
    assert_lookup_answers(c, url)
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["bytes"] == body
    assert_lookup_answers(c, url)
    assert_still_serving(c, origin)
    return outcome


def test_rewritten_entry_is_served(courier, origin, cache_dir):
    # Given an entry rewritten unchanged by this file's own writer
    url, body, hits = _store_and_corrupt(courier, origin, cache_dir, "control", _metadata_file(lambda m: m))
    # Then a fresh courier serves it from disk: the format and XXH3-64 agree
    outcome = _check_fresh_courier(courier, origin, url, body)
    assert outcome["source"] == "disk" and origin.hits("/res/control") == hits


@pytest.mark.parametrize("case", list(METADATA_CASES), ids=list(METADATA_CASES))
def test_absurd_metadata_is_a_miss(courier, origin, cache_dir, case):
    # Given an entry whose checksummed metadata holds absurd values
    name = "meta-" + str(list(METADATA_CASES).index(case))
    url, body, hits = _store_and_corrupt(courier, origin, cache_dir, name, _metadata_file(METADATA_CASES[case]))
    # When a fresh courier looks it up and downloads it
    outcome = _check_fresh_courier(courier, origin, url, body)
    # Then the entry was not believed: the origin served the body
    assert outcome["source"] == "network" and origin.hits("/res/" + name) == hits + 1


@pytest.mark.parametrize("case", list(HOSTILE_HEADER_ENTRIES), ids=list(HOSTILE_HEADER_ENTRIES))
def test_entry_with_absurd_header_values_answers(courier, origin, cache_dir, case):
    # Given a sound entry whose stored header values are absurd
    name = "entry-headers-" + str(list(HOSTILE_HEADER_ENTRIES).index(case))
    url, body, _ = _store_and_corrupt(courier, origin, cache_dir, name,
                                      _metadata_file(HOSTILE_HEADER_ENTRIES[case]))
    # Then a fresh courier answers for it and keeps serving
    _check_fresh_courier(courier, origin, url, body)


@pytest.mark.parametrize("case", list(FILE_CASES), ids=list(FILE_CASES))
def test_corrupt_entry_file_is_a_miss(courier, origin, cache_dir, case):
    # Given an entry file whose framing, checksums or JSON are broken
    name = "file-" + str(list(FILE_CASES).index(case))
    url, body, hits = _store_and_corrupt(courier, origin, cache_dir, name, FILE_CASES[case])
    # When a fresh courier looks it up and downloads it
    outcome = _check_fresh_courier(courier, origin, url, body)
    # Then the origin served the body
    assert outcome["source"] == "network" and origin.hits("/res/" + name) == hits + 1


@pytest.mark.parametrize("case", list(BODY_CASES), ids=list(BODY_CASES))
def test_corrupt_body_file_is_a_miss(courier, origin, cache_dir, case):
    # Given a sound entry file whose body file is missing, changed, or not a regular file
    name = "body-" + str(list(BODY_CASES).index(case))
    body = pattern(300, name)
    url = origin.set_resource(name, body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    entry = only_entry(cache_dir)
    *_, body_id = read_entry(entry)
    BODY_CASES[case](body_path(entry, body_id), body)
    # When a fresh courier looks it up and downloads it (a FIFO must not block it)
    outcome = _check_fresh_courier(courier, origin, url, body)
    # Then the origin served the body, and what is stored now reads back whole
    assert outcome["source"] == "network" and origin.hits("/res/" + name) == 2
    _meta, _metadata, stored, new_id = read_entry(entry)
    assert stored == body and new_id != body_id
    assert not os.path.islink(body_path(entry, new_id))


def test_orphaned_and_foreign_files_beside_entries_are_harmless(courier, origin, cache_dir):
    # Given a stored entry, and beside it a body file no entry names, names
    # that look like body files but are not, and a directory named like an entry
    body = pattern(300, "beside")
    url = origin.set_resource("beside", body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    entry = only_entry(cache_dir)
    directory = os.path.dirname(entry)
    _write(entry + ".00000000000000ff", b"orphan")
    _write(entry + ".ZZZZZZZZZZZZZZZZ", b"not hex")
    _write(entry + ".0", b"short id")
    os.mkdir(os.path.join(directory, "f" * 64))
    os.symlink("/etc/passwd", os.path.join(directory, "e" * 64 + ".0000000000000001"))
    # Then a fresh courier serves the entry from disk, answers for the rest, and clears what is its own
    c = courier()
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["source"] == "disk" and outcome["bytes"] == body
    assert c.cache_stats()["disk"]["entries"] == 1
    assert c.cache_clear() == {"memory": 1, "disk": 1}
    assert not os.path.exists(entry) and not os.path.exists(entry + ".00000000000000ff")
    assert os.path.exists("/etc/passwd")
    assert_still_serving(c, origin)
