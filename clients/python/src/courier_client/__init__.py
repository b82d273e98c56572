"""A client for courier: spawn it and drive it with JSON-RPC 2.0 over its
stdin and stdout.

    from courier_client import Courier, RpcError

    with Courier(".build/debug/courier", args=["--cache-dir", tmp]) as c:
        c.initialize(maxActive=2)
        outcome = c.fetch("http://127.0.0.1:8000/bytes/10", body="base64")
        assert outcome["ok"]

Keyword arguments of the convenience methods are sent as they are, so
courier's camelCase parameter names are used directly
(``c.download(url, cachePolicy="reload", body="text")``).

:class:`Courier` reads on a thread of its own and blocks its caller;
:class:`courier_client.aio.AsyncCourier` has the same methods for asyncio.

As a program::

    python3 -m courier_client --courier PATH [--body text] URL...

downloads the URLs at once and prints each outcome as one JSON line.
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
    DownloadError,
    Notification,
    Received,
    RpcError,
    frame,
)
from .aio import AsyncCourier, NotificationStream
from .cli import main
from .client import Courier

__version__ = "1.0.0"

__all__ = [
    "Courier",
    "AsyncCourier",
    "NotificationStream",
    "CourierError",
    "CourierExited",
    "RpcError",
    "DownloadError",
    "Notification",
    "Received",
    "CAPTURE",
    "frame",
    "main",
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "UNKNOWN_RECEIPT",
]
