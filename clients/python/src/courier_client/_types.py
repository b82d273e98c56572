"""The shapes of what courier answers, as ``TypedDict``s, so that editors
and type checkers know an outcome's fields. They are plain dicts at run
time; courier may add fields, which are kept."""

from __future__ import annotations

from typing import Dict, List, Literal, Optional, TypedDict

__all__ = [
    "OutcomeSource",
    "OutcomeErrorCode",
    "DownloadState",
    "Image",
    "OutcomeError",
    "Outcome",
    "DownloadResult",
    "DownloadProgress",
    "DownloadRetrying",
    "DownloadParams",
]

OutcomeSource = Literal["network", "memory", "disk", "revalidated"]
"""Where a body came from; ``revalidated`` is a 304 answered from the cache."""

OutcomeErrorCode = Literal[
    "cancelled", "shutdown", "http_status", "unacceptable_content_type", "too_large",
    "timeout", "dns_failed", "connect_failed", "tls_failed", "too_many_redirects",
    "scheme_not_allowed", "insecure_redirect", "not_cached", "destination_not_allowed",
    "io", "integrity_mismatch", "network",
]
"""Why a download failed (protocol/README.md, "Outcome error codes")."""

DownloadState = Literal["queued", "running", "finished"]
"""A receipt's state when ``download`` answers."""


class Image(TypedDict):
    """An outcome's ``image``: the body is a PNG, JPEG, GIF or WebP."""

    format: Literal["png", "jpeg", "gif", "webp"]
    width: int
    height: int


class _OutcomeErrorFields(TypedDict):
    code: OutcomeErrorCode
    message: str


class OutcomeError(_OutcomeErrorFields, total=False):
    """An outcome's ``error``: match on ``code``; ``message`` is for people."""

    httpStatus: int
    """The status, with ``http_status``."""
    curlCode: int
    """libcurl's CURLcode, when the failure came from libcurl."""
    retryAfter: float
    """Seconds an origin's ``Retry-After`` asked for, when courier did not wait that long."""
    expected: str
    """With ``integrity_mismatch``: the digest asked for."""
    actual: str
    """With ``integrity_mismatch``: the digest of the body received."""


class _OutcomeFields(TypedDict):
    ok: bool
    url: str
    source: OutcomeSource
    size: int
    durationMs: float


class Outcome(_OutcomeFields, total=False):
    """How a receipt ended (``wait``, ``fetch``, ``download/finished``).

    ``error`` is there exactly when ``ok`` is false. ``path`` is
    ``destination`` when one was given; else (``body="none"``) a file in
    courier's cache directory that courier removes when it shuts down, that
    is when the client closes: give ``destination`` or copy it with
    ``keep()`` to keep it.
    """

    finalUrl: str
    status: Optional[int]
    httpVersion: Optional[str]
    headers: Dict[str, str]
    contentType: Optional[str]
    path: str
    text: str
    base64: str
    image: Image
    error: OutcomeError
    attempts: int
    """Requests to origins this outcome took (0 for a cache hit)."""
    resumedFrom: int
    """The byte offset the last attempt continued from, when not 0."""


class _DownloadResultFields(TypedDict):
    receipt: str
    task: str
    state: DownloadState
    reused: bool


class DownloadResult(_DownloadResultFields, total=False):
    """What ``download`` answers; ``outcome`` only with ``wait=True``."""

    source: Literal["memory", "disk"]
    outcome: Outcome


class DownloadProgress(TypedDict):
    """The params of a ``download/progress`` notification."""

    task: str
    receipts: List[str]
    received: int
    expected: Optional[int]
    fraction: Optional[float]
    bytesPerSecond: float


class DownloadRetrying(TypedDict):
    """The params of a ``download/retrying`` notification: an attempt of
    ``task`` failed with ``error`` (a transient one), and ``receipts`` wait
    ``delay`` seconds for attempt number ``attempt`` (2 for the first
    retry). Meanwhile the task's state is ``retrying``."""

    task: str
    receipts: List[str]
    attempt: int
    delay: float
    error: OutcomeError


class DownloadParams(TypedDict, total=False):
    """The resilience params of ``download``, for a ``**params`` dict that
    type checkers follow (every other param is in protocol/README.md)."""

    retries: int
    """More attempts a transient failure gets; 0 turns retrying off."""
    mirrors: List[str]
    """More http(s) URLs of the same resource, tried in turn."""
    integrity: str
    """What the body must hash to: ``sha256-<base64>`` (or sha384, sha512)."""
    maxRate: int
    """Bytes per second for this download."""
