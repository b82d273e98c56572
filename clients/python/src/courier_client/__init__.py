"""A client for courier: spawn it and drive it with JSON-RPC 2.0 over its
stdin and stdout.

    from courier_client import Courier

    with Courier(args=["--cache-dir", tmp]) as c:     # $COURIER, else courier on PATH
        outcome = c.fetch("http://127.0.0.1:8000/logo.png", destination="logo.png")
        assert outcome["ok"], outcome["error"]["code"]

Keyword arguments of the convenience methods are sent as they are, so
courier's camelCase parameter names are used directly
(``c.download(url, cachePolicy="reload", body="text", timeout=60)``); the
client's own waits take ``wait_timeout`` and have no limit unless given.

:class:`Courier` reads on a thread of its own and blocks its caller;
:class:`courier_client.aio.AsyncCourier` has the same methods for asyncio.

As a program::

    python3 -m courier_client [-o FILE | -d DIR] URL...

downloads the URLs into files and prints each outcome as one JSON line.
"""

from ._common import (
    CAPTURE,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNKNOWN_RECEIPT,
    CourierError,
    CourierExited,
    CourierNotFound,
    DownloadError,
    Notification,
    Received,
    RpcError,
    WaitTimeout,
    file_name,
    frame,
)
from ._types import (
    DownloadParams,
    DownloadProgress,
    DownloadRetrying,
    DownloadResult,
    DownloadState,
    Image,
    Outcome,
    OutcomeError,
    OutcomeErrorCode,
    OutcomeSource,
)
from .aio import AsyncCourier, NotificationStream
from .cli import main
from .client import Courier

__version__ = "2.0.0"

__all__ = [
    "Courier",
    "AsyncCourier",
    "NotificationStream",
    "CourierError",
    "CourierExited",
    "CourierNotFound",
    "RpcError",
    "DownloadError",
    "WaitTimeout",
    "Notification",
    "Received",
    "Outcome",
    "OutcomeError",
    "OutcomeErrorCode",
    "OutcomeSource",
    "Image",
    "DownloadResult",
    "DownloadState",
    "DownloadProgress",
    "DownloadRetrying",
    "DownloadParams",
    "CAPTURE",
    "file_name",
    "frame",
    "main",
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "UNKNOWN_RECEIPT",
]
