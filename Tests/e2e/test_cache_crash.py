"""The disk tier under crashes and sharing: courier is killed with
SIGKILL in the middle of 200 concurrent cache writes, 20 rounds on one cache
directory, and every body a restarted courier serves is checked against the
origin's bytes; a deliberately corrupted entry is never served; three courier
processes share one small cache directory, evicting concurrently."""

from __future__ import annotations

import base64
import math
import os
import random
import signal
import threading
import time

import disk_tier

KIB = 1024
ROUNDS = 20
PER_ROUND = 200
LONG = {"Cache-Control": "max-age=3600"}


def body_for(name: str, size: int) -> bytes:
    return random.Random(name).randbytes(size)


def log_uniform_size(rng: random.Random, low: int, high: int) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


def unnamed_body_files(cache_dir) -> int:
    """Files in ``http/`` that no row names: what a writer killed between
    naming its body file and committing its row leaves."""
    with disk_tier.connect(cache_dir) as db:
        named = {f"{file & 0xFFFFFFFFFFFFFFFF:016x}" for (file,) in
                 db.execute("SELECT body_file FROM responses WHERE body_file IS NOT NULL")}
    return len(set(os.listdir(os.path.join(str(cache_dir), "http"))) - named)


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
        threshold = rng.randrange(20, 80)
        seen = 0

        def kill_at_threshold(_method, _params):
            # On the reader thread, as the threshold-th outcome is read: a
            # busy test thread cannot let the rest finish first.
            nonlocal seen
            seen += 1
            if seen == threshold:
                os.kill(writer.pid, signal.SIGKILL)

        writer.on_notification(kill_at_threshold, "download/finished")
        writer.batch([("download", {"url": url}) for url in urls])
        assert writer.wait_exit(30) == -signal.SIGKILL, f"not killed after {threshold} finished downloads"
        in_flight = PER_ROUND - len(writer.finished_order)
        assert in_flight > 0, "every download had finished before the kill"
        unfinished += in_flight
        torn_writes += unnamed_body_files(cache_dir)

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

    # A corrupted entry is dropped and fetched again, never served: a body
    # file's last byte, a byte of a body kept inline, a byte of a stored head.
    in_files = [url for url in previous_round if disk_tier.body_file(cache_dir, url)]
    inline = [url for url in previous_round if disk_tier.row(cache_dir, url) and url not in in_files]
    assert in_files and len(inline) >= 2, "the last round's bodies were all stored"
    victims = [in_files[0], inline[0], inline[1]]
    path = disk_tier.body_file(cache_dir, victims[0])
    with open(path, "r+b") as file:
        file.seek(os.path.getsize(path) - 1)
        byte = file.read(1)
        file.seek(os.path.getsize(path) - 1)
        file.write(bytes([byte[0] ^ 0xFF]))
    body = bytearray(disk_tier.row(cache_dir, victims[1])["body"])
    body[-1] ^= 0xFF
    disk_tier.update(cache_dir, victims[1], body=bytes(body))
    head = bytearray(disk_tier.row(cache_dir, victims[2])["head"])
    head[3] ^= 0x01
    disk_tier.update(cache_dir, victims[2], head=bytes(head))
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
               f"downloads unfinished at the kills {unfinished}, body files left without a row {torn_writes}; "
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
    # Every write counts every process's entries: usage never passes the
    # capacity, and every body file is named by a row.
    usage, entries = disk_tier.usage(cache_dir)
    assert usage <= 256 * KIB and entries > 0
    assert unnamed_body_files(cache_dir) == 0

    # What the three left behind is intact: a new process serves it correctly.
    check = courier(*args)
    for url, outcome in zip(urls, download_all(check, urls, cachePolicy="cacheOnly", body="base64")):
        if outcome["ok"]:
            assert outcome["source"] == "disk"
            tally.check(url, outcome, expected[url])
    assert tally.bad == []
