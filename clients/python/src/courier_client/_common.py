"""What the synchronous and the asyncio clients share: errors, message
records, framing, finding courier, and the files outcomes name."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import unicodedata
import urllib.parse
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from ._types import Outcome

__all__ = [
    "CAPTURE",
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "UNKNOWN_RECEIPT",
    "CourierError",
    "RpcError",
    "DownloadError",
    "CourierExited",
    "CourierNotFound",
    "WaitTimeout",
    "Notification",
    "Received",
    "frame",
    "check_outcome",
    "Deframer",
    "DEFAULT",
    "file_name",
    "keep_file",
]

CAPTURE = "capture"
"""``stderr=CAPTURE`` (the default) keeps courier's stderr in ``stderr_text``."""

FRAMINGS = ("ndjson", "lsp")

STDERR_KEPT = 64 * 1024
"""Bytes of courier's stderr a client keeps (the last ones; all with ``record``)."""

GARBAGE_KEPT = 100
"""Pieces of ``stdout_garbage`` a client keeps (the last ones; all with ``record``)."""

# JSON-RPC error codes courier answers with (protocol/README.md, "Errors").
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNKNOWN_RECEIPT = -32001


class CourierError(Exception):
    """The base of every exception this package raises."""


class RpcError(CourierError):
    """An error response: ``code``, ``message``, ``data`` and the raw ``response``.

    ``code`` is the JSON-RPC error code (``INVALID_PARAMS``, ``UNKNOWN_RECEIPT``
    ...); ``data`` holds courier's details, e.g. ``{"param": "url"}``.
    """

    def __init__(self, code: Any, message: Any, data: Any = None,
                 response: Optional[Dict[str, Any]] = None):
        super().__init__(f"[{code}] {message}" + (f" ({data!r})" if data is not None else ""))
        self.code = code
        self.message = message
        self.data = data
        self.response = response

    @classmethod
    def from_response(cls, response: Dict[str, Any]) -> "RpcError":
        error = response.get("error")
        if not isinstance(error, dict):
            return cls(0, f"malformed error object: {error!r}", None, response)
        return cls(error.get("code"), error.get("message"), error.get("data"), response)


class DownloadError(CourierError):
    """A download that ended with ``"ok": false``.

    ``code`` is the outcome's ``error.code`` (``"http_status"``, ``"timeout"``,
    ``"cancelled"`` ...), ``message`` its text, ``http_status``,
    ``curl_code``, ``retry_after`` (seconds: an origin's ``Retry-After``
    that courier did not wait for) and, with ``integrity_mismatch``,
    ``expected`` and ``actual`` (the digests asked for and received) its
    optional details, ``attempts`` the requests it took,
    ``outcome`` the whole outcome and ``receipt`` the receipt it belongs to
    (when known).
    """

    def __init__(self, outcome: Outcome, receipt: Any = None):
        error: Dict[str, Any] = dict(outcome.get("error") or {})
        self.outcome = outcome
        self.receipt = receipt
        self.code: Optional[str] = error.get("code")
        self.message: Optional[str] = error.get("message")
        self.http_status: Optional[int] = error.get("httpStatus")
        self.curl_code: Optional[int] = error.get("curlCode")
        self.retry_after: Optional[float] = error.get("retryAfter")
        self.expected: Optional[str] = error.get("expected")
        self.actual: Optional[str] = error.get("actual")
        self.attempts: int = outcome.get("attempts", 0)
        text = f"{self.code}: {self.message}" if self.message else f"{self.code}"
        if receipt is not None:
            text = f"{receipt}: {text}"
        super().__init__(text)


class CourierExited(CourierError, RuntimeError):
    """courier's output ended (the process exited) while something was awaited."""


class CourierNotFound(CourierError, FileNotFoundError):
    """courier could not be started: no such file, not on ``PATH``, or not
    executable. The message names the path tried and where it came from
    (the ``binary`` argument, ``$COURIER`` or ``PATH``)."""


class WaitTimeout(CourierError, TimeoutError):
    """A client-side wait ran past the ``wait_timeout`` it was given.

    Only the wait ends: courier goes on with what was asked (a download
    keeps running until it finishes, is cancelled, or the client closes).
    """


GOES_ON = ("; the download goes on until it ends, cancel() ends it, or the client closes "
           "(which ends it with error shutdown)")
"""What a :class:`WaitTimeout` for an outcome adds."""

DEFAULT: Any = object()
"""``wait_timeout`` left out: the client's own ``wait_timeout`` applies."""


class Notification(NamedTuple):
    method: str
    params: Any
    time: float  # time.monotonic() when received


class Received(NamedTuple):
    time: float  # time.monotonic() when received
    message: Any  # a dict, or a list for a batch


def frame(obj: Any, framing: str = "ndjson") -> bytes:
    """Serialise one message (object or batch array) in the given framing."""
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if framing == "ndjson":
        return body + b"\n"
    if framing == "lsp":
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    raise ValueError(f"unknown framing {framing!r}")


def check_outcome(outcome: Outcome, receipt: Any = None) -> Outcome:
    """``outcome`` itself when it is ``ok``; else raises :class:`DownloadError`."""
    if not outcome.get("ok"):
        raise DownloadError(outcome, receipt)
    return outcome


def executable(binary: Optional[Union[str, "os.PathLike[str]"]]) -> Tuple[str, str]:
    """The courier to start and where that name came from: ``binary`` when
    given, else ``$COURIER``, else ``courier`` on ``PATH``. A path with a
    directory in it is made absolute against the caller's working directory,
    whatever ``cwd`` courier gets; a bare name is looked up on ``PATH``."""
    if binary is not None:
        path, source = os.fspath(binary), "the binary argument"
    elif os.environ.get("COURIER"):
        path, source = os.environ["COURIER"], "$COURIER"
    else:
        path, source = "courier", "the default"
    if os.sep in path or (os.altsep and os.altsep in path):
        path = os.path.abspath(path)
    return path, source


def spawn_error(error: OSError, path: str, source: str) -> CourierNotFound:
    """The :class:`CourierNotFound` for the ``error`` that starting ``path``
    (chosen by ``source``, see :func:`executable`) raised."""
    if os.path.isabs(path):
        what = (f"no such file {path!r}" if isinstance(error, FileNotFoundError)
                else f"{path!r} cannot be run ({error.strerror or error})")
    else:
        what = f"no {path!r} on PATH"
    return CourierNotFound(
        f"cannot start courier: {what} (from {source}); pass its path as the binary, "
        f"set COURIER=/path/to/courier, or put courier on PATH")


def absolute_destination(params: Dict[str, Any]) -> Dict[str, Any]:
    """``params`` with a relative ``destination`` joined to the caller's
    working directory (courier takes absolute paths only); an absolute one
    is sent exactly as given."""
    if "destination" in params:
        destination = params["destination"]
        if isinstance(destination, os.PathLike):
            destination = os.fspath(destination)
        if isinstance(destination, str) and destination and not os.path.isabs(destination):
            destination = os.path.join(os.getcwd(), destination)
        params["destination"] = destination
    return params


def file_name(url: str) -> str:
    """The name a file downloaded from ``url`` gets, as curl's ``-O`` and
    aria2c choose it: the last segment of the URL's path, percent-decoded,
    with ``/``, ``\\``, NUL and control characters replaced by ``_``;
    ``index.html`` when that leaves nothing, ``.`` or ``..``."""
    segment = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
    name = "".join("_" if ch in "/\\" or unicodedata.category(ch) == "Cc" else ch
                   for ch in urllib.parse.unquote(segment, errors="replace"))
    return "index.html" if name in ("", ".", "..") else name


def keep_file(outcome: Outcome, destination: Union[str, "os.PathLike[str]"]) -> str:
    """Copies the file an outcome's ``path`` names to ``destination`` and
    returns the copy's absolute path.

    ``destination`` is relative to the working directory; an existing
    directory receives the file under :func:`file_name` of the outcome's
    ``url``, and missing directories are made, as courier makes them for a
    ``destination``. The copy is written beside its place and renamed into
    it, so ``destination`` never holds part of a body.
    """
    source = outcome.get("path")
    if not isinstance(source, str):
        raise ValueError("the outcome names no file: it failed, or its body was "
                         "asked as text or base64")
    target = os.path.abspath(os.fspath(destination))
    if os.path.isdir(target):
        target = os.path.join(target, file_name(outcome.get("url", "")))
    if os.path.exists(target) and os.path.samefile(source, target):
        return target
    directory, name = os.path.split(target)
    os.makedirs(directory, exist_ok=True)
    partial, out = _exclusive_file(directory, f".{name}")
    try:
        with out, open(source, "rb") as body:
            shutil.copyfileobj(body, out, 1 << 20)
        os.replace(partial, target)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise
    return target


def _exclusive_file(directory: str, prefix: str) -> Tuple[str, Any]:
    """A new file ``<prefix>.<random>.partial`` in ``directory``, created
    exclusively with the mode the umask gives new files; its path and the
    open binary file."""
    while True:
        path = os.path.join(directory, f"{prefix}.{secrets.token_hex(6)}.partial")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        return path, os.fdopen(fd, "wb")


UNSET: Any = object()
"""A param left out, where ``None`` means JSON null (``bind``'s ``task``)."""


def given(extra: Optional[Dict[str, Any]] = None, **params: Any) -> Dict[str, Any]:
    """A request's params: ``extra``, then each of ``params`` that is neither
    ``None`` nor :data:`UNSET`, by name."""
    named = dict(extra or {})
    named.update({name: value for name, value in params.items() if value is not None and value is not UNSET})
    return named


def target_params(receipt: Any, task: Any, extra: Dict[str, Any]) -> Dict[str, Any]:
    return given(extra, receipt=receipt, task=task)


def cancel_params(receipt: Any, slot: Optional[str], all: bool, extra: Dict[str, Any]) -> Dict[str, Any]:
    return given(extra, receipt=receipt, slot=slot, all=True if all else None)


def bind_params(view: str, task: Any, receipt: Any, kind: Optional[str]) -> Dict[str, Any]:
    """``bind``'s params; ``task=None`` (JSON null) unbinds, so only
    :data:`UNSET` leaves ``task`` and ``receipt`` out."""
    params = given({"view": view}, kind=kind)
    params.update({name: value for name, value in (("task", task), ("receipt", receipt)) if value is not UNSET})
    return params


class Deframer:
    """Splits the bytes courier writes into message bodies, as they come.

    :meth:`feed` and :meth:`finish` (at end of output) return a list of
    ``(True, body)`` for each message and ``(False, bytes)`` for anything
    that is not a well-formed message. ndjson bodies keep their line end.
    """

    def __init__(self, framing: str = "ndjson"):
        if framing not in FRAMINGS:
            raise ValueError(f"unknown framing {framing!r}")
        self.framing = framing
        self._buf = bytearray()
        self._scan = 0
        self._headers = bytearray()
        self._length: Optional[int] = None
        self._in_body = False

    def feed(self, data: bytes) -> List[Tuple[bool, bytes]]:
        self._buf += data
        out: List[Tuple[bool, bytes]] = []
        if self.framing == "ndjson":
            self._ndjson(out)
        else:
            self._lsp(out)
        return out

    def finish(self) -> List[Tuple[bool, bytes]]:
        out: List[Tuple[bool, bytes]] = []
        rest = bytes(self._buf)
        self._buf.clear()
        self._scan = 0
        if self.framing == "ndjson":
            if rest.strip():
                out.append((True, rest))
        else:
            left = bytes(self._headers) + rest
            if self._in_body or left.strip():
                out.append((False, left))
            self._headers.clear()
            self._in_body = False
        return out

    def _line(self) -> Optional[bytes]:
        end = self._buf.find(b"\n", self._scan)
        if end < 0:
            self._scan = len(self._buf)
            return None
        line = bytes(self._buf[:end + 1])
        del self._buf[:end + 1]
        self._scan = 0
        return line

    def _ndjson(self, out: List[Tuple[bool, bytes]]) -> None:
        while True:
            line = self._line()
            if line is None:
                return
            if line.strip():
                out.append((True, line))

    def _lsp(self, out: List[Tuple[bool, bytes]]) -> None:
        while True:
            if self._in_body:
                length = self._length or 0
                if len(self._buf) < length:
                    return
                out.append((True, bytes(self._buf[:length])))
                del self._buf[:length]
                self._headers.clear()
                self._length = None
                self._in_body = False
                continue
            line = self._line()
            if line is None:
                return
            if line in (b"\r\n", b"\n"):
                if not self._headers:
                    continue
                if self._length is None or self._length < 0:
                    out.append((False, bytes(self._headers)))
                    self._headers.clear()
                    self._length = None
                    continue
                self._in_body = True
                continue
            self._headers += line
            name, sep, value = line.decode("latin-1").partition(":")
            if sep and name.strip().lower() == "content-length":
                try:
                    self._length = int(value.strip())
                except ValueError:
                    self._length = None
