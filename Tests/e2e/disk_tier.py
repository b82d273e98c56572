"""The disk tier as a test reads and tampers with it: the ``responses`` rows
of ``Cache.db`` in the cache directory, and the body files in ``http/`` that
rows name for bodies longer than they keep inline."""
from __future__ import annotations

import os
import sqlite3

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
