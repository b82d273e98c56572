"""A hostile cache directory: what courier finds under `--cache-dir` (a
symbolic link where a directory should be, a planted journal, a FIFO, a file
where a directory should be, an entry whose lengths lie) never makes courier
delete, write or read anything outside the cache directory, never blocks or
stops it, and never makes it hold a stored body in memory it does not need.

Each case plants its trap, starts courier on the directory, has it do its
ordinary work (a download to a destination, one kept as a `path` file), and
checks a victim directory outside the cache file by file."""

from __future__ import annotations

import base64
import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest
import xxhash

import disk_tier
from origin import pattern

LONG = {"Cache-Control": "max-age=3600"}
MIB = 1 << 20
GIB = 1 << 30

# A dead process's owner name, as courier names its journals: <pid>-<nonce>.
DEAD_OWNER = "999999-abc"
DEAD_PARTIAL = ".data.courier-999999-abc.part"
ENTRY_NAME = "ab" * 32

# Files a user might have that are named like what courier keeps in its cache
# directory, all two hours old (older than any age at which courier deletes
# its own leftovers).
VICTIM_FILES = {
    "notes.txt": b"the user's notes",
    DEAD_OWNER: b"named like a journal",
    DEAD_OWNER + "-1-x.part": b"named like a body in transit",
    "report": b"named like a journal too",
    "report-2024.pdf": b"named like the body in transit of journal 'report'",
    ".tmp-999999-1": b"named like an entry being written",
    ENTRY_NAME: b"named like an entry file",
    ENTRY_NAME + ".0000000000000001": b"named like a body file",
    DEAD_PARTIAL: b"named like a partial file beside a destination",
    "downloads/999999/kept.bin": b"named like a dead process's path file",
    "999999/kept.bin": b"in a directory named like a dead process's downloads",
}


def make_victim(root: Path) -> Path:
    victim = root / "victim"
    for name, data in VICTIM_FILES.items():
        path = victim / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    old = time.time() - 7200
    for path in sorted(victim.rglob("*"), reverse=True):
        os.utime(path, (old, old))
    return victim


def snapshot(victim: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every name under the victim directory: its bytes (None for a
    directory) and its modification time."""
    found = {}
    for path in victim.rglob("*"):
        info = path.lstat()
        data = None if stat.S_ISDIR(info.st_mode) else path.read_bytes()
        found[str(path.relative_to(victim))] = (data, info.st_mtime_ns)
    return found


def assert_untouched(victim: Path, before: dict) -> None:
    after = snapshot(victim)
    for name in sorted(set(before) | set(after)):
        assert name in after, f"{name} was removed from the victim directory"
        assert name in before, f"{name} was created in the victim directory"
        assert after[name] == before[name], f"{name} was changed in the victim directory"


def write_journal(cache_dir: Path, owner: str, lines: list[str]) -> Path:
    journals = cache_dir / "journals"
    if not journals.is_symlink():
        journals.mkdir(exist_ok=True)
    path = journals / owner
    path.write_bytes("".join(line + "\n" for line in lines).encode())
    return path


def do_ordinary_work(c, origin, tmp_path: Path) -> None:
    """A download to a destination, a `path` file, and a cache store and hit:
    everything that writes to or reads from the cache directory."""
    body = pattern(3000, "ordinary")
    url = origin.set_resource("ordinary", body, LONG)
    destination = tmp_path / "out" / "ordinary.bin"
    destination.parent.mkdir(exist_ok=True)
    placed = c.fetch(url, body="none", destination=str(destination))
    assert placed["ok"] and destination.read_bytes() == body, placed
    kept = c.fetch(origin.url("/bytes/2000"), body="none")
    assert kept["ok"] and os.path.getsize(kept["path"]) == 2000, kept
    again = c.fetch(url, body="base64")
    assert again["ok"] and again["source"] in ("memory", "disk"), again


# ------------------------------------------------------------------ traps


def trap_journals_symlink(cache_dir: Path, victim: Path) -> None:
    (cache_dir / "journals").symlink_to(victim)


def trap_http_symlink(cache_dir: Path, victim: Path) -> None:
    (cache_dir / "http").symlink_to(victim)


def trap_tmp_symlink(cache_dir: Path, victim: Path) -> None:
    (cache_dir / "tmp").symlink_to(victim)
    write_journal(cache_dir, "report", [])
    write_journal(cache_dir, DEAD_OWNER, [])


def trap_downloads_symlink(cache_dir: Path, victim: Path) -> None:
    (cache_dir / "downloads").symlink_to(victim)
    write_journal(cache_dir, DEAD_OWNER, [])


def trap_journal_names_downloads_outside(cache_dir: Path, victim: Path) -> None:
    (cache_dir / "link").symlink_to(victim)
    write_journal(cache_dir, DEAD_OWNER, [
        f"downloads {victim}/downloads/999999",
        f"downloads {cache_dir}/link/downloads/999999",
        f"downloads {cache_dir}/link/999999",
    ])


def trap_journal_names_partials_outside(cache_dir: Path, victim: Path) -> None:
    (cache_dir / "link").symlink_to(victim)
    device, inode = os.stat(victim).st_dev, os.stat(victim).st_ino
    write_journal(cache_dir, DEAD_OWNER, [
        f"partial {victim}/{DEAD_PARTIAL}",
        f"partial {cache_dir}/link/{DEAD_PARTIAL}",
        # the record courier writes, but with another directory's identity
        f"partial {device} {inode + 1} {victim}/{DEAD_PARTIAL}",
        f"partial {device + 1} {inode} {victim}/{DEAD_PARTIAL}",
    ])


def trap_foreign_journal_names_partials(cache_dir: Path, victim: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file of another user needs root")
    device, inode = os.stat(victim).st_dev, os.stat(victim).st_ino
    journal = write_journal(cache_dir, DEAD_OWNER, [f"partial {device} {inode} {victim}/{DEAD_PARTIAL}"])
    os.chown(journal, 65534, 65534)


TRAPS = {
    "journals is a symlink": trap_journals_symlink,
    "http is a symlink": trap_http_symlink,
    "tmp is a symlink": trap_tmp_symlink,
    "downloads is a symlink": trap_downloads_symlink,
    "a journal names downloads outside": trap_journal_names_downloads_outside,
    "a journal names partial files outside": trap_journal_names_partials_outside,
    "another user's journal names a partial file": trap_foreign_journal_names_partials,
}


@pytest.mark.parametrize("trap", list(TRAPS), ids=list(TRAPS))
def test_nothing_outside_the_cache_directory_is_touched(courier, origin, cache_dir, tmp_path, trap):
    # Given a victim directory outside the cache, full of old files named
    # like the cache's own, and a trap in the cache directory pointing there
    victim = make_victim(tmp_path)
    TRAPS[trap](cache_dir, victim)
    before = snapshot(victim)

    # When courier starts on the cache directory and does its ordinary work
    c = courier()
    c.initialize()
    do_ordinary_work(c, origin, tmp_path)
    c.close()

    # Then not one file of the victim directory was removed, changed or added
    assert_untouched(victim, before)
    # and each directory courier uses is a directory of its own again
    for name in ("http", "tmp", "journals", "downloads"):
        path = cache_dir / name
        assert path.is_dir() and not path.is_symlink(), name


@pytest.mark.parametrize("name", ["tmp", "journals", "downloads", "http"])
@pytest.mark.parametrize("kind", ["file", "fifo", "dangling symlink"])
def test_something_else_where_a_directory_should_be_does_not_stop_courier(courier, origin, cache_dir, tmp_path,
                                                                          name, kind):
    # Given a plain file, a FIFO or a dangling symlink where courier keeps a directory
    path = cache_dir / name
    if kind == "file":
        path.write_bytes(b"not a directory")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(tmp_path / "nowhere")

    # When courier starts there
    c = courier()
    c.initialize()

    # Then it works as usual, the name is a directory again, and the log says so once
    do_ordinary_work(c, origin, tmp_path)
    assert path.is_dir() and not path.is_symlink()
    assert not (tmp_path / "nowhere").exists()
    c.close()
    lines = [line for line in c.stderr_text.splitlines() if f"/{name} " in line and "made a directory" in line]
    assert len(lines) == 1, c.stderr_text


@pytest.fixture
def immutable(tmp_path):
    """Sets the immutable attribute on paths (`chattr +i`: not even root may
    remove them) and clears it at teardown."""
    marked: list[Path] = []

    def mark(path: Path) -> None:
        made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"chattr +i is refused here: {made.stderr.strip()}")
        marked.append(path)

    yield mark
    for path in marked:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_disk_tier_that_cannot_be_opened_is_reported_and_memory_serves_alone(courier, origin, cache_dir,
                                                                                tmp_path, immutable):
    # Given a file courier may not remove where the disk tier's directory belongs
    http = cache_dir / "http"
    http.write_bytes(b"not a directory")
    immutable(http)

    # When courier starts there and is asked for its statistics and a response twice
    c = courier()
    stats = c.request("cache/stats", {})
    url = origin.set_resource("no-disk-tier", pattern(2000, "no-disk-tier"), LONG)
    first, second = c.fetch(url, body="base64"), c.fetch(url, body="base64")

    # Then the statistics say there is no disk tier (the messages are checked
    # against protocol/openrpc.json at teardown), the memory tier serves, and
    # the log says why
    assert stats["disk"] == {"usage": 0, "capacity": 0, "entries": 0, "path": None}, stats
    assert first["source"] == "network" and second["source"] == "memory"
    assert base64.b64decode(second["base64"]) == pattern(2000, "no-disk-tier")
    assert http.read_bytes() == b"not a directory"
    c.close()
    assert "disk cache unavailable" in c.stderr_text


def test_a_database_name_courier_may_not_clear_is_logged_as_such(courier, origin, cache_dir, tmp_path, immutable):
    # Given a directory courier may not remove where Cache.db belongs
    database = cache_dir / "Cache.db"
    database.mkdir()
    (database / "kept").write_bytes(b"kept")
    immutable(database)

    # When courier starts there and works
    c = courier()
    do_ordinary_work(c, origin, tmp_path)
    c.close()

    # Then the directory is still there, and the log does not claim it was removed
    assert (database / "kept").read_bytes() == b"kept"
    lines = [line for line in c.stderr_text.splitlines() if "Cache.db was not a file of this user's" in line]
    assert lines and all("could not remove it" in line for line in lines), c.stderr_text


def test_a_foreign_file_courier_may_not_remove_from_http_is_not_counted_as_removed(courier, origin, cache_dir,
                                                                                   tmp_path, immutable):
    # Given a file of an earlier format in http/ that courier may not remove
    (cache_dir / "http").mkdir()
    foreign = cache_dir / "http" / "an-earlier-entry"
    foreign.write_bytes(b"kept")
    immutable(foreign)

    # When courier starts there, logging notices, and works
    c = courier("--log-level", "notice")
    do_ordinary_work(c, origin, tmp_path)
    c.close()

    # Then the file stays, and the log does not count it among the removed
    assert foreign.read_bytes() == b"kept"
    assert "removed them" not in c.stderr_text, c.stderr_text


def test_a_cache_directory_courier_may_not_write_stops_it_at_start_with_the_reason(cache_dir, immutable):
    # Given a cache directory in which nothing may be made
    immutable(cache_dir)

    # When courier starts there
    from conftest import COURIER
    run = subprocess.run([COURIER, "--cache-dir", str(cache_dir), "--framing", "ndjson"], input=b"",
                         capture_output=True, timeout=30)

    # Then it exits with status 1 and says, in words, which directory it could not make
    assert run.returncode == 1, run
    reason = run.stderr.decode()
    assert f"cannot create {cache_dir}/" in reason and "Operation not permitted" in reason, reason
    assert 'io("' not in reason, reason


def test_a_fifo_among_the_journals_does_not_block_start_up(courier, origin, cache_dir, tmp_path):
    # Given FIFOs named like journals, live and dead, and a socket-like name
    journals = cache_dir / "journals"
    journals.mkdir()
    os.mkfifo(journals / DEAD_OWNER)
    os.mkfifo(journals / "1-live")

    # When courier starts
    c = courier()
    started = time.monotonic()
    c.initialize(timeout=5)

    # Then it answers at once and works, and the FIFOs are gone (nothing
    # but journals belongs there)
    assert time.monotonic() - started < 5
    do_ordinary_work(c, origin, tmp_path)
    assert not (journals / DEAD_OWNER).exists()
    assert not (journals / "1-live").exists()


# ------------------------------------------------------------------ lengths that lie


def xxh3_of_zeros(length: int) -> int:
    hasher = xxhash.xxh3_64()
    chunk = bytes(4 * MIB)
    left = length
    while left:
        piece = min(left, len(chunk))
        hasher.update(chunk[:piece] if piece < len(chunk) else chunk)
        left -= piece
    return hasher.intdigest()


def store_then_lie(courier, origin, cache_dir: Path, name: str, length: int, *, true_checksum: bool,
                   args: tuple[str, ...] = ()) -> tuple[str, bytes, Path]:
    """Lets a courier store a 16-byte response, then rewrites its row to
    claim a body of ``length`` bytes in a body file and makes that file that
    long (sparse: zeros). With ``true_checksum`` the row's checksum is that
    of the zeros, so the forged entry is sound and is served. Returns the
    URL, the origin's body, and the body file."""
    body = pattern(16, name)
    url = origin.set_resource(name, body, LONG)
    writer = courier(*args)
    assert writer.fetch(url)["source"] == "network"
    writer.close()
    checksum = xxh3_of_zeros(length) if true_checksum else 1
    body_id = 0x0123456789ABCDEF
    disk_tier.update(cache_dir, url, body_length=length, body_checksum=checksum - (1 << 64) if checksum >= 1 << 63 else checksum,
                     body_file=body_id, body=None)
    body_file = cache_dir / "http" / f"{body_id:016x}"
    with open(body_file, "wb") as f:
        f.truncate(length)
    return url, body, body_file


def peak_rss_mib(c) -> float:
    with open(f"/proc/{c.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_body_length_past_the_capacity_share_is_never_read(courier, origin, cache_dir, tmp_path):
    # Given an entry whose body length says 512 GiB, its body file as long
    # (sparse), under a disk capacity whose share (1/8) is 128 GiB
    args = ("--disk-capacity", "1TiB")
    url, body, body_file = store_then_lie(courier, origin, cache_dir, "huge", 512 * GIB, true_checksum=False, args=args)
    assert body_file.stat().st_size == 512 * GIB

    # When a fresh courier is asked for it
    c = courier(*args)
    outcome = c.fetch(url, body="base64", timeout=20)

    # Then the entry is not believed: the origin's body is served, and
    # courier stayed small
    assert outcome["ok"] and outcome["source"] == "network", outcome
    assert outcome["base64"] and len(outcome["base64"]) < 100
    rss = peak_rss_mib(c)
    print(f"512 GiB claimed, --disk-capacity 1TiB: peak RSS {rss:.1f} MiB")
    assert rss < 100


def test_a_lying_length_within_the_share_is_checked_in_bounded_chunks(courier, origin, cache_dir, tmp_path):
    # Given an entry claiming 60 MiB (within the default capacity's share,
    # past the memory tier's), whose checksum is not of those bytes
    url, body, _ = store_then_lie(courier, origin, cache_dir, "lying", 60 * MIB, true_checksum=False)

    # When a fresh courier is asked for it as a file
    c = courier()
    outcome = c.fetch(url, body="none", timeout=20)

    # Then the body was checked without being held: a miss, fetched anew
    assert outcome["ok"] and outcome["source"] == "network", outcome
    assert Path(outcome["path"]).read_bytes() == body
    rss = peak_rss_mib(c)
    print(f"60 MiB claimed, default capacity: peak RSS {rss:.1f} MiB")
    assert rss < 50


def test_a_body_length_past_the_default_share_is_never_read(courier, origin, cache_dir, tmp_path):
    # Given an entry claiming 400 MiB with the checksum of those bytes,
    # under the default capacity (512 MiB, a share of 64 MiB)
    url, body, _ = store_then_lie(courier, origin, cache_dir, "past-share", 400 * MIB, true_checksum=True)

    # When a fresh courier is asked for it
    c = courier()
    outcome = c.fetch(url, body="base64", timeout=20)

    # Then courier never stores such a body, so it does not believe one either
    assert outcome["ok"] and outcome["source"] == "network", outcome
    rss = peak_rss_mib(c)
    print(f"400 MiB claimed, default capacity: peak RSS {rss:.1f} MiB")
    assert rss < 100


@pytest.mark.parametrize("receipt", ["destination", "path"])
def test_a_large_stored_body_reaches_its_file_without_passing_through_memory(courier, origin, cache_dir, tmp_path,
                                                                            receipt):
    # Given a sound 300 MiB stored body
    size = 300 * MIB
    args = ("--disk-capacity", "4GiB")
    url, _, body_file = store_then_lie(courier, origin, cache_dir, "large", size, true_checksum=True, args=args)

    # When a fresh courier serves it to a destination, or as a `path` file
    c = courier(*args)
    params = {"destination": str(tmp_path / "large.bin")} if receipt == "destination" else {}
    outcome = c.fetch(url, body="none", timeout=60, **params)

    # Then the file holds the body, and courier's memory did not grow by it
    assert outcome["ok"] and outcome["source"] == "disk" and outcome["size"] == size, outcome
    assert os.path.getsize(outcome["path"]) == size
    rss = peak_rss_mib(c)
    print(f"300 MiB disk hit to a {receipt}: peak RSS {rss:.1f} MiB")
    assert rss < 100
    # and the stored entry is still sound
    again = c.fetch(url, body="none", timeout=60)
    assert again["ok"] and again["source"] in ("disk", "memory"), again


# -- Cache.db, the disk tier's index -------------------------------------------------


def store_two(courier, origin, cache_dir: Path, prefix: str) -> dict[str, bytes]:
    """Lets one courier store a small body (inline) and a large one (a body
    file); the URLs and bodies."""
    bodies = {}
    writer = courier()
    for name, size in ((f"{prefix}-small", 1000), (f"{prefix}-large", disk_tier.INLINE_LIMIT + 1000)):
        body = pattern(size, name)
        url = origin.set_resource(name, body, LONG)
        assert writer.fetch(url)["source"] == "network"
        bodies[url] = body
    writer.close()
    assert disk_tier.usage(cache_dir)[1] == 2 and len(disk_tier.body_files(cache_dir)) == 1
    return bodies


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "foreign", "a symbolic link", "older schema"])
def test_a_damaged_or_foreign_database_is_a_miss_never_a_wrong_body(courier, origin, cache_dir, tmp_path, damage):
    # Given stored responses, then a Cache.db damaged, another program's, a link, or of schema 1
    bodies = store_two(courier, origin, cache_dir, "db-" + damage.split()[-1])
    database = cache_dir / "Cache.db"
    outside = tmp_path / "outside.db"
    if damage in ("corrupt", "truncated"):
        with disk_tier.connect(cache_dir) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if damage == "corrupt":
            with open(database, "r+b") as file:
                file.write(os.urandom(4 * 4096))
        else:
            os.truncate(database, 100)
    elif damage == "foreign":
        database.unlink()
        connection = sqlite3.connect(database)
        connection.execute("CREATE TABLE responses (key BLOB, body BLOB)")
        connection.execute("INSERT INTO responses VALUES (?, x'00')", (disk_tier.key_of(next(iter(bodies))),))
        connection.commit()
        connection.close()
    elif damage == "a symbolic link":
        database.unlink()
        outside.write_bytes(b"someone else's file")
        os.symlink(outside, database)
    else:
        with disk_tier.connect(cache_dir) as db:
            db.execute("DROP TABLE responses")
            db.execute("DROP TABLE response_usage")
            db.execute("PRAGMA user_version = 1")

    # When a fresh courier is asked for them
    c = courier()
    outcomes = {url: c.fetch(url, body="base64") for url in bodies}

    # Then each is the origin's body (fetched again: nothing stored was believed), and courier keeps serving
    for url, outcome in outcomes.items():
        assert outcome["ok"] and outcome["source"] == "network", outcome
        assert base64.b64decode(outcome["base64"]) == bodies[url]
    again = c.fetch(next(iter(bodies)), body="base64")
    assert again["source"] in ("memory", "disk")
    # And the database is courier's own again, the old body file gone, a link's target untouched
    assert database.is_file() and not database.is_symlink() and stat.S_IMODE(database.stat().st_mode) == 0o600
    assert disk_tier.usage(cache_dir)[1] == 2 and len(disk_tier.body_files(cache_dir)) == 1
    if damage == "a symbolic link":
        assert outside.read_bytes() == b"someone else's file"
    if damage != "older schema":
        assert "Cache.db" in c.stderr_text


def test_a_database_damaged_while_courier_runs_is_made_anew(courier, origin, cache_dir):
    # Given a running courier with stored responses, its memory tier off
    bodies = store_two(courier, origin, cache_dir, "running")
    c = courier("--memory-capacity", "0")
    assert all(c.fetch(url)["source"] == "disk" for url in bodies)

    # When another program overwrites the database's pages under it
    with open(cache_dir / "Cache.db", "r+b") as file:
        size = os.path.getsize(cache_dir / "Cache.db")
        file.seek(4096)
        file.write(b"\xff" * max(0, size - 4096))
    wal = cache_dir / "Cache.db-wal"
    if wal.exists():
        with open(wal, "r+b") as file:
            file.write(b"\xff" * os.path.getsize(wal))

    # Then every answer is the origin's body or a stored one that is right, and courier keeps serving
    for _ in range(2):
        for url, body in bodies.items():
            outcome = c.fetch(url, body="base64")
            assert outcome["ok"] and base64.b64decode(outcome["base64"]) == body, outcome
    assert c.alive
