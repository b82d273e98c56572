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

import pytest
import xxhash

import disk_tier
from origin import pattern

LONG = {"Cache-Control": "max-age=3600"}
# ------------------------------------------------------------------ XXH3-64


def xxh3(data: bytes) -> int:
    """XXH3-64 as the disk cache checksums entries (seed 0), from the xxhash
    package's own copy of the reference implementation."""
    return xxhash.xxh3_64_intdigest(data)


def test_xxh3_reference_values():
    assert xxh3(b"") == 0x2D06800538D394C2
    assert xxh3(b"abc") == 0x78AF5F94892F3950
    assert xxh3(b"Nobody inspects the spammish repetition") == 0x6CB00603B5CC47E9


# ------------------------------------------------------------------ rows


def signed(value: int) -> int:
    """A 64-bit checksum as SQLite keeps it: a signed integer."""
    return value - (1 << 64) if value >= 1 << 63 else value


def only_row(cache_dir):
    """The one row courier has written, its head's checksum checked
    against our own XXH3-64."""
    with disk_tier.connect(cache_dir) as db:
        rows = db.execute("SELECT * FROM responses").fetchall()
    assert len(rows) == 1, rows
    assert signed(xxh3(rows[0]["head"])) == rows[0]["head_checksum"], "XXH3-64 differs from courier's"
    return rows[0]


def set_head(cache_dir, url: str, head: bytes) -> None:
    """Replaces ``url``'s stored head, with the checksum of the new bytes."""
    disk_tier.update(cache_dir, url, head=head, head_checksum=signed(xxh3(head)))


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


def _flipped(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 1]) + data[index + 1:]


def _json(head: bytes) -> bytes:
    """A binary head as the JSON text earlier couriers wrote for it."""
    return disk_tier.json_head(disk_tier.decode_head(head))


# Rows another program changed: ``url``'s row → the columns it sets.
def _head(make):
    """A head of ``make(head)``'s bytes, its checksum recomputed, so the
    head's parser is what turns it away."""
    return lambda row: {"head": make(row["head"]), "head_checksum": signed(xxh3(make(row["head"])))}


ROW_CASES = {
    "body length 2^63-1": lambda row: {"body_length": 2 ** 63 - 1},
    "body length -1": lambda row: {"body_length": -1},
    "body length one more": lambda row: {"body_length": row["body_length"] + 1},
    "body length 0": lambda row: {"body_length": 0, "body_checksum": signed(xxh3(b""))},
    "wrong head checksum": lambda row: {"head_checksum": row["head_checksum"] ^ 1},
    "wrong body checksum": lambda row: {"body_checksum": row["body_checksum"] ^ 1},
    "a body file named too": lambda row: {"body_file": 1},
    "no body": lambda row: {"body": None},
    "body as text": lambda row: {"body": row["body"].decode("latin-1")},
    "head as text": lambda row: {"head": row["head"].decode("latin-1")},
    "head checksum as text": lambda row: {"head_checksum": "0"},
    "a byte of the head changed": lambda row: {"head": _flipped(row["head"], len(row["head"]) // 2)},
    "head cut": _head(lambda head: head[:-1]),
    "head a byte longer": _head(lambda head: head + b"\x00"),
    "head empty": _head(lambda head: b""),
    "head random bytes": _head(lambda head: pattern(4096, "random")),
    "head magic alone": _head(lambda head: disk_tier.HEAD_MAGIC),
    "head of another version": _head(lambda head: b"\x00CH\x02" + head[4:]),
    "head key length past the end": _head(lambda head: head[:30] + b"\xff\xff\xff\xff" + head[34:]),
    "head 1e400": _head(lambda head: _json(head).replace(b'"requestTime":', b'"requestTime":1e400,"x":')),
    "head NaN": _head(lambda head: _json(head).replace(b'"requestTime":', b'"requestTime":NaN,"x":')),
    "head integer past 64 bits": _head(lambda head: _json(head).replace(b'"status":', b'"status":99999999999999999999999,"x":')),
    "head not JSON": _head(lambda head: b"{" * 1000),
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


def _store_and_corrupt(courier, origin, cache_dir, name: str, change) -> tuple[str, bytes, int]:
    """Lets one courier store ``name``, sets the columns ``change(row)``
    gives in its row, and returns (url, body, origin hits)."""
    body = pattern(300, name)
    url = origin.set_resource(name, body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    row = only_row(cache_dir)
    assert row["body"] == body and signed(xxh3(body)) == row["body_checksum"]
    disk_tier.update(cache_dir, url, **change(row))
    return url, body, origin.hits("/res/" + name)


def _metadata_file(change):
    """The head as the JSON text earlier couriers wrote, changed by ``change``."""
    def make(head: bytes) -> bytes:
        meta = disk_tier.decode_head(head)
        meta["bytes"] = {name: base64.b64encode(value).decode() for name, value in meta["bytes"].items()}
        meta["digests"] = {name: base64.b64encode(value).decode() for name, value in meta["digests"].items()}
        return json.dumps(change(meta), separators=(",", ":")).encode()
    return _head(make)


def _binary_head(change):
    """The binary head, changed by ``change`` (fields as `disk_tier.decode_head` gives them)."""
    return _head(lambda head: change(disk_tier.decode_head(head)))


def _check_fresh_courier(courier, origin, url: str, body: bytes) -> dict:
    c = courier()
    assert_lookup_answers(c, url)
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["bytes"] == body
    assert_lookup_answers(c, url)
    assert_still_serving(c, origin)
    return outcome


@pytest.mark.parametrize("form", ["binary", "json"])
def test_rewritten_entry_is_served(courier, origin, cache_dir, form):
    # Given an entry rewritten unchanged by this file's own writer, in the
    # binary form or the JSON text earlier couriers wrote
    change = _binary_head(disk_tier.encode_head) if form == "binary" else _metadata_file(lambda m: m)
    url, body, hits = _store_and_corrupt(courier, origin, cache_dir, "control-" + form, change)
    # Then a fresh courier serves it from disk: the format and XXH3-64 agree
    outcome = _check_fresh_courier(courier, origin, url, body)
    assert outcome["source"] == "disk" and origin.hits("/res/control-" + form) == hits


def _binary_set(field, value):
    def change(meta: dict) -> bytes:
        meta[field] = value
        return disk_tier.encode_head(meta)
    return change


def _header_count(meta: dict, count: int) -> bytes:
    """The binary head with its count of header lines set to ``count``."""
    head = disk_tier.encode_head(meta)
    offset = 4 + 2 + 3 * 8 + 4 + len(meta["key"].encode()) + 4 + len(meta["url"].encode())
    return head[:offset] + count.to_bytes(4, "little") + head[offset + 4:]


# Binary heads that are checksummed and whole, but hold values courier never writes.
BINARY_HEAD_CASES = {
    "status 0": _binary_set("status", 0),
    "status 99": _binary_set("status", 99),
    "status 1000": _binary_set("status", 1000),
    "status 65535": _binary_set("status", 65535),
    "requestTime NaN": _binary_set("requestTime", float("nan")),
    "responseTime infinite": _binary_set("responseTime", float("inf")),
    "storedAt before 1970": _binary_set("storedAt", -1.0),
    "responseTime year 10000": _binary_set("responseTime", 253402300800.0),
    "requestTime 1e308": _binary_set("requestTime", 1e308),
    "url not UTF-8": _binary_set("url", b"http://o/\xff"),
    "header value with CRLF": _binary_set("headers", [["x", "a\r\nset-cookie: y"]]),
    "header value with NUL": _binary_set("headers", [["x", "a\u0000b"]]),
    "header name with space": _binary_set("headers", [["a b", "c"]]),
    "header name empty": _binary_set("headers", [["", "c"]]),
    "vary value with LF": _binary_set("vary", {"accept": "a\nb"}),
    "validator bytes of another field": _binary_set("bytes", {"x-other": b"a"}),
    "validator bytes with CR": _binary_set("bytes", {"etag": b'"\r"'}),
    "digest of another length": _binary_set("digests", {"sha256": b"\x00" * 31}),
    "digest of an unknown algorithm": _binary_set("digests", {"md5": b"\x00" * 16}),
    "header count past the end": lambda meta: _header_count(meta, 0x7FFFFFFF),
    "header count one past the end": lambda meta: _header_count(meta, len(meta["headers"]) + 1),
}


@pytest.mark.parametrize("case", list(BINARY_HEAD_CASES), ids=list(BINARY_HEAD_CASES))
def test_absurd_binary_head_is_a_miss(courier, origin, cache_dir, case):
    # Given an entry whose checksummed binary head holds values courier never writes
    name = "binary-" + str(list(BINARY_HEAD_CASES).index(case))
    url, body, hits = _store_and_corrupt(courier, origin, cache_dir, name, _binary_head(BINARY_HEAD_CASES[case]))
    # When a fresh courier looks it up and downloads it
    outcome = _check_fresh_courier(courier, origin, url, body)
    # Then the entry was not believed: the origin served the body
    assert outcome["source"] == "network" and origin.hits("/res/" + name) == hits + 1


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


@pytest.mark.parametrize("case", list(ROW_CASES), ids=list(ROW_CASES))
def test_corrupt_row_is_a_miss(courier, origin, cache_dir, case):
    # Given a row whose lengths, checksums, types or head are broken
    name = "row-" + str(list(ROW_CASES).index(case))
    url, body, hits = _store_and_corrupt(courier, origin, cache_dir, name, ROW_CASES[case])
    # When a fresh courier looks it up and downloads it
    outcome = _check_fresh_courier(courier, origin, url, body)
    # Then the origin served the body
    assert outcome["source"] == "network" and origin.hits("/res/" + name) == hits + 1


@pytest.mark.parametrize("case", list(BODY_CASES), ids=list(BODY_CASES))
def test_corrupt_body_file_is_a_miss(courier, origin, cache_dir, case):
    # Given a sound row whose body file is missing, changed, or not a regular file
    name = "body-" + str(list(BODY_CASES).index(case))
    body = pattern(disk_tier.INLINE_LIMIT + 300, name)
    url = origin.set_resource(name, body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    path = disk_tier.body_file(cache_dir, url)
    BODY_CASES[case](path, body)
    # When a fresh courier looks it up and downloads it (a FIFO must not block it)
    outcome = _check_fresh_courier(courier, origin, url, body)
    # Then the origin served the body, and what is stored now reads back whole
    assert outcome["source"] == "network" and origin.hits("/res/" + name) == 2
    stored = disk_tier.body_file(cache_dir, url)
    assert stored != path and not os.path.islink(stored)
    with open(stored, "rb") as f:
        assert f.read() == body


def test_orphaned_and_foreign_files_beside_body_files_are_harmless(courier, origin, cache_dir, tmp_path):
    # Given a stored body file, and beside it a body file no row names,
    # names courier does not give, a directory and symbolic links
    body = pattern(disk_tier.INLINE_LIMIT + 300, "beside")
    url = origin.set_resource("beside", body, LONG)
    writer = courier()
    assert fetch(writer, url)["source"] == "network"
    writer.close()
    stored = disk_tier.body_file(cache_dir, url)
    directory = os.path.dirname(stored)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "kept").write_bytes(b"victim")
    _write(os.path.join(directory, "00000000000000ff"), b"orphan")
    _write(os.path.join(directory, "ZZZZZZZZZZZZZZZZ"), b"not hex")
    _write(os.path.join(directory, "e" * 64), b"an entry file of the earlier format")
    os.mkdir(os.path.join(directory, "f" * 16))
    os.symlink(str(victim), os.path.join(directory, "0000000000000001"))
    os.symlink("/etc/passwd", os.path.join(directory, "0000000000000002"))
    # Then a fresh courier removes them (nothing they point at), serves the entry from disk, and clears it
    c = courier()
    outcome = fetch(c, url)
    assert outcome["ok"] and outcome["source"] == "disk" and outcome["bytes"] == body
    assert sorted(os.listdir(directory)) == [os.path.basename(stored)]
    assert c.cache_stats()["disk"]["entries"] == 1
    assert c.cache_clear() == {"memory": 1, "disk": 1}
    assert os.listdir(directory) == []
    assert os.path.exists("/etc/passwd") and (victim / "kept").read_bytes() == b"victim"
    assert_still_serving(c, origin)
