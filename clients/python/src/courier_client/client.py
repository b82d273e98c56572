"""The synchronous client: a courier process and a JSON-RPC session with it,
read by a thread of its own."""

from __future__ import annotations

import collections
import itertools
import json
import json.scanner
import os
import subprocess
import sys
import threading
import time
from typing import IO, Any, Callable, Sequence

from ._common import (
    CAPTURE,
    FRAMINGS,
    CourierExited,
    Notification,
    Received,
    UNSET,
    RpcError,
    bind_params,
    cancel_params,
    check_outcome,
    frame,
    given,
    target_params,
)

__all__ = ["Courier"]

_scan = json.scanner.make_scanner(json.JSONDecoder())


def _loads(text: str) -> Any:
    """``json.loads(text)``, without its per-call set-up for the usual case
    of a text that is one value followed by nothing but white space."""
    try:
        value, end = _scan(text, 0)
        if end == len(text) or text[end:].isspace():
            return value
    except StopIteration:
        pass
    return json.loads(text)



class Courier:
    """A running courier process and a JSON-RPC session with it.

    ``framing`` is ``"ndjson"`` or ``"lsp"``: how this client writes and reads.
    ``env`` is merged over ``os.environ``; a value of ``None`` removes a name.
    ``stderr`` is ``CAPTURE`` (kept, see ``stderr_text``), ``None`` (inherited),
    ``subprocess.DEVNULL``, a file object, or a path to append to.
    """

    def __init__(self, binary: str | os.PathLike[str], args: Sequence[object] = (),
                 framing: str = "ndjson", env: dict[str, str | None] | None = None,
                 stderr: Any = CAPTURE, cwd: str | os.PathLike[str] | None = None):
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}")
        self.framing = framing
        self.argv = [os.fspath(binary), *map(str, args)]

        full_env = None
        if env is not None:
            full_env = dict(os.environ)
            for name, value in env.items():
                if value is None:
                    full_env.pop(name, None)
                else:
                    full_env[name] = value

        self._stderr_file: IO[bytes] | None = None
        self._stderr_buf = bytearray()
        stderr_arg: Any
        if stderr == CAPTURE:
            stderr_arg = subprocess.PIPE
        elif isinstance(stderr, (str, os.PathLike)):
            self._stderr_file = open(stderr, "ab")
            stderr_arg = self._stderr_file
        else:
            stderr_arg = stderr

        self._cv = threading.Condition(threading.RLock())
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._responses: dict[Any, dict] = {}
        self._notifications: list[Notification] = []
        self._queue: collections.deque[Any] = collections.deque()
        self._callbacks: list[Callable[[str, Any], None]] = []
        self._parsed: list[Any] = []
        self._eof = False
        self._shutdown_sent = False
        self._exit_sent = False

        self.messages: list[Received] = []
        """Every message received, in order, with its receive time."""
        self.stdout_garbage: list[bytes] = []
        """Anything on courier's stdout that was not a well-formed message."""

        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr_arg, env=full_env, cwd=cwd,
            )
        except BaseException:
            if self._stderr_file is not None:
                self._stderr_file.close()
            raise
        self._reader = threading.Thread(target=self._read_loop, name="courier-stdout",
                                        daemon=True)
        self._reader.start()
        self._stderr_thread = None
        if stderr == CAPTURE:
            self._stderr_thread = threading.Thread(target=self._drain_stderr,
                                                   name="courier-stderr", daemon=True)
            self._stderr_thread.start()

    # -- process ---------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def stderr_text(self) -> str:
        """courier's stderr so far (with ``stderr=CAPTURE``)."""
        with self._cv:
            return self._stderr_buf.decode("utf-8", "replace")

    def wait_exit(self, timeout: float = 10) -> int:
        """Wait for the process to end; returns its exit code."""
        return self.proc.wait(timeout)

    def close(self, timeout: float = 5) -> int:
        """End the session: ``shutdown`` and ``exit`` unless already sent, close
        stdin, wait for the process (killing it if it hangs). Returns its exit code."""
        if self.proc.poll() is None and not self._eof:
            if not self._shutdown_sent:
                try:
                    self.shutdown(timeout=timeout)
                except (RpcError, CourierExited, TimeoutError):
                    pass
            if not self._exit_sent:
                try:
                    self.exit()
                except CourierExited:
                    pass
        self.close_stdin()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=2)
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=2)
        for stream in (self.proc.stdout, self.proc.stderr, self._stderr_file):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        return self.proc.returncode

    def close_stdin(self) -> None:
        """Close courier's stdin (end of input)."""
        with self._write_lock:
            try:
                self._stdin().close()
            except OSError:
                pass

    def _stdin(self) -> IO[bytes]:
        stdin = self.proc.stdin
        assert stdin is not None
        return stdin

    def kill(self) -> int:
        self.proc.kill()
        return self.proc.wait()

    def __enter__(self) -> "Courier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write bytes to courier's stdin exactly as given."""
        with self._write_lock:
            try:
                stdin = self._stdin()
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError) as exc:
                raise CourierExited(self._exit_description("cannot write")) from exc

    def send_message(self, obj: Any) -> None:
        """Frame one message (an object or a batch array) and write it."""
        self.send_raw(frame(obj, self.framing))

    def next_id(self) -> int:
        return next(self._ids)

    def send_request(self, method: str, params: Any = None, id: Any = UNSET) -> Any:
        """Send a request without waiting; returns its id."""
        if id is UNSET:
            id = self.next_id()
        message = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_message(message)
        return id

    def request(self, method: str, params: Any = None, timeout: float = 10) -> Any:
        """Send a request and return its result; raises :class:`RpcError`."""
        response = self.wait_response(self.send_request(method, params), timeout)
        if "error" in response:
            raise RpcError.from_response(response)
        return response.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send_message(message)

    # -- reading ---------------------------------------------------------------

    def wait_response(self, id: Any, timeout: float = 10) -> dict:
        """The raw response object with this id (waiting for it if needed)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while id not in self._responses:
                if self._eof:
                    raise CourierExited(self._exit_description(f"no response to id {id!r}"))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no response to id {id!r} within {timeout} s")
                self._cv.wait(remaining)
            return self._responses[id]

    def response(self, id: Any) -> dict | None:
        """The response with this id if it has arrived, else None."""
        with self._cv:
            return self._responses.get(id)

    def next_message(self, timeout: float = 10) -> Any:
        """Pop the oldest received message not yet popped (object or batch)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while not self._queue:
                if self._eof:
                    raise CourierExited(self._exit_description("no further message"))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no message within {timeout} s")
                self._cv.wait(remaining)
            return self._queue.popleft()

    def on_notification(self, callback: Callable[[str, Any], None]) -> None:
        """Call ``callback(method, params)`` (on the reader thread) for each
        notification received from now on."""
        with self._cv:
            self._callbacks.append(callback)

    def notifications(self, method: str | None = None) -> list[Notification]:
        """Notifications received so far, optionally only those of ``method``."""
        with self._cv:
            if method is None:
                return list(self._notifications)
            return [n for n in self._notifications if n.method == method]

    def mark(self) -> int:
        """The number of notifications so far: a ``since`` for later waits."""
        with self._cv:
            return len(self._notifications)

    def wait_notification(self, predicate: Callable[[str, Any], bool] | str,
                          timeout: float = 10, since: int = 0) -> Any:
        """Params of the first notification (from index ``since``) for which
        ``predicate(method, params)`` holds, waiting for one if needed.

        ``predicate`` may also be a method name.
        """
        return self.wait_notification_entry(predicate, timeout, since).params

    def wait_notification_entry(self, predicate: Callable[[str, Any], bool] | str,
                                timeout: float = 10, since: int = 0) -> Notification:
        """Like :meth:`wait_notification` but returns the whole entry."""
        if isinstance(predicate, str):
            wanted = predicate
            predicate = lambda method, _params: method == wanted  # noqa: E731
        deadline = time.monotonic() + timeout
        index = since
        with self._cv:
            while True:
                while index < len(self._notifications):
                    entry = self._notifications[index]
                    index += 1
                    if predicate(entry.method, entry.params):
                        return entry
                if self._eof:
                    raise CourierExited(self._exit_description("awaited notification"))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no matching notification within {timeout} s")
                self._cv.wait(remaining)

    # -- lifecycle methods -------------------------------------------------------

    def initialize(self, clientInfo: dict | None = None, timeout: float = 10,
                   **options: Any) -> dict:
        """``initialize``; keyword arguments become ``options``."""
        return self.request("initialize", given(clientInfo=clientInfo, options=options or None), timeout)

    def shutdown(self, timeout: float = 10) -> Any:
        self._shutdown_sent = True
        return self.request("shutdown", None, timeout)

    def exit(self) -> None:
        """Send the ``exit`` notification."""
        self._exit_sent = True
        self.notify("exit")

    def discover(self) -> dict:
        return self.request("rpc.discover")

    # -- downloads -------------------------------------------------------------

    def download(self, url: str, rpc_timeout: float | None = None, **params: Any) -> dict:
        """``download``; returns its result (``receipt``, ``task``, ``state`` ...).

        ``rpc_timeout`` bounds the wait for the response (default 10 s, 60 s
        with ``wait=True``); every other keyword is a ``download`` param.
        """
        if rpc_timeout is None:
            rpc_timeout = 60 if params.get("wait") else 10
        return self.request("download", {"url": url, **params}, rpc_timeout)

    def wait(self, receipt: Any, timeout: float = 30, raise_on_error: bool = False) -> dict:
        """The outcome of ``receipt`` from its ``download/finished`` notification.

        With ``raise_on_error=True`` an outcome that is not ``ok`` raises
        :class:`DownloadError` (its ``code`` is the outcome's ``error.code``).
        """
        params = self.wait_notification(
            lambda method, p: method == "download/finished"
            and isinstance(p, dict) and p.get("receipt") == receipt,
            timeout,
        )
        outcome: dict = params["outcome"]
        return check_outcome(outcome, receipt) if raise_on_error else outcome

    def finished(self, receipt: Any) -> list[dict]:
        """All ``download/finished`` params received for ``receipt`` (normally 0 or 1)."""
        return [n.params for n in self.notifications("download/finished")
                if isinstance(n.params, dict) and n.params.get("receipt") == receipt]

    def fetch(self, url: str, timeout: float = 30, transfer_timeout: float | None = None,
              raise_on_error: bool = False, **params: Any) -> dict:
        """Download and wait for the outcome.

        ``timeout`` bounds the wait; ``transfer_timeout`` is sent as the
        ``download`` param ``timeout``; ``raise_on_error`` as for :meth:`wait`.
        """
        if transfer_timeout is not None:
            params["timeout"] = transfer_timeout
        result = self.download(url, rpc_timeout=timeout, **params)
        if isinstance(result, dict) and "outcome" in result:
            outcome: dict = result["outcome"]
            return check_outcome(outcome, result.get("receipt")) if raise_on_error else outcome
        return self.wait(result["receipt"], timeout, raise_on_error)

    def cancel(self, receipt: Any = None, slot: str | None = None, all: bool = False,
               **extra: Any) -> dict:
        return self.request("cancel", cancel_params(receipt, slot, all, extra))

    def progress(self, receipt: Any = None, **extra: Any) -> dict:
        return self.request("progress", given(extra, receipt=receipt))

    def suspend(self, receipt: Any = None, task: Any = None, **extra: Any) -> Any:
        return self.request("suspend", self._target(receipt, task, extra))

    def resume(self, receipt: Any = None, task: Any = None, **extra: Any) -> Any:
        return self.request("resume", self._target(receipt, task, extra))

    @staticmethod
    def _target(receipt: Any, task: Any, extra: dict) -> dict:
        return target_params(receipt, task, extra)

    # -- bindings, indicator, cache ------------------------------------------------

    def bind(self, view: str, task: Any = UNSET, receipt: Any = UNSET,
             kind: str | None = None) -> Any:
        """``bind``; pass ``task=None`` to unbind the view."""
        return self.request("bind", bind_params(view, task, receipt, kind))

    def indicator_state(self) -> dict:
        return self.request("indicator/state")

    def indicator_configure(self, **params: Any) -> Any:
        return self.request("indicator/configure", params)

    def indicator_increment(self) -> Any:
        return self.request("indicator/increment")

    def indicator_decrement(self) -> Any:
        return self.request("indicator/decrement")

    def cache_stats(self) -> dict:
        return self.request("cache/stats")

    def cache_lookup(self, url: str | None = None, **params: Any) -> dict:
        """``cache/lookup`` by ``url`` or ``cacheKey=...``."""
        return self.request("cache/lookup", given(params, url=url))

    def cache_remove(self, url: str | None = None, **params: Any) -> Any:
        """``cache/remove`` by ``url`` or ``cacheKey=...``."""
        return self.request("cache/remove", given(params, url=url))

    def cache_clear(self, memory: bool | None = None, disk: bool | None = None) -> Any:
        return self.request("cache/clear", given(memory=memory, disk=disk))

    # -- reader threads ----------------------------------------------------------

    def _exit_description(self, what: str) -> str:
        try:
            code = self.proc.wait(0.5)
        except subprocess.TimeoutExpired:
            code = None
        state = "still running" if code is None else f"exit code {code}"
        tail = self.stderr_text[-2000:].strip()
        message = f"courier's output ended ({state}): {what}"
        return message + (f"\n--- courier stderr (tail) ---\n{tail}" if tail else "")

    def _drain_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        while True:
            try:
                data = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            except (OSError, ValueError):
                break
            if not data:
                break
            with self._cv:
                self._stderr_buf += data

    def _read_loop(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        try:
            if self.framing == "ndjson":
                self._read_ndjson(stream)
            else:
                self._read_lsp(stream)
        except (OSError, ValueError):
            pass
        finally:
            with self._cv:
                self._eof = True
                self._cv.notify_all()

    def _read_ndjson(self, stream: IO[bytes]) -> None:
        """Reads whatever courier has written so far (up to 1 MiB at a time)
        and delivers the messages of its complete lines together; a line
        split across reads is kept in parts until its end arrives."""
        read = stream.read1 if hasattr(stream, "read1") else stream.read
        parts: list[bytes] = []
        while True:
            data = read(1 << 20)
            if not data:
                rest = b"".join(parts)
                if rest.strip():
                    self._parse(rest)
                    self._deliver_parsed()
                return
            end = data.rfind(b"\n")
            if end < 0:
                parts.append(data)
                continue
            if parts:
                parts.append(data[:end])
                block = b"".join(parts)
                parts = []
            else:
                block = data[:end]
            if end + 1 < len(data):
                parts.append(data[end + 1:])
            parse = self._parse
            for line in block.split(b"\n"):
                if line and not line.isspace():
                    parse(line + b"\n")
            self._deliver_parsed()

    def _read_lsp(self, stream: IO[bytes]) -> None:
        while True:
            length = None
            header_bytes = b""
            while True:
                line = stream.readline()
                if not line:
                    if header_bytes.strip():
                        self._garbage(header_bytes)
                    return
                if line in (b"\r\n", b"\n"):
                    if header_bytes:
                        break
                    continue
                header_bytes += line
                name, sep, value = line.decode("latin-1").partition(":")
                if sep and name.strip().lower() == "content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        length = None
            if length is None or length < 0:
                self._garbage(header_bytes)
                continue
            body = stream.read(length)
            if len(body) < length:
                self._garbage(header_bytes + body)
                return
            self._parse(body)
            self._deliver_parsed()

    def _garbage(self, data: bytes) -> None:
        with self._cv:
            self.stdout_garbage.append(data)

    def _parse(self, data: bytes) -> None:
        """Takes the bytes of one message (an ndjson line with its line end,
        or an LSP body); the reader delivers what was parsed once it has
        parsed all it read. Bytes that are not JSON go to ``stdout_garbage``."""
        try:
            message = _loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            self._garbage(data)
            return
        self._parsed.append(message)

    def _deliver_parsed(self) -> None:
        if self._parsed:
            messages, self._parsed = self._parsed, []
            self._deliver(messages)

    def _deliver(self, messages: list[Any]) -> None:
        """Records messages received together and wakes the waiters. When
        callbacks are registered, the callbacks for a notification run
        before any later message becomes visible, as if each message had
        been delivered on its own."""
        now = time.monotonic()
        record = self.messages.append
        enqueue = self._queue.append
        noted = self._notifications.append
        responses = self._responses
        start = 0
        while start < len(messages):
            new_notifications: list[Notification] = []
            with self._cv:
                callbacks = list(self._callbacks)
                index = start
                while index < len(messages):
                    message = messages[index]
                    index += 1
                    record(Received(now, message))
                    enqueue(message)
                    for item in message if type(message) is list else (message,):
                        if not isinstance(item, dict):
                            continue
                        if "id" not in item:
                            if "method" in item:
                                note = Notification(item["method"], item.get("params"), now)
                                noted(note)
                                new_notifications.append(note)
                        elif "result" in item or "error" in item:
                            try:
                                responses[item["id"]] = item
                            except TypeError:  # an unhashable id: only in the log
                                pass
                    if new_notifications and callbacks:
                        break
                self._cv.notify_all()
            start = index
            for note in new_notifications:
                for callback in callbacks:
                    try:
                        callback(note.method, note.params)
                    except Exception as exc:  # a failing callback must not stop the reader
                        print(f"notification callback failed: {exc!r}", file=sys.stderr)
