import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

import collections
import os
import subprocess
import threading
import time
from typing import Any, Callable, Iterable

import pytest

from courier_client import Courier, Notification
from origin import Origin
from schema import validate_message

COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")

# Proxy settings of the environment the tests run in must not leak into courier.
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                   "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")


class Session(Courier):
    """A courier session for the tests: it records everything it receives
    (``Courier(record=True)``), remembers the method of every request it sent
    (so each response can be checked against the protocol document) and
    indexes `download/finished` and `download/progress` as they arrive.

    Its waits keep the tests' names and bounds: ``timeout=`` is how long the
    test waits (10 s for a response, 30 s for an outcome unless given), and
    ``fetch``'s ``transfer_timeout=`` is courier's ``timeout`` param."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.methods_by_id: dict[Any, str] = {}
        self.outcomes: dict[str, list[dict]] = collections.defaultdict(list)
        self.finished_order: list[str] = []
        self.progress_by_task: dict[str, list[tuple[float, dict]]] = collections.defaultdict(list)
        kwargs.setdefault("wait_timeout", 10)
        super().__init__(*args, record=True, **kwargs)
        self.on_notification(self._index)

    def send_message(self, obj: Any) -> None:
        for item in obj if isinstance(obj, list) else [obj]:
            if isinstance(item, dict) and "id" in item and isinstance(item.get("method"), str):
                try:
                    self.methods_by_id[item["id"]] = item["method"]
                except TypeError:
                    pass
        super().send_message(obj)

    def _index(self, method: str, params: Any) -> None:
        now = time.monotonic()
        with self._cv:
            if method == "download/finished":
                self.outcomes[params["receipt"]].append(params["outcome"])
                self.finished_order.append(params["receipt"])
            elif method == "download/progress":
                self.progress_by_task[params["task"]].append((now, params))
            self._cv.notify_all()

    # -- the client's waits, with the tests' names and bounds ---------------------

    def request(self, method: str, params: Any = None, timeout: float = 10) -> Any:
        return super().request(method, params, wait_timeout=timeout)

    def wait_response(self, id: Any, timeout: float = 10) -> dict:
        return super().wait_response(id, wait_timeout=timeout)

    def next_message(self, timeout: float = 10) -> Any:
        return super().next_message(wait_timeout=timeout)

    def wait_notification(self, predicate: Callable[[str, Any], bool] | str,
                          timeout: float = 10, since: int = 0) -> Any:
        return super().wait_notification(predicate, wait_timeout=timeout, since=since)

    def wait_notification_entry(self, predicate: Callable[[str, Any], bool] | str,
                                timeout: float = 10, since: int = 0) -> Notification:
        return super().wait_notification_entry(predicate, wait_timeout=timeout, since=since)

    def initialize(self, clientInfo: dict | None = None, timeout: float = 10, **options: Any) -> dict:
        return super().initialize(clientInfo, wait_timeout=timeout, **options)

    def shutdown(self, timeout: float = 10) -> Any:
        return super().shutdown(wait_timeout=timeout)

    def download(self, url: str, rpc_timeout: float | None = None, **params: Any) -> dict:
        """``download``; ``rpc_timeout`` bounds the wait for its response
        (10 s, 60 s with ``wait=True``); ``timeout`` is courier's param."""
        if rpc_timeout is None:
            rpc_timeout = 60 if params.get("wait") else 10
        return super().download(url, wait_timeout=rpc_timeout, **params)

    def wait(self, receipt: Any, timeout: float = 30, raise_on_error: bool = False) -> dict:
        return super().wait(receipt, wait_timeout=timeout, raise_on_error=raise_on_error)

    def fetch(self, url: str, timeout: float = 30, transfer_timeout: float | None = None,
              raise_on_error: bool = False, **params: Any) -> dict:
        if transfer_timeout is not None:
            params["timeout"] = transfer_timeout
        return super().fetch(url, wait_timeout=timeout, raise_on_error=raise_on_error, **params)

    def wait_exit(self, timeout: float = 10) -> int:
        return super().wait_exit(wait_timeout=timeout)

    def close(self, timeout: float = 5) -> int:
        return super().close(wait_timeout=timeout)

    # -- waiting ------------------------------------------------------------------

    def wait_until(self, condition: Callable[[], bool], timeout: float = 20,
                   what: str = "condition") -> None:
        """Waits (on received messages, not on a clock) until ``condition()`` holds."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while not condition():
                if self._eof:
                    raise AssertionError(self._exit_description(f"waiting for {what}"))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{what} not reached within {timeout} s")
                self._cv.wait(remaining)

    def wait_all(self, receipts: Iterable[str], timeout: float = 30) -> dict[str, dict]:
        """The outcome of every receipt, waiting for each `download/finished`."""
        receipts = list(receipts)
        with self._cv:
            self.wait_until(lambda: all(r in self.outcomes for r in receipts), timeout,
                            f"download/finished of {len(receipts)} receipt(s)")
            return {r: self.outcomes[r][0] for r in receipts}

    def wait_progress(self, task: str, count: int = 1, timeout: float = 20) -> dict:
        """Waits until ``task`` has had ``count`` progress notifications; returns the last."""
        with self._cv:
            self.wait_until(lambda: len(self.progress_by_task[task]) >= count, timeout,
                            f"{count} download/progress of {task}")
            return self.progress_by_task[task][-1][1]

    def progress_count(self, task: str) -> int:
        with self._cv:
            return len(self.progress_by_task[task])

    # -- shortcuts ------------------------------------------------------------------

    def batch(self, requests: list[tuple[str, dict]], timeout: float = 60) -> list[dict]:
        """Sends ``(method, params)`` pairs as one batch; returns the responses in
        request order."""
        ids = [f"batch-{self.next_id()}" for _ in requests]
        self.send_message([{"jsonrpc": "2.0", "id": i, "method": m, "params": p}
                           for i, (m, p) in zip(ids, requests)])
        return [self.wait_response(i, timeout) for i in ids]

    def tasks(self) -> list[dict]:
        return self.progress()["tasks"]


def _check_receipt_rules(session: Session) -> None:
    """Every receipt ends once, and nothing names it after its end."""
    ended: set[str] = set()
    for note in session.notifications():
        if note.method == "download/finished":
            receipt = note.params["receipt"]
            assert receipt not in ended, f"second download/finished for {receipt}"
            ended.add(receipt)
        elif note.method == "download/progress":
            late = ended.intersection(note.params["receipts"])
            assert not late, f"download/progress names finished receipt(s) {sorted(late)}"


def stdout_garbage(session: Any) -> list[bytes]:
    """What a session's stdout carried that was not a message. A courier
    killed by a signal may have been cut off in the middle of writing one:
    its last bytes, without a line end, are that message's start."""
    garbage = list(session.stdout_garbage)
    returncode = session.proc.poll()
    if garbage and returncode is not None and returncode < 0 and not garbage[-1].endswith(b"\n"):
        garbage.pop()
    return garbage


def _check_session(session: Session, validate: str) -> None:
    garbage = stdout_garbage(session)
    assert garbage == [], garbage[:3]
    _check_receipt_rules(session)
    if validate == "none":
        return
    received = session.messages
    if validate == "sample" and len(received) > 400:
        step = len(received) // 200
        received = received[:100] + received[100::step] + received[-100:]
    for entry in received:
        message = entry.message
        if isinstance(message, list):
            validate_message(message, {item.get("id"): session.methods_by_id.get(item.get("id"))
                                       for item in message if isinstance(item, dict)})
        elif isinstance(message, dict) and "id" in message and "method" not in message:
            validate_message(message, session.methods_by_id.get(message["id"]))
        else:
            validate_message(message)


def checked_sessions(make: Callable[..., Any]):
    """A fixture body: yields a function that starts sessions with `make`;
    at teardown stops them (killing any that hang), then checks that stdout
    held nothing but messages that match the protocol document."""
    started: list[Any] = []

    def start(*args: Any, **kwargs: Any) -> Any:
        session = make(*args, **kwargs)
        started.append(session)
        return session

    yield start
    for session in started:
        try:
            session.close(timeout=5)
        finally:
            if session.alive:
                session.kill()
    for session in started:
        garbage = stdout_garbage(session)
        assert garbage == [], f"stdout carried non-protocol bytes: {garbage[:3]!r}"
        for received in session.messages:
            validate_message(received.message)


@pytest.fixture
def origin():
    with Origin() as o:
        yield o


@pytest.fixture
def cache_dir(tmp_path):
    path = tmp_path / "cache"
    path.mkdir()
    return path


@pytest.fixture
def courier(cache_dir):
    """Starts courier sessions: ``courier("--max-active", "2", env={...})``.

    Each gets ``--cache-dir`` under the test's tmp_path and an environment
    without proxy variables (unless ``env`` sets them). At teardown the
    session is shut down (killed if it hangs) and every message it wrote is
    checked against protocol/openrpc.json (``validate="sample"`` checks a
    sample, for sessions of many thousand messages; ``"none"`` leaves the
    check to the test)."""
    started: list[tuple[Session, str]] = []

    def start(*args: str, env: dict[str, str | None] | None = None,
              validate: str = "all", cache: Any = None) -> Session:
        full_env: dict[str, str | None] = {name: None for name in PROXY_VARIABLES}
        full_env.update(env or {})
        session = Session(COURIER, ["--cache-dir", str(cache or cache_dir), *args],
                          env=full_env)
        started.append((session, validate))
        return session

    yield start
    for session, _ in started:
        try:
            session.close(timeout=10)
        finally:
            if session.alive:
                session.kill()
    for session, validate in started:
        _check_session(session, validate)


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1: (cert path, key path)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    return str(cert), str(key)
