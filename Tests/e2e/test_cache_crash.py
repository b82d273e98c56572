"""The disk tier under crashes and sharing (issue 4): courier is killed with
SIGKILL in the middle of 200 concurrent cache writes, 20 rounds on one cache
directory, and every body a restarted courier serves is checked against the
origin's bytes; a deliberately corrupted entry is never served; three courier
processes share one small cache directory, evicting concurrently."""

from __future__ import annotations

import base64
import hashlib
import math
import os
import random
import signal
import struct
import threading
import time

KIB = 1024
ROUNDS = 20
PER_ROUND = 200
LONG = {"Cache-Control": "max-age=3600"}


def body_for(name: str, size: int) -> bytes:
    return random.Random(name).randbytes(size)


def log_uniform_size(rng: random.Random, low: int, high: int) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def entry_path(cache_dir, url: str) -> str:
    """The entry file of ``url``'s response: named by the SHA-256 of its key,
    ``url `` and the URL's bytes with all but printable ASCII (and ``%``) as %XX."""
    escaped = "".join(chr(b) if 0x20 < b < 0x7F and b != 0x25 else f"%{b:02X}" for b in url.encode())
    return os.path.join(str(cache_dir), "http", hashlib.sha256(("url " + escaped).encode()).hexdigest())


def body_path(entry: str) -> str:
    """The body file an entry file names: the body id at offset 40 of its
    header, as 16 hex digits after the entry file's name and a dot."""
    with open(entry, "rb") as file:
        file.seek(40)
        (body_id,) = struct.unpack("<Q", file.read(8))
    return f"{entry}.{body_id:016x}"


def served_bytes(outcome: dict) -> bytes:
    if outcome.get("base64") is not None:
        return base64.b64decode(outcome["base64"])
    with open(outcome["path"], "rb") as file:
        return file.read()


def download_all(c, urls: list[str], timeout: float = 60, **params) -> list[dict]:
    """Sends one `download` a URL in a single batch; the outcomes, in order."""
    responses = c.batch([("download", {"url": url, **params}) for url in urls], timeout=timeout)
    receipts = []
    for response in responses:
        assert "result" in response, response
        receipts.append(response["result"]["receipt"])
    outcomes = c.wait_all(receipts, timeout=timeout)
    return [outcomes[r] for r in receipts]


class Tally:
    def __init__(self) -> None:
        self.checked = 0
        self.bad: list[str] = []
        self.lock = threading.Lock()

    def check(self, url: str, outcome: dict, expected: bytes) -> None:
        served = served_bytes(outcome)
        with self.lock:
            self.checked += 1
            if served != expected or outcome["size"] != len(expected):
                self.bad.append(f"{url} via {outcome['source']}: {len(served)} bytes, "
                                f"expected {len(expected)}")


def test_sigkill_during_concurrent_cache_writes_never_serves_a_torn_entry(
        courier, origin, cache_dir, capsys):
    rng = random.Random(4)
    tally = Tally()
    served_from_cache = 0
    expected: dict[str, bytes] = {}
    previous_round: list[str] = []
    unfinished = torn_writes = 0
    args = ("--max-active", "32", "--disk-capacity", "48MiB")
    started = time.monotonic()

    for round_ in range(ROUNDS):
        urls = []
        for i in range(PER_ROUND):
            name = f"k{round_:02}-{i:03}"
            body = body_for(name, log_uniform_size(rng, KIB, 512 * KIB))
            urls.append(origin.set_resource(name, body, LONG))
            expected[urls[-1]] = body

        writer = courier(*args, validate="none")
        writer.batch([("download", {"url": url}) for url in urls])
        threshold = rng.randrange(20, 80)
        writer.wait_until(lambda: len(writer.finished_order) >= threshold, timeout=30,
                          what=f"{threshold} finished downloads")
        in_flight = PER_ROUND - len(writer.finished_order)
        os.kill(writer.pid, signal.SIGKILL)
        assert writer.wait_exit(10) == -signal.SIGKILL
        assert in_flight > 0, "every download had finished before the kill"
        unfinished += in_flight
        torn_writes += sum(name.startswith(".tmp-") for name in os.listdir(os.path.join(str(cache_dir), "http")))

        reader = courier(*args, validate="none")
        for url, outcome in zip(previous_round + urls,
                                download_all(reader, previous_round + urls, cachePolicy="cacheOnly")):
            if outcome["ok"]:
                assert outcome["source"] == "disk", outcome
                served_from_cache += 1
                tally.check(url, outcome, expected[url])
            else:
                assert outcome["error"]["code"] == "not_cached", outcome
        for url, outcome in zip(urls, download_all(reader, urls, cachePolicy="default")):
            assert outcome["ok"], outcome
            tally.check(url, outcome, expected[url])
        assert reader.close() == 0
        for url in previous_round:
            del expected[url]
            origin.remove_resource(url.rsplit("/", 1)[1])
        previous_round = urls

    # A corrupted entry is dropped and fetched again, never served.
    victims = previous_round[:2]
    for index, url in enumerate(victims):
        entry = entry_path(cache_dir, url)
        assert os.path.exists(entry), "the last round's bodies were all stored"
        # The body file's last byte, then a byte of the entry file's metadata
        path = body_path(entry) if index == 0 else entry
        with open(path, "r+b") as file:
            offset = os.path.getsize(path) - 1 if index == 0 else 48 + 3
            file.seek(offset)
            byte = file.read(1)
            file.seek(offset)
            file.write(bytes([byte[0] ^ 0xFF]))
    hits_before = {url: origin.hits("/res/" + url.rsplit("/", 1)[1]) for url in victims}
    reader = courier(*args, validate="none")
    for outcome in download_all(reader, victims, cachePolicy="cacheOnly", body="base64"):
        assert outcome["ok"] is False and outcome["error"]["code"] == "not_cached", outcome
    for url, outcome in zip(victims, download_all(reader, victims, body="base64")):
        assert outcome["ok"] and outcome["source"] == "network", outcome
        tally.check(url, outcome, expected[url])
        assert origin.hits("/res/" + url.rsplit("/", 1)[1]) == hits_before[url] + 1
    reader.cache_clear(memory=True, disk=False)
    for url, outcome in zip(victims, download_all(reader, victims, cachePolicy="cacheOnly", body="base64")):
        assert outcome["ok"] and outcome["source"] == "disk"
        tally.check(url, outcome, expected[url])
    assert reader.close() == 0

    summary = (f"kill test: rounds {ROUNDS}, bodies checked {tally.checked} "
               f"({served_from_cache} from the cache after a kill), bad bodies {len(tally.bad)}; "
               f"downloads unfinished at the kills {unfinished}, cache writes cut short {torn_writes}; "
               f"{time.monotonic() - started:.1f} s")
    with capsys.disabled():
        print("\n" + summary)
    assert tally.bad == []
    assert served_from_cache >= ROUNDS * 20, "too few bodies survived the kills to prove anything"


def test_three_processes_share_one_small_cache_directory(courier, origin, cache_dir, capsys):
    rng = random.Random(5)
    urls: list[str] = []
    expected: dict[str, bytes] = {}
    for i in range(60):
        name = f"mp{i:02}"
        body = body_for(name, log_uniform_size(rng, KIB, 30 * KIB))
        urls.append(origin.set_resource(name, body, LONG))
        expected[urls[-1]] = body

    args = ("--disk-capacity", "256KiB", "--memory-capacity", "64KiB",
            "--memory-after-purge", "32KiB", "--max-active", "8")
    sessions = [courier(*args, validate="sample") for _ in range(3)]
    tally = Tally()
    errors: list[BaseException] = []
    served = {"network": 0, "memory": 0, "disk": 0, "revalidated": 0}
    policies = ("default", "default", "cacheElseLoad", "cacheOnly", "reload")

    def work(index: int) -> None:
        local = random.Random(index)
        mine = [urls[(index * 20 + k) % 60] for k in range(40)]
        session = sessions[index]
        try:
            for pass_ in range(6):
                order = local.sample(mine, len(mine))
                policy = local.choice(policies)
                body = local.choice(("none", "base64"))
                for url, outcome in zip(order, download_all(session, order, cachePolicy=policy, body=body)):
                    if not outcome["ok"]:
                        assert policy == "cacheOnly" and outcome["error"]["code"] == "not_cached", outcome
                        continue
                    with tally.lock:
                        served[outcome["source"]] += 1
                    tally.check(url, outcome, expected[url])
                if pass_ % 2:
                    session.cache_clear(memory=True, disk=False)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
    assert errors == [], errors[0]

    codes = [session.close(timeout=10) for session in sessions]
    summary = (f"multi-process test: 3 processes, bodies checked {tally.checked} "
               f"({served}), bad bodies {len(tally.bad)}, exit codes {codes}")
    with capsys.disabled():
        print("\n" + summary)
    assert tally.bad == []
    assert codes == [0, 0, 0]
    assert served["disk"] > 0 and served["network"] > 0
    directory = os.path.join(str(cache_dir), "http")
    files = os.listdir(directory)
    assert not [name for name in files if name.startswith(".tmp-")], "temporary files left behind"
    # Each process counts the others' writes only when it rescans, so the
    # directory may pass the capacity for a while, never by much.
    assert sum(os.path.getsize(os.path.join(directory, n)) for n in files) <= 2 * 256 * KIB

    # What the three left behind is intact: a new process serves it correctly.
    check = courier(*args)
    for url, outcome in zip(urls, download_all(check, urls, cachePolicy="cacheOnly", body="base64")):
        if outcome["ok"]:
            assert outcome["source"] == "disk"
            tally.check(url, outcome, expected[url])
    assert tally.bad == []
