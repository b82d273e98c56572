"""The asyncio client.

    from courier_client.aio import AsyncCourier

    async with AsyncCourier(".build/debug/courier", args=["--max-active", "8"]) as courier:
        courier.on_notification(print, "download/progress")
        result = await courier.download("https://example.org/logo.png", body="base64")
        outcome = await courier.wait(result["receipt"], raise_on_error=True)

Notifications come as callbacks (:meth:`AsyncCourier.on_notification`,
plain functions or coroutine functions) and as async iterators
(:meth:`AsyncCourier.notifications`).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import json
import logging
import os
import subprocess
import time
import weakref
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    List,
    Optional,
    Sequence,
    Set,
    Union,
    cast,
)

from ._common import (
    CAPTURE,
    DEFAULT,
    FRAMINGS,
    GARBAGE_KEPT,
    GOES_ON,
    STDERR_KEPT,
    CourierExited,
    Deframer,
    Notification,
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

__all__ = ["AsyncCourier", "NotificationStream"]

log = logging.getLogger("courier_client")

NotificationCallback = Callable[[str, Any], Union[None, Awaitable[None]]]

_READ_SIZE = 1 << 16



async def _within(awaitable: Awaitable[Any], limit: Optional[float], what: str) -> Any:
    """``awaitable``'s result; :class:`WaitTimeout` after ``limit`` seconds
    (None: no limit)."""
    if limit is None:
        return await awaitable
    try:
        return await asyncio.wait_for(awaitable, limit)
    except asyncio.TimeoutError:
        raise WaitTimeout(f"{what} within {limit} s") from None


class NotificationStream:
    """An async iterator over the notifications received from its creation on
    (optionally only those of some methods). It ends when courier's output
    ends. Leaving ``async with`` (or :meth:`close`) stops it; so does dropping
    the last reference to it."""

    def __init__(self, courier: "AsyncCourier", methods: Sequence[str]):
        self._methods = frozenset(methods)
        self._queue: Deque[Notification] = collections.deque()
        self._wakeup: Optional[asyncio.Future[None]] = None
        self._closed = False
        self._courier = courier
        if courier._eof:
            self._closed = True
        else:
            courier._streams.add(self)

    def _push(self, note: Notification) -> None:
        if self._closed or (self._methods and note.method not in self._methods):
            return
        self._queue.append(note)
        self._wake()

    def _end(self) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def close(self) -> None:
        """Stop receiving; what was already received can still be read."""
        self._courier._streams.discard(self)
        self._end()

    def __aiter__(self) -> "NotificationStream":
        return self

    async def __anext__(self) -> Notification:
        while not self._queue:
            if self._closed:
                raise StopAsyncIteration
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None
        return self._queue.popleft()

    async def next(self, wait_timeout: Optional[float] = None) -> Notification:
        """The next notification; raises :class:`CourierExited` at the end and
        :class:`WaitTimeout` when none comes within ``wait_timeout`` seconds."""
        try:
            return await _within(self.__anext__(), wait_timeout, "no notification")
        except StopAsyncIteration:
            raise CourierExited("courier's output ended: no further notification") from None

    async def __aenter__(self) -> "NotificationStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncCourier:
    """A running courier process and a JSON-RPC session with it, for asyncio.

    The arguments are those of :class:`courier_client.Courier`. The process
    starts in ``async with`` or :meth:`start`; leaving ``async with`` (or
    :meth:`close`) sends ``shutdown`` and ``exit`` and waits for it to end.

    ``keep_outcomes`` bounds how many outcomes of finished receipts are kept
    for a later :meth:`wait` (the oldest go first); :meth:`wait` takes an
    outcome out when it returns it.

    ``wait_timeout`` is how long, in seconds, each wait of this client lasts
    unless the call gives its own: None (the default) waits as long as
    courier runs (a courier that exits raises :class:`CourierExited` in every
    waiter). A transfer's own limit is courier's ``timeout``.
    """

    def __init__(self, binary: Union[str, "os.PathLike[str]", None] = None,
                 args: Sequence[object] = (),
                 framing: str = "ndjson", env: Optional[Dict[str, Optional[str]]] = None,
                 stderr: Any = CAPTURE, cwd: Union[str, "os.PathLike[str]", None] = None, *,
                 wait_timeout: Optional[float] = None, keep_outcomes: int = 10000):
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}")
        self.framing = framing
        path, self._source = executable(binary)
        self.argv = [path, *map(str, args)]
        self.wait_timeout = wait_timeout
        self._env = env
        self._stderr = stderr
        self._cwd = cwd
        self._keep_outcomes = keep_outcomes

        self.proc: Optional[asyncio.subprocess.Process] = None
        self._ids = itertools.count(1)
        self._pending: Dict[Any, asyncio.Future[Dict[str, Any]]] = {}
        self._outcomes: "collections.OrderedDict[Any, Outcome]" = collections.OrderedDict()
        self._waiters: Dict[Any, List[asyncio.Future[Outcome]]] = {}
        self._callbacks: List[tuple] = []
        self._streams: "weakref.WeakSet[NotificationStream]" = weakref.WeakSet()
        self._tasks: Set[asyncio.Task[Any]] = set()
        self._write_lock: Optional[asyncio.Lock] = None
        self._reader: Optional[asyncio.Task[None]] = None
        self._stderr_reader: Optional[asyncio.Task[None]] = None
        self._stderr_file: Any = None
        self._stderr_buf = bytearray()
        self._eof = False
        self._shutdown_sent = False
        self._exit_sent = False

        self.stdout_garbage: List[bytes] = []
        """Anything on courier's stdout that was not a well-formed message
        (the last 100 pieces)."""

    # -- process ---------------------------------------------------------------

    async def start(self) -> "AsyncCourier":
        """Spawn courier (once); returns ``self``."""
        if self.proc is not None:
            return self
        full_env = None
        if self._env is not None:
            full_env = dict(os.environ)
            for name, value in self._env.items():
                if value is None:
                    full_env.pop(name, None)
                else:
                    full_env[name] = value
        stderr = self._stderr
        if stderr == CAPTURE:
            stderr_arg: Any = subprocess.PIPE
        elif isinstance(stderr, (str, os.PathLike)):
            self._stderr_file = open(stderr, "ab")
            stderr_arg = self._stderr_file
        else:
            stderr_arg = stderr
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr_arg, env=full_env, cwd=self._cwd,
            )
        except OSError as error:
            if self._stderr_file is not None:
                self._stderr_file.close()
            if self._cwd is not None and error.filename == os.fspath(self._cwd):
                raise
            raise spawn_error(error, self.argv[0], self._source) from error
        except BaseException:
            if self._stderr_file is not None:
                self._stderr_file.close()
            raise
        self._write_lock = asyncio.Lock()
        self._reader = asyncio.ensure_future(self._read_loop())
        if stderr == CAPTURE:
            self._stderr_reader = asyncio.ensure_future(self._drain_stderr())
        return self

    def _process(self) -> asyncio.subprocess.Process:
        if self.proc is None:
            raise RuntimeError("courier is not started: use `async with` or `await start()`")
        return self.proc

    @property
    def pid(self) -> int:
        return self._process().pid

    @property
    def returncode(self) -> Optional[int]:
        return self._process().returncode

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not self._eof

    @property
    def stderr_text(self) -> str:
        """courier's stderr so far (with ``stderr=CAPTURE``; its last 64 KiB)."""
        return self._stderr_buf.decode("utf-8", "replace")

    def _limit(self, wait_timeout: Optional[float]) -> Optional[float]:
        """The limit a call's ``wait_timeout`` means: the client's when left out."""
        return self.wait_timeout if wait_timeout is DEFAULT else wait_timeout

    async def wait_exit(self, wait_timeout: Optional[float] = DEFAULT) -> int:
        """Wait for the process to end; returns its exit code."""
        return await _within(self._process().wait(), self._limit(wait_timeout),
                             "courier did not exit")

    async def close(self, wait_timeout: float = 5) -> Optional[int]:
        """End the session: ``shutdown`` and ``exit`` unless already sent, close
        stdin, wait for the process (killing it if it hangs). Returns its exit code.

        ``shutdown`` ends every unfinished download with error ``shutdown``
        and courier removes the temporary files that outcomes without a
        ``destination`` name. ``wait_timeout`` bounds each of the waits here.
        """
        proc = self.proc
        if proc is None:
            return None
        if proc.returncode is None and not self._eof:
            if not self._shutdown_sent:
                try:
                    await self.shutdown(wait_timeout=wait_timeout)
                except (RpcError, CourierExited, WaitTimeout):
                    pass
            if not self._exit_sent:
                try:
                    await self.exit()
                except CourierExited:
                    pass
        self.close_stdin()
        try:
            await asyncio.wait_for(proc.wait(), wait_timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
        for task in (self._reader, self._stderr_reader):
            if task is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(task), 2)
                except asyncio.TimeoutError:
                    task.cancel()
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None
        return proc.returncode

    def close_stdin(self) -> None:
        """Close courier's stdin (end of input)."""
        stdin = self._process().stdin
        if stdin is not None and not stdin.is_closing():
            try:
                stdin.close()
            except OSError:
                pass

    async def kill(self) -> int:
        proc = self._process()
        if proc.returncode is None:
            proc.kill()
        return await proc.wait()

    async def __aenter__(self) -> "AsyncCourier":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- writing ---------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        """Write bytes to courier's stdin exactly as given."""
        proc = self._process()
        assert proc.stdin is not None and self._write_lock is not None
        async with self._write_lock:
            try:
                if proc.stdin.is_closing():
                    raise BrokenPipeError("stdin is closed")
                proc.stdin.write(data)
                await proc.stdin.drain()
            except (OSError, RuntimeError) as exc:
                raise CourierExited(await self._exit_description("cannot write")) from exc

    async def send_message(self, obj: Any) -> None:
        """Frame one message (an object or a batch array) and write it."""
        await self.send_raw(frame(obj, self.framing))

    def next_id(self) -> int:
        return next(self._ids)

    async def request(self, method: str, params: Any = None,
                      wait_timeout: Optional[float] = DEFAULT) -> Any:
        """Send a request and return its result; raises :class:`RpcError`."""
        if self._eof:
            raise CourierExited(await self._exit_description(f"cannot send {method}"))
        id = self.next_id()
        message: Dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        future: asyncio.Future[Dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[id] = future
        try:
            await self.send_message(message)
            response = await _within(future, self._limit(wait_timeout),
                                     f"no response to {method} (id {id})")
        finally:
            self._pending.pop(id, None)
        if "error" in response:
            raise RpcError.from_response(response)
        return response.get("result")

    async def notify(self, method: str, params: Any = None) -> None:
        message: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send_message(message)

    # -- notifications -----------------------------------------------------------

    def on_notification(self, callback: NotificationCallback,
                        *methods: str) -> Callable[[], None]:
        """Call ``callback(method, params)`` for each notification received from
        now on (only those of ``methods`` when given). A coroutine function's
        coroutine runs as a task. Returns a function that removes the callback."""
        entry = (callback, frozenset(methods))
        self._callbacks.append(entry)

        def remove() -> None:
            try:
                self._callbacks.remove(entry)
            except ValueError:
                pass

        return remove

    def notifications(self, *methods: str) -> NotificationStream:
        """An async iterator over the notifications received from now on (only
        those of ``methods`` when given); it ends when courier's output ends::

            async with courier.notifications("download/progress") as stream:
                async for note in stream:
                    print(note.params["received"])
        """
        return NotificationStream(self, methods)

    async def progress_updates(self, receipt: Any) -> AsyncIterator[Dict[str, Any]]:
        """The params of each ``download/progress`` of ``receipt``'s task, until
        the receipt finishes."""
        async with self.notifications("download/progress", "download/finished") as stream:
            async for note in stream:
                params = note.params if isinstance(note.params, dict) else {}
                if note.method == "download/finished":
                    if params.get("receipt") == receipt:
                        return
                elif receipt in (params.get("receipts") or ()):
                    yield params

    # -- lifecycle methods -------------------------------------------------------

    async def initialize(self, clientInfo: Optional[Dict[str, Any]] = None,
                         wait_timeout: Optional[float] = DEFAULT, **options: Any) -> Dict[str, Any]:
        """``initialize``; keyword arguments become ``options``."""
        params = given(clientInfo=clientInfo, options=options or None)
        result: Dict[str, Any] = await self.request("initialize", params, wait_timeout)
        return result

    async def shutdown(self, wait_timeout: Optional[float] = DEFAULT) -> Any:
        self._shutdown_sent = True
        return await self.request("shutdown", None, wait_timeout)

    async def exit(self) -> None:
        """Send the ``exit`` notification."""
        self._exit_sent = True
        await self.notify("exit")

    async def discover(self) -> Dict[str, Any]:
        result: Dict[str, Any] = await self.request("rpc.discover")
        return result

    # -- downloads -------------------------------------------------------------

    async def download(self, url: str, wait_timeout: Optional[float] = DEFAULT,
                       **params: Any) -> DownloadResult:
        """``download``; returns its result (``receipt``, ``task``, ``state`` ...,
        and ``outcome`` with ``wait=True``).

        Every keyword but ``wait_timeout`` is a ``download`` param, in
        courier's names: ``timeout`` is courier's limit for the transfer. A
        relative ``destination`` is taken from the current directory.
        """
        result: DownloadResult = await self.request(
            "download", absolute_destination({"url": url, **params}), wait_timeout)
        if isinstance(result, dict) and "outcome" in result:
            self._outcomes.pop(result.get("receipt"), None)
        return result

    async def wait(self, receipt: Any, wait_timeout: Optional[float] = DEFAULT,
                   raise_on_error: bool = False) -> Outcome:
        """The outcome of ``receipt`` (its ``download/finished``), whether it
        came before or after this call; returned once.

        No limit unless ``wait_timeout`` (here or the client's) sets one:
        courier's own transfer ``timeout`` ends a download that stalls. When
        the wait times out the download goes on (:class:`WaitTimeout`).
        With ``raise_on_error=True`` an outcome that is not ``ok`` raises
        :class:`DownloadError` (its ``code`` is the outcome's ``error.code``).
        """
        outcome = self._outcomes.pop(receipt, None)
        if outcome is None:
            if self._eof:
                raise CourierExited(await self._exit_description(f"no outcome for {receipt!r}"))
            future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(receipt, []).append(future)
            try:
                outcome = await _within(future, self._limit(wait_timeout),
                                        f"no outcome for {receipt!r}")
            except WaitTimeout as timeout:
                raise WaitTimeout(f"{timeout}{GOES_ON}") from None
            finally:
                waiters = self._waiters.get(receipt)
                if waiters is not None:
                    if future in waiters:
                        waiters.remove(future)
                    if not waiters:
                        del self._waiters[receipt]
        return check_outcome(outcome, receipt) if raise_on_error else outcome

    async def fetch(self, url: str, wait_timeout: Optional[float] = DEFAULT,
                    raise_on_error: bool = False, **params: Any) -> Outcome:
        """Download and return the outcome (a ``download`` with ``wait: true``).

        ``wait_timeout`` bounds the wait (none by default); every other
        keyword is a ``download`` param (``timeout`` is courier's limit for
        the transfer); ``raise_on_error`` as for :meth:`wait`.
        """
        limit = self._limit(wait_timeout)
        deadline = None if limit is None else time.monotonic() + limit
        params.setdefault("wait", True)
        try:
            result = await self.download(url, wait_timeout=limit, **params)
        except WaitTimeout as timeout:
            raise WaitTimeout(f"{timeout}{GOES_ON}" if params["wait"] else str(timeout)) from None
        if "outcome" in result:
            outcome = result["outcome"]
            return check_outcome(outcome, result.get("receipt")) if raise_on_error else outcome
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        return await self.wait(result["receipt"], remaining, raise_on_error)

    async def keep(self, outcome: Outcome, destination: Union[str, "os.PathLike[str]"]) -> str:
        """Copies the file of an outcome without ``destination`` (a temporary
        one, removed when the client closes) to ``destination``, in a thread;
        returns the copy's absolute path. A relative ``destination`` is taken
        from the current directory; a directory gets the URL's file name."""
        return await asyncio.get_running_loop().run_in_executor(None, keep_file, outcome, destination)

    async def cancel(self, receipt: Any = None, slot: Optional[str] = None, all: bool = False,
                     **extra: Any) -> Dict[str, Any]:
        result: Dict[str, Any] = await self.request("cancel", cancel_params(receipt, slot, all, extra))
        return result

    async def progress(self, receipt: Any = None, **extra: Any) -> Dict[str, Any]:
        result: Dict[str, Any] = await self.request("progress", given(extra, receipt=receipt))
        return result

    async def suspend(self, receipt: Any = None, task: Any = None, **extra: Any) -> Any:
        return await self.request("suspend", target_params(receipt, task, extra))

    async def resume(self, receipt: Any = None, task: Any = None, **extra: Any) -> Any:
        return await self.request("resume", target_params(receipt, task, extra))

    # -- bindings, indicator, cache ------------------------------------------------

    async def bind(self, view: str, task: Any = UNSET, receipt: Any = UNSET,
                   kind: Optional[str] = None) -> Any:
        """``bind``; pass ``task=None`` to unbind the view."""
        return await self.request("bind", bind_params(view, task, receipt, kind))

    async def indicator_state(self) -> Dict[str, Any]:
        result: Dict[str, Any] = await self.request("indicator/state")
        return result

    async def indicator_configure(self, **params: Any) -> Any:
        return await self.request("indicator/configure", params)

    async def indicator_increment(self) -> Any:
        return await self.request("indicator/increment")

    async def indicator_decrement(self) -> Any:
        return await self.request("indicator/decrement")

    async def cache_stats(self) -> Dict[str, Any]:
        result: Dict[str, Any] = await self.request("cache/stats")
        return result

    async def cache_lookup(self, url: Optional[str] = None, **params: Any) -> Dict[str, Any]:
        result: Dict[str, Any] = await self.request("cache/lookup", given(params, url=url))
        return result

    async def cache_remove(self, url: Optional[str] = None, **params: Any) -> Any:
        return await self.request("cache/remove", given(params, url=url))

    async def cache_clear(self, memory: Optional[bool] = None,
                          disk: Optional[bool] = None) -> Any:
        return await self.request("cache/clear", given(memory=memory, disk=disk))

    # -- reading ---------------------------------------------------------------

    async def _exit_description(self, what: str) -> str:
        code: Optional[int] = None
        if self.proc is not None:
            try:
                code = await asyncio.wait_for(self.proc.wait(), 0.5)
            except asyncio.TimeoutError:
                code = None
        state = "still running" if code is None else f"exit code {code}"
        tail = self.stderr_text[-2000:].strip()
        message = f"courier's output ended ({state}): {what}"
        return message + (f"\n--- courier stderr (tail) ---\n{tail}" if tail else "")

    async def _drain_stderr(self) -> None:
        stream = self._process().stderr
        assert stream is not None
        while True:
            try:
                data = await stream.read(_READ_SIZE)
            except (OSError, ValueError):
                break
            if not data:
                break
            self._stderr_buf += data
            if len(self._stderr_buf) > 2 * STDERR_KEPT:
                del self._stderr_buf[:-STDERR_KEPT]

    async def _read_loop(self) -> None:
        stream = self._process().stdout
        assert stream is not None
        deframer = Deframer(self.framing)
        why = "courier's output ended"
        try:
            while True:
                try:
                    data = await stream.read(_READ_SIZE)
                except (OSError, ValueError):
                    data = b""
                if not data:
                    break
                for is_message, chunk in deframer.feed(data):
                    self._take(is_message, chunk)
            for is_message, chunk in deframer.finish():
                self._take(is_message, chunk)
            if self._stderr_reader is not None:
                await asyncio.wait({self._stderr_reader}, timeout=0.5)
            why = await self._exit_description("no further message")
        finally:
            self._end(why)

    def _garbage(self, data: bytes) -> None:
        self.stdout_garbage.append(data)
        if len(self.stdout_garbage) > GARBAGE_KEPT:
            del self.stdout_garbage[:-GARBAGE_KEPT]

    def _take(self, is_message: bool, data: bytes) -> None:
        if not is_message:
            self._garbage(data)
            return
        try:
            message = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            self._garbage(data)
            return
        now = time.monotonic()
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict):
                continue
            if "method" in item and "id" not in item:
                self._notification(Notification(item["method"], item.get("params"), now))
            elif "id" in item and ("result" in item or "error" in item):
                try:
                    future = self._pending.get(item["id"])
                except TypeError:  # an unhashable id
                    continue
                if future is not None and not future.done():
                    future.set_result(item)

    def _notification(self, note: Notification) -> None:
        params = note.params
        if note.method == "download/finished" and isinstance(params, dict):
            receipt = params.get("receipt")
            outcome = params.get("outcome")
            if isinstance(outcome, dict):
                outcome = cast(Outcome, outcome)
                try:
                    waiters = self._waiters.pop(receipt, [])
                except TypeError:
                    waiters = []
                live = [w for w in waiters if not w.done()]
                for waiter in live:
                    waiter.set_result(outcome)
                if not live and self._keep_outcomes > 0:
                    try:
                        self._outcomes[receipt] = outcome
                    except TypeError:
                        pass
                    while len(self._outcomes) > self._keep_outcomes:
                        self._outcomes.popitem(last=False)
        for callback, methods in list(self._callbacks):
            if methods and note.method not in methods:
                continue
            try:
                result = callback(note.method, params)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    self._tasks.add(task)
                    task.add_done_callback(self._callback_done)
            except Exception:  # a failing callback must not stop the reader
                log.exception("notification callback failed for %s", note.method)
        for stream in list(self._streams):
            stream._push(note)

    def _callback_done(self, task: "asyncio.Task[Any]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("notification callback failed", exc_info=task.exception())

    def _end(self, why: str) -> None:
        self._eof = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(CourierExited(why))
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_exception(CourierExited(why))
        self._waiters.clear()
        for stream in list(self._streams):
            stream._end()
        self._streams.clear()
