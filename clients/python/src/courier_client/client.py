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
from typing import IO, Any, Callable, Sequence, Tuple

from ._common import (
    CAPTURE,
    DEFAULT,
    FRAMINGS,
    GARBAGE_KEPT,
    GOES_ON,
    STDERR_KEPT,
    CourierExited,
    Notification,
    Received,
    UNSET,
    RpcError,
    WaitTimeout,
    absolute_destination,
    bind_params,
    cancel_params,
    check_outcome,
    executable,
    frame,
    given,
    keep_file,
    spawn_error,
    target_params,
)
from ._types import DownloadResult, Outcome

__all__ = ["Courier"]

NotificationCallback = Callable[[str, Any], None]

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


class _Watch:
    """One :meth:`Courier.wait_notification` of a client without a record:
    the first notification from its start on that ``predicate`` accepts,
    or what the predicate raised."""

    __slots__ = ("predicate", "found", "error")

    def __init__(self, predicate: Callable[[str, Any], bool]):
        self.predicate = predicate
        self.found: Notification | None = None
        self.error: Exception | None = None

    def offer(self, note: Notification) -> None:
        if self.found is not None or self.error is not None:
            return
        try:
            if self.predicate(note.method, note.params):
                self.found = note
        except Exception as exc:  # raised in the waiting thread, not the reader
            self.error = exc


class Courier:
    """A running courier process and a JSON-RPC session with it.

    ``binary`` is the courier to run; None means ``$COURIER``, else
    ``courier`` on ``PATH`` (:class:`CourierNotFound` says which was tried).
    ``framing`` is ``"ndjson"`` or ``"lsp"``: how this client writes and reads.
    ``env`` is merged over ``os.environ``; a value of ``None`` removes a name.
    ``stderr`` is ``CAPTURE`` (kept, see ``stderr_text``), ``None`` (inherited),
    ``subprocess.DEVNULL``, a file object, or a path to append to.

    ``wait_timeout`` is how long, in seconds, each wait of this client lasts
    unless the call gives its own: None (the default) waits until courier
    answers or exits. It only bounds the client's waiting; a transfer's own
    limit is courier's ``timeout`` (the ``download`` param, or ``--timeout``).

    Nothing is kept once it is delivered: a response until :meth:`request`
    or :meth:`wait_response` returns it, an outcome until :meth:`wait`
    returns it (at most ``keep_outcomes`` outcomes nobody waited for; the
    oldest go first), the last 64 KiB of stderr. ``record=True`` keeps
    everything instead, for tests and tools that look back (``messages``,
    :meth:`notifications`, :meth:`mark`, :meth:`next_message`,
    :meth:`finished`, ``since``); its memory grows with every message.
    """

    def __init__(self, binary: str | os.PathLike[str] | None = None, args: Sequence[object] = (),
                 framing: str = "ndjson", env: dict[str, str | None] | None = None,
                 stderr: Any = CAPTURE, cwd: str | os.PathLike[str] | None = None, *,
                 wait_timeout: float | None = None, keep_outcomes: int = 10000,
                 record: bool = False):
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}")
        self.framing = framing
        path, source = executable(binary)
        self.argv = [path, *map(str, args)]
        self.wait_timeout = wait_timeout
        self.record = record
        self._keep_outcomes = keep_outcomes

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
        self._awaited: set[Any] = set()
        self._outcomes: collections.OrderedDict[Any, Outcome] = collections.OrderedDict()
        self._waiting: collections.Counter[Any] = collections.Counter()
        # Ids of `download`s whose receipt a wait claims the moment their
        # answer is read, before the outcome that follows it can be.
        self._claiming: set[Any] = set()
        self._callbacks: tuple[tuple[NotificationCallback, frozenset[str]], ...] = ()
        self._watches: list[_Watch] = []
        self._messages: list[Received] = []
        self._log: list[Notification] = []
        self._queue: collections.deque[Any] = collections.deque()
        self._parsed: list[Any] = []
        self._eof = False
        self._shutdown_sent = False
        self._exit_sent = False

        self.stdout_garbage: list[bytes] = []
        """Anything on courier's stdout that was not a well-formed message
        (the last 100 pieces unless ``record``)."""

        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr_arg, env=full_env, cwd=cwd,
            )
        except OSError as error:
            if self._stderr_file is not None:
                self._stderr_file.close()
            if cwd is not None and error.filename == os.fspath(cwd):
                raise
            raise spawn_error(error, path, source) from error
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
        """courier's stderr so far (with ``stderr=CAPTURE``; its last 64 KiB
        unless ``record``)."""
        with self._cv:
            return self._stderr_buf.decode("utf-8", "replace")

    def wait_exit(self, wait_timeout: float | None = DEFAULT) -> int:
        """Wait for the process to end; returns its exit code."""
        limit, _ = self._limit(wait_timeout)
        try:
            return self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            raise WaitTimeout(f"courier did not exit within {limit} s") from None

    def close(self, wait_timeout: float = 5) -> int:
        """End the session: ``shutdown`` and ``exit`` unless already sent, close
        stdin, wait for the process (killing it if it hangs). Returns its exit code.

        ``shutdown`` ends every unfinished download with error ``shutdown``
        and courier removes the temporary files that outcomes without a
        ``destination`` name. ``wait_timeout`` bounds each of the waits here.
        """
        if self.proc.poll() is None and not self._eof:
            if not self._shutdown_sent:
                self._shutdown_sent = True
                try:
                    self._call("shutdown", None, *self._limit(wait_timeout))
                except (RpcError, CourierExited, WaitTimeout):
                    pass
            if not self._exit_sent:
                try:
                    self.exit()
                except CourierExited:
                    pass
        self.close_stdin()
        try:
            self.proc.wait(wait_timeout)
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
        """Send a request without waiting; returns its id. Its response is
        kept until :meth:`wait_response` takes it."""
        if id is UNSET:
            id = self.next_id()
        message = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        with self._cv:
            self._await_response(id, True)
        try:
            self.send_message(message)
        except BaseException:
            with self._cv:
                self._await_response(id, False)
            raise
        return id

    def request(self, method: str, params: Any = None, wait_timeout: float | None = DEFAULT) -> Any:
        """Send a request and return its result; raises :class:`RpcError`."""
        return self._call(method, params, *self._limit(wait_timeout))

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send_message(message)

    def _call(self, method: str, params: Any, limit: float | None, deadline: float | None,
              claim: bool = False) -> Any:
        """Sends a request and returns its result. With ``claim`` (a
        ``download``), its receipt counts as waited for from the moment its
        answer is read, so an outcome right behind it is kept for the wait
        that follows whatever ``keep_outcomes`` says."""
        id = self.next_id()
        if claim:
            with self._cv:
                self._claiming.add(id)
        self.send_request(method, params, id=id)
        try:
            response = self._take_response(id, limit, deadline)
        except WaitTimeout:
            with self._cv:
                self._await_response(id, False)
                self._claiming.discard(id)
            raise
        if "error" in response:
            raise RpcError.from_response(response)
        return response.get("result")

    def _await_response(self, id: Any, awaited: bool) -> None:
        """Marks whether a response to ``id`` is awaited (kept when it comes;
        with ``record`` every response is)."""
        if self.record:
            return
        try:
            if awaited:
                self._awaited.add(id)
            else:
                self._awaited.discard(id)
                self._responses.pop(id, None)
        except TypeError:  # an unhashable id: its response cannot be found by id
            pass

    # -- waiting ---------------------------------------------------------------

    def _limit(self, wait_timeout: float | None) -> Tuple[float | None, float | None]:
        """The limit a call's ``wait_timeout`` means (the client's when left
        out) and the deadline it sets from now."""
        limit = self.wait_timeout if wait_timeout is DEFAULT else wait_timeout
        return limit, None if limit is None else time.monotonic() + limit

    def _pause(self, what: str, limit: float | None, deadline: float | None, hint: str = "") -> None:
        """Waits (holding the lock) for the next message; raises when courier's
        output has ended or the deadline has passed."""
        if self._eof:
            raise CourierExited(self._exit_description(what))
        if deadline is None:
            self._cv.wait()
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(f"{what} within {limit} s{hint}")
        self._cv.wait(remaining)

    def wait_response(self, id: Any, wait_timeout: float | None = DEFAULT) -> dict:
        """The raw response object with this id, waiting for it if needed.

        Without ``record`` only responses to :meth:`send_request` are kept,
        each until it is returned here."""
        return self._take_response(id, *self._limit(wait_timeout))

    def _take_response(self, id: Any, limit: float | None, deadline: float | None) -> dict:
        with self._cv:
            while id not in self._responses:
                self._pause(f"no response to id {id!r}", limit, deadline)
            if self.record:
                return self._responses[id]
            self._awaited.discard(id)
            return self._responses.pop(id)

    def response(self, id: Any) -> dict | None:
        """The response with this id if it has arrived and is kept, else None."""
        with self._cv:
            return self._responses.get(id)

    def on_notification(self, callback: NotificationCallback, *methods: str) -> Callable[[], None]:
        """Call ``callback(method, params)`` (on the reader thread) for each
        notification received from now on, only those of ``methods`` when
        given. Returns a function that removes the callback.

        A callback runs before any later message is visible to other threads.
        """
        entry = (callback, frozenset(methods))
        with self._cv:
            self._callbacks = (*self._callbacks, entry)

        def remove() -> None:
            with self._cv:
                self._callbacks = tuple(e for e in self._callbacks if e is not entry)

        return remove

    def wait_notification(self, predicate: Callable[[str, Any], bool] | str,
                          wait_timeout: float | None = DEFAULT, since: int | None = None) -> Any:
        """Params of the first notification for which ``predicate(method,
        params)`` holds (``predicate`` may also be a method name), waiting for
        one if needed.

        Without ``record`` it looks at notifications from the call on; with
        ``record`` at those from index ``since`` (see :meth:`mark`; default:
        the first one).
        """
        return self._find_notification(predicate, since, *self._limit(wait_timeout)).params

    def wait_notification_entry(self, predicate: Callable[[str, Any], bool] | str,
                                wait_timeout: float | None = DEFAULT,
                                since: int | None = None) -> Notification:
        """Like :meth:`wait_notification` but returns the whole entry."""
        return self._find_notification(predicate, since, *self._limit(wait_timeout))

    def _find_notification(self, predicate: Callable[[str, Any], bool] | str, since: int | None,
                           limit: float | None, deadline: float | None) -> Notification:
        if isinstance(predicate, str):
            wanted = predicate
            predicate = lambda method, _params: method == wanted  # noqa: E731
        what = "no matching notification"
        with self._cv:
            if self.record:
                index = since or 0
                while True:
                    while index < len(self._log):
                        entry = self._log[index]
                        index += 1
                        if predicate(entry.method, entry.params):
                            return entry
                    self._pause(what, limit, deadline)
            if since is not None:
                raise ValueError("since= looks back: it needs Courier(record=True)")
            watch = _Watch(predicate)
            self._watches.append(watch)
            try:
                while watch.found is None:
                    if watch.error is not None:
                        raise watch.error
                    self._pause(what, limit, deadline)
                return watch.found
            finally:
                self._watches.remove(watch)

    # -- the record (record=True) -------------------------------------------------

    def _recorded(self, what: str) -> None:
        if not self.record:
            raise RuntimeError(f"{what} needs Courier(record=True): without it the client "
                               "keeps nothing once delivered")

    @property
    def messages(self) -> list[Received]:
        """Every message received, in order, with its receive time (``record``)."""
        self._recorded("messages")
        return self._messages

    def notifications(self, method: str | None = None) -> list[Notification]:
        """Notifications received so far, optionally only those of ``method`` (``record``)."""
        self._recorded("notifications()")
        with self._cv:
            if method is None:
                return list(self._log)
            return [n for n in self._log if n.method == method]

    def mark(self) -> int:
        """The number of notifications so far: a ``since`` for later waits (``record``)."""
        self._recorded("mark()")
        with self._cv:
            return len(self._log)

    def next_message(self, wait_timeout: float | None = DEFAULT) -> Any:
        """Pop the oldest received message not yet popped, object or batch (``record``)."""
        self._recorded("next_message()")
        limit, deadline = self._limit(wait_timeout)
        with self._cv:
            while not self._queue:
                self._pause("no further message", limit, deadline)
            return self._queue.popleft()

    def finished(self, receipt: Any) -> list[dict]:
        """All ``download/finished`` params received for ``receipt``, normally 0 or 1 (``record``)."""
        return [n.params for n in self.notifications("download/finished")
                if isinstance(n.params, dict) and n.params.get("receipt") == receipt]

    # -- lifecycle methods -------------------------------------------------------

    def initialize(self, clientInfo: dict | None = None, wait_timeout: float | None = DEFAULT,
                   **options: Any) -> dict:
        """``initialize``; keyword arguments become ``options``."""
        return self._call("initialize", given(clientInfo=clientInfo, options=options or None),
                          *self._limit(wait_timeout))

    def shutdown(self, wait_timeout: float | None = DEFAULT) -> Any:
        self._shutdown_sent = True
        return self._call("shutdown", None, *self._limit(wait_timeout))

    def exit(self) -> None:
        """Send the ``exit`` notification."""
        self._exit_sent = True
        self.notify("exit")

    def discover(self) -> dict:
        return self._simple("rpc.discover")

    def _simple(self, method: str, params: Any = None) -> Any:
        return self._call(method, params, *self._limit(DEFAULT))

    # -- downloads -------------------------------------------------------------

    def download(self, url: str, wait_timeout: float | None = DEFAULT, **params: Any) -> DownloadResult:
        """``download``; returns its result (``receipt``, ``task``, ``state`` ...).

        Every keyword but ``wait_timeout`` is a ``download`` param, in
        courier's names: ``timeout`` is courier's limit for the transfer. A
        relative ``destination`` is taken from the current directory.
        """
        return self._download(url, params, *self._limit(wait_timeout))

    def _download(self, url: str, params: dict, limit: float | None,
                  deadline: float | None, claim: bool = False) -> DownloadResult:
        result: DownloadResult = self._call("download", absolute_destination({"url": url, **params}),
                                            limit, deadline, claim)
        if not self.record and isinstance(result, dict) and "outcome" in result:
            with self._cv:
                try:
                    self._outcomes.pop(result.get("receipt"), None)
                except TypeError:
                    pass
        return result

    def wait(self, receipt: Any, wait_timeout: float | None = DEFAULT,
             raise_on_error: bool = False) -> Outcome:
        """The outcome of ``receipt`` (its ``download/finished``), whether it
        came before or after this call; returned once (kept with ``record``).

        No limit unless ``wait_timeout`` (here or the client's) sets one:
        courier's own transfer ``timeout`` ends a download that stalls. When
        the wait times out the download goes on (:class:`WaitTimeout`).
        With ``raise_on_error=True`` an outcome that is not ``ok`` raises
        :class:`DownloadError` (its ``code`` is the outcome's ``error.code``).
        """
        outcome = self._take_outcome(receipt, *self._limit(wait_timeout))
        return check_outcome(outcome, receipt) if raise_on_error else outcome

    def _take_outcome(self, receipt: Any, limit: float | None, deadline: float | None,
                      claimed: bool = False) -> Outcome:
        """Waits for and takes ``receipt``'s outcome; ``claimed`` when the
        reader counted this wait already (see :meth:`_call`)."""
        with self._cv:
            if not claimed:
                self._waiting[receipt] += 1
            try:
                while receipt not in self._outcomes:
                    self._pause(f"no outcome for {receipt!r}", limit, deadline, GOES_ON)
                return self._outcomes[receipt] if self.record else self._outcomes.pop(receipt)
            finally:
                self._waiting[receipt] -= 1
                if not self._waiting[receipt]:
                    del self._waiting[receipt]

    def fetch(self, url: str, wait_timeout: float | None = DEFAULT, raise_on_error: bool = False,
              **params: Any) -> Outcome:
        """Download and wait for the outcome: :meth:`download`, then :meth:`wait`.

        ``wait_timeout`` bounds the whole (none by default); every other
        keyword is a ``download`` param (``timeout`` is courier's limit for
        the transfer); ``raise_on_error`` as for :meth:`wait`.
        """
        limit, deadline = self._limit(wait_timeout)
        try:
            result = self._download(url, params, limit, deadline, claim=True)
        except WaitTimeout as timeout:
            raise WaitTimeout(f"{timeout}{GOES_ON}" if params.get("wait") else str(timeout)) from None
        if isinstance(result, dict) and "outcome" in result:
            outcome = result["outcome"]
        else:
            outcome = self._take_outcome(result["receipt"], limit, deadline, claimed=True)
        return check_outcome(outcome, result.get("receipt")) if raise_on_error else outcome

    def keep(self, outcome: Outcome, destination: str | os.PathLike[str]) -> str:
        """Copies the file of an outcome without ``destination`` (a temporary
        one, removed when the client closes) to ``destination``; returns the
        copy's absolute path. A relative ``destination`` is taken from the
        current directory; a directory gets the URL's file name."""
        return keep_file(outcome, destination)

    def cancel(self, receipt: Any = None, slot: str | None = None, all: bool = False,
               **extra: Any) -> dict:
        return self._simple("cancel", cancel_params(receipt, slot, all, extra))

    def progress(self, receipt: Any = None, **extra: Any) -> dict:
        return self._simple("progress", given(extra, receipt=receipt))

    def suspend(self, receipt: Any = None, task: Any = None, **extra: Any) -> Any:
        return self._simple("suspend", target_params(receipt, task, extra))

    def resume(self, receipt: Any = None, task: Any = None, **extra: Any) -> Any:
        return self._simple("resume", target_params(receipt, task, extra))

    # -- bindings, indicator, cache ------------------------------------------------

    def bind(self, view: str, task: Any = UNSET, receipt: Any = UNSET,
             kind: str | None = None) -> Any:
        """``bind``; pass ``task=None`` to unbind the view."""
        return self._simple("bind", bind_params(view, task, receipt, kind))

    def indicator_state(self) -> dict:
        return self._simple("indicator/state")

    def indicator_configure(self, **params: Any) -> Any:
        return self._simple("indicator/configure", params)

    def indicator_increment(self) -> Any:
        return self._simple("indicator/increment")

    def indicator_decrement(self) -> Any:
        return self._simple("indicator/decrement")

    def cache_stats(self) -> dict:
        return self._simple("cache/stats")

    def cache_lookup(self, url: str | None = None, **params: Any) -> dict:
        """``cache/lookup`` by ``url`` or ``cacheKey=...``."""
        return self._simple("cache/lookup", given(params, url=url))

    def cache_remove(self, url: str | None = None, **params: Any) -> Any:
        """``cache/remove`` by ``url`` or ``cacheKey=...``."""
        return self._simple("cache/remove", given(params, url=url))

    def cache_clear(self, memory: bool | None = None, disk: bool | None = None) -> Any:
        return self._simple("cache/clear", given(memory=memory, disk=disk))

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
                if not self.record and len(self._stderr_buf) > 2 * STDERR_KEPT:
                    del self._stderr_buf[:-STDERR_KEPT]

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
            if not self.record and len(self.stdout_garbage) > GARBAGE_KEPT:
                del self.stdout_garbage[:-GARBAGE_KEPT]

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
        """Takes in messages received together and wakes the waiters. The
        callbacks for a notification run before any later message becomes
        visible, as if each message had been delivered on its own."""
        now = time.monotonic()
        record = self.record
        start = 0
        while start < len(messages):
            calls: list[Notification] = []
            with self._cv:
                callbacks = self._callbacks
                index = start
                while index < len(messages):
                    message = messages[index]
                    index += 1
                    if record:
                        self._messages.append(Received(now, message))
                        self._queue.append(message)
                    for item in message if type(message) is list else (message,):
                        if not isinstance(item, dict):
                            continue
                        if "id" not in item:
                            if "method" in item:
                                note = Notification(item["method"], item.get("params"), now)
                                self._take_notification(note)
                                if any(not methods or note.method in methods
                                       for _, methods in callbacks):
                                    calls.append(note)
                        elif "result" in item or "error" in item:
                            self._take_response_message(item)
                    if calls:
                        break
                self._cv.notify_all()
            start = index
            for note in calls:
                for callback, methods in callbacks:
                    if methods and note.method not in methods:
                        continue
                    try:
                        callback(note.method, note.params)
                    except Exception as exc:  # a failing callback must not stop the reader
                        print(f"notification callback failed: {exc!r}", file=sys.stderr)

    def _take_response_message(self, item: dict) -> None:
        """Keeps a response someone awaits (every one with ``record``), and
        claims the receipt of a ``download`` a wait will follow."""
        try:
            id = item["id"]
            if self.record or id in self._awaited:
                self._responses[id] = item
            if id in self._claiming:
                self._claiming.discard(id)
                result = item.get("result")
                if isinstance(result, dict) and "outcome" not in result:
                    self._waiting[result.get("receipt")] += 1
        except TypeError:  # an unhashable id (or receipt): only in the record
            pass

    def _take_notification(self, note: Notification) -> None:
        """Records a notification, keeps an outcome for :meth:`wait` and
        offers the notification to every waiting :meth:`wait_notification`."""
        if self.record:
            self._log.append(note)
        params = note.params
        if note.method == "download/finished" and isinstance(params, dict) \
                and isinstance(params.get("outcome"), dict):
            try:
                self._outcomes[params.get("receipt")] = params["outcome"]
            except TypeError:
                pass
            else:
                if not self.record:
                    self._drop_old_outcomes()
        for watch in self._watches:
            watch.offer(note)

    def _drop_old_outcomes(self) -> None:
        """Drops the oldest outcomes nobody waits for beyond ``keep_outcomes``;
        those a :meth:`wait` is waiting for stay until it takes them."""
        excess = len(self._outcomes) - self._keep_outcomes
        if self._waiting:
            excess -= sum(1 for receipt in self._waiting if receipt in self._outcomes)
        if excess <= 0:
            return
        if not self._waiting:
            for _ in range(excess):
                self._outcomes.popitem(last=False)
            return
        for receipt in [r for r in self._outcomes if r not in self._waiting][:excess]:
            del self._outcomes[receipt]
