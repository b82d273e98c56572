"""The disk tier as a test reads and tampers with it: the ``responses`` rows
of ``Cache.db`` in the cache directory, and the body files in ``http/`` that
rows name for bodies longer than they keep inline."""
from __future__ import annotations

import base64
import json
import os
import sqlite3
import struct

INLINE_LIMIT = 64 * 1024


def key_of(url: str) -> bytes:
    """A URL's key: ``url `` and the URL's bytes with all but printable ASCII
    (and ``%``) as %XX."""
    escaped = "".join(chr(b) if 0x20 < b < 0x7F and b != 0x25 else f"%{b:02X}" for b in url.encode())
    return ("url " + escaped).encode()


def connect(cache_dir) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(str(cache_dir), "Cache.db"), timeout=10, isolation_level=None)
    db.row_factory = sqlite3.Row
    return db


def row(cache_dir, url: str) -> sqlite3.Row | None:
    """``url``'s row: id, size, body_length, body_checksum, body_file, head, body."""
    with connect(cache_dir) as db:
        return db.execute("SELECT * FROM responses WHERE key = ?", (key_of(url),)).fetchone()


def digests(cache_dir, url: str) -> sqlite3.Row | None:
    """``url``'s recorded digests (``sha256``, ``sha384``, ``sha512``, each
    NULL when not recorded), from ``response_digests``; None when it has
    none."""
    with connect(cache_dir) as db:
        return db.execute("SELECT response_digests.* FROM response_digests JOIN responses USING (id) WHERE key = ?",
                          (key_of(url),)).fetchone()


def body_file(cache_dir, url: str) -> str | None:
    """The path of ``url``'s body file, when its body is not inline."""
    found = row(cache_dir, url)
    if found is None or found["body_file"] is None:
        return None
    return os.path.join(str(cache_dir), "http", f"{found['body_file'] & 0xFFFFFFFFFFFFFFFF:016x}")


def body_files(cache_dir) -> list[str]:
    """Every file in ``http/``."""
    directory = os.path.join(str(cache_dir), "http")
    return sorted(os.path.join(directory, name) for name in os.listdir(directory))


def entry_cost(cache_dir, url: str) -> int:
    """What ``url``'s entry counts against the capacity: its head and body."""
    found = row(cache_dir, url)
    return found["size"] if found else 0


def usage(cache_dir) -> tuple[int, int]:
    """The bytes and entries all rows count."""
    with connect(cache_dir) as db:
        bytes_, entries = db.execute("SELECT total(size), count(*) FROM responses").fetchone()
        return int(bytes_), entries


def update(cache_dir, url: str, **columns) -> None:
    """Sets columns of ``url``'s row, as another program could."""
    names = ", ".join(f"{name} = ?" for name in columns)
    with connect(cache_dir) as db:
        changed = db.execute(f"UPDATE responses SET {names} WHERE key = ?", (*columns.values(), key_of(url))).rowcount
    assert changed == 1, f"no row for {url}"


# ------------------------------------------------------------------ heads

HEAD_MAGIC = b"\x00CH\x01"
# Seconds from 1970 to 2001, the reference of the times a binary head holds.
_REFERENCE = 978307200.0


def decode_head(head: bytes) -> dict:
    """A stored head, binary or the JSON earlier couriers wrote, as the
    JSON form's object: ``key``, ``url``, ``status``, ``headers`` (pairs),
    ``vary``, ``requestTime``, ``responseTime``, ``storedAt`` (seconds since
    1970), ``bytes`` (name → validator bytes) and ``digests`` (algorithm →
    digest bytes)."""
    if not head.startswith(HEAD_MAGIC):
        meta = json.loads(head)
        meta["bytes"] = {name: base64.b64decode(value) for name, value in meta.get("bytes", {}).items()}
        meta["digests"] = {name: base64.b64decode(value) for name, value in meta.get("digests", {}).items()}
        return meta
    offset = len(HEAD_MAGIC)

    def take(fmt: str):
        nonlocal offset
        values = struct.unpack_from("<" + fmt, head, offset)
        offset += struct.calcsize("<" + fmt)
        return values[0]

    def length_prefixed() -> bytes:
        nonlocal offset
        length = take("I")
        offset += length
        return head[offset - length:offset]

    def pairs() -> list[tuple[bytes, bytes]]:
        return [(length_prefixed(), length_prefixed()) for _ in range(take("I"))]

    meta = {"status": take("H")}
    for name in ("requestTime", "responseTime", "storedAt"):
        meta[name] = take("d") + _REFERENCE
    meta["key"] = length_prefixed().decode()
    meta["url"] = length_prefixed().decode()
    meta["headers"] = [[name.decode(), value.decode()] for name, value in pairs()]
    meta["vary"] = {name.decode(): value.decode() for name, value in pairs()}
    meta["bytes"] = {name.decode(): value for name, value in pairs()}
    meta["digests"] = {name.decode(): value for name, value in pairs()}
    assert offset == len(head), "bytes after the head"
    return meta


def encode_head(meta: dict) -> bytes:
    """``meta`` (as `decode_head` gives it) as a binary head, whatever its
    values: a test's way to write what another program could."""
    def string(value) -> bytes:
        data = value.encode() if isinstance(value, str) else bytes(value)
        return struct.pack("<I", len(data)) + data

    def pairs(items) -> bytes:
        items = list(items)
        return struct.pack("<I", len(items)) + b"".join(string(name) + string(value) for name, value in items)

    head = HEAD_MAGIC + struct.pack("<H", meta["status"])
    head += b"".join(struct.pack("<d", meta[name] - _REFERENCE) for name in ("requestTime", "responseTime", "storedAt"))
    head += string(meta["key"]) + string(meta["url"]) + pairs(meta["headers"]) + pairs(meta["vary"].items())
    return head + pairs(meta["bytes"].items()) + pairs(meta["digests"].items())


def json_head(meta: dict) -> bytes:
    """``meta`` as the JSON text earlier couriers wrote."""
    meta = dict(meta)
    meta["bytes"] = {name: base64.b64encode(value).decode() for name, value in meta.get("bytes", {}).items()}
    meta["digests"] = {name: base64.b64encode(value).decode() for name, value in meta.get("digests", {}).items()}
    if not meta["bytes"]:
        del meta["bytes"]
    return json.dumps(meta, separators=(",", ":"), sort_keys=True).encode()
