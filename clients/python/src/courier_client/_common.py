"""What the synchronous and the asyncio clients share: errors, message
records, framing."""

from __future__ import annotations

import json
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

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
    "Notification",
    "Received",
    "frame",
    "check_outcome",
    "Deframer",
]

CAPTURE = "capture"
"""``stderr=CAPTURE`` (the default) keeps courier's stderr in ``stderr_text``."""

FRAMINGS = ("ndjson", "lsp")

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
    ``"cancelled"`` ...), ``message`` its text, ``http_status`` and
    ``curl_code`` its optional details, ``outcome`` the whole outcome and
    ``receipt`` the receipt it belongs to (when known).
    """

    def __init__(self, outcome: Dict[str, Any], receipt: Any = None):
        error = outcome.get("error")
        if not isinstance(error, dict):
            error = {}
        self.outcome = outcome
        self.receipt = receipt
        self.code: Optional[str] = error.get("code")
        self.message: Optional[str] = error.get("message")
        self.http_status: Optional[int] = error.get("httpStatus")
        self.curl_code: Optional[int] = error.get("curlCode")
        text = f"{self.code}: {self.message}" if self.message else f"{self.code}"
        if receipt is not None:
            text = f"{receipt}: {text}"
        super().__init__(text)


class CourierExited(CourierError, RuntimeError):
    """courier's output ended (the process exited) while something was awaited."""


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


def check_outcome(outcome: Dict[str, Any], receipt: Any = None) -> Dict[str, Any]:
    """``outcome`` itself when it is ``ok``; else raises :class:`DownloadError`."""
    if not outcome.get("ok"):
        raise DownloadError(outcome, receipt)
    return outcome


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
