#!/usr/bin/env python3
"""A deterministic HTTP/1.1 origin server for courier's tests and demos.

Importable::

    from origin import Origin
    with Origin() as o:
        url = o.url("/bytes/10")      # http://127.0.0.1:PORT/bytes/10
        ...
        o.hits("/bytes/10")           # requests seen for that path

or runnable::

    python3 scripts/origin.py [--port N] [--tls CERT KEY] [--verbose]

which prints ``PORT <n>`` on stdout and serves until killed (or until its stdin,
when it is a pipe, reaches end of file).

Routes (GET, and HEAD where it makes sense):

    /                       index text
    /bytes/N                N bytes of pattern(N, seed); ?seed=S ?chunked=1 ?cache-control=V
    /drip                   ?size=N&chunks=K&interval=S&length=0&delay=S&seed=S
    /stall                  ?after=N&hold=S: announce 1000000 bytes, send N, hang
    /truncate               ?size=N&send=M: announce N bytes, send M, close
    /status/CODE            that status, body "status CODE"
    /redirect/N             302 chain down to /redirect/0 ("redirected")
    /loop                   302 to itself
    /redirect-to            ?url=U&status=302
    /cache                  ?max-age ?etag ?last-modified ?expires ?no-store
                            ?no-cache ?vary ?body ?status ?age ?cache-control
    /res/<name>             resources defined with Origin.set_resource()
    /gzip                   ?size=N: gzip_plain(N), gzip-encoded when accepted
    /text                   ?charset=C&text=T&declare=0&type=text/plain
    /text/invalid-utf8      b"ok \\xff\\xfe bad" labelled utf-8
    /type                   ?ct=TYPE: a small body of that Content-Type
    /image/png|jpeg|gif|webp  ?w=W&h=H (default 3x2)
    /headers                the request headers as JSON (lower-case names)
    /slow-headers           ?delay=S before anything is sent
    /_hits                  ?path=P: {"path": P, "hits": n} (not counted)
    /_reset                 reset hit counters (not counted)
"""

from __future__ import annotations

import argparse
import email.utils
import functools
import gzip
import hashlib
import http.server
import json
import os
import socket
import ssl
import stat
import struct
import sys
import threading
import time
import zlib
from typing import Callable, Iterable
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "Origin",
    "pattern",
    "gzip_plain",
    "image_bytes",
    "png_bytes",
    "gif_bytes",
    "jpeg_bytes",
    "webp_bytes",
    "DEFAULT_TEXT",
    "LATIN1_TEXT",
    "INVALID_UTF8",
]

DEFAULT_TEXT = "Grüße, café — naïve ✓"
LATIN1_TEXT = "Grüße, café, naïve"
ASCII_TEXT = "Gruesse, cafe, naive"
INVALID_UTF8 = b"ok \xff\xfe bad"

STALL_CONTENT_LENGTH = 1_000_000
_STREAM_CHUNK = 256 * 1024
# A prime period keeps the pattern from lining up with power-of-two buffer
# sizes, so a misplaced or repeated block of a download is detectable.
_PATTERN_PERIOD = 65521


# --------------------------------------------------------------------------
# Deterministic content


@functools.lru_cache(maxsize=64)
def _pattern_block(seed: str) -> bytes:
    digests = b"".join(
        hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in range(2048)
    )
    return digests[:_PATTERN_PERIOD]


def pattern(n: int, seed: str = "", offset: int = 0) -> bytes:
    """Return ``n`` deterministic bytes for ``seed``, starting at ``offset``.

    ``pattern(n, s)[a:b] == pattern(b - a, s, offset=a)``.
    """
    if n <= 0:
        return b""
    block = _pattern_block(seed)
    start = offset % len(block)
    reps = (start + n) // len(block) + 1
    return (block * reps)[start:start + n]


_PLAIN_LINE = b"the quick brown fox jumps over the lazy dog 0123456789\n"


def gzip_plain(n: int) -> bytes:
    """The uncompressed text of ``/gzip?size=n``: ``n`` bytes of ASCII lines."""
    if n <= 0:
        return b""
    lines = []
    total = 0
    i = 0
    while total < n:
        line = b"%06d " % i + _PLAIN_LINE
        lines.append(line)
        total += len(line)
        i += 1
    return b"".join(lines)[:n]


@functools.lru_cache(maxsize=32)
def _gzip_body(n: int) -> bytes:
    return gzip.compress(gzip_plain(n), compresslevel=6, mtime=0)


# --------------------------------------------------------------------------
# Images


def png_bytes(width: int = 3, height: int = 2) -> bytes:
    """A valid 8-bit RGB PNG of the given size (a colour gradient)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(
            ">I", zlib.crc32(body) & 0xFFFFFFFF
        )

    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type: none
        for x in range(width):
            rows += bytes(((x * 37) & 0xFF, (y * 59) & 0xFF, ((x + y) * 17) & 0xFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )


def gif_bytes(width: int = 3, height: int = 2) -> bytes:
    """A valid GIF89a with a two-colour palette and a checkerboard image.

    The LZW stream uses a clear code every two pixels, so every code stays
    three bits wide and any decoder reads it without a dictionary.
    """
    min_code_size = 2
    clear, end = 4, 5
    codes = []
    for i in range(width * height):
        if i % 2 == 0:
            codes.append(clear)
        x, y = i % width, i // width
        codes.append((x + y) & 1)
    codes.append(end)

    data = bytearray()
    acc = nbits = 0
    for code in codes:
        acc |= code << nbits
        nbits += 3
        while nbits >= 8:
            data.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8
    if nbits:
        data.append(acc & 0xFF)

    blocks = bytearray()
    for i in range(0, len(data), 255):
        piece = data[i:i + 255]
        blocks.append(len(piece))
        blocks += piece
    blocks.append(0)

    return (
        b"GIF89a"
        + struct.pack("<HHBBB", width, height, 0x80, 0, 0)  # GCT, 2 entries
        + b"\x00\x00\x00\xff\xff\xff"
        + b"\x2c"
        + struct.pack("<HHHHB", 0, 0, width, height, 0)
        + bytes((min_code_size,))
        + bytes(blocks)
        + b"\x3b"
    )


def jpeg_bytes(width: int = 3, height: int = 2) -> bytes:
    """A valid baseline (SOF0) greyscale JPEG, uniformly mid-grey.

    Each 8x8 block is coded as DC difference 0 and end-of-block, with one-code
    Huffman tables, so the entropy-coded data is two zero bits per block.
    """

    def segment(marker: int, payload: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload

    app0 = b"JFIF\x00" + struct.pack(">BBBHHBB", 1, 1, 0, 1, 1, 0, 0)
    dqt = b"\x00" + bytes([1] * 64)
    sof0 = struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00"
    one_code = bytes([1] + [0] * 15)  # one code of length 1
    dht_dc = b"\x00" + one_code + b"\x00"  # DC table 0: category 0
    dht_ac = b"\x10" + one_code + b"\x00"  # AC table 0: EOB
    sos = b"\x01" + b"\x01\x00" + b"\x00\x3f\x00"

    blocks = ((width + 7) // 8) * ((height + 7) // 8)
    nbits = 2 * blocks
    nbytes = (nbits + 7) // 8
    scan = bytearray(nbytes)
    pad = nbytes * 8 - nbits
    if pad:
        scan[-1] = (1 << pad) - 1  # pad the final byte with one-bits

    return (
        b"\xff\xd8"
        + segment(0xE0, app0)
        + segment(0xDB, dqt)
        + segment(0xC0, sof0)
        + segment(0xC4, dht_dc)
        + segment(0xC4, dht_ac)
        + segment(0xDA, sos)
        + bytes(scan)
        + b"\xff\xd9"
    )


def webp_bytes(width: int = 3, height: int = 2) -> bytes:
    """A valid lossless (VP8L) WebP of one colour.

    All five prefix codes are single-symbol "simple" codes, so pixels take no
    bits at all; the header carries the 14-bit width-1 and height-1.
    """
    if not (1 <= width <= 16384 and 1 <= height <= 16384):
        raise ValueError("WebP dimensions must be within 1..16384")
    bits: list[tuple[int, int]] = [
        (width - 1, 14),
        (height - 1, 14),
        (0, 1),  # alpha_is_used
        (0, 3),  # version
        (0, 1),  # no transform
        (0, 1),  # no colour cache
        (0, 1),  # no meta prefix codes
    ]
    for symbol in (0x80, 0x40, 0xC0, 0xFF):  # green, red, blue, alpha
        bits += [(1, 1), (0, 1), (1, 1), (symbol, 8)]
    bits += [(1, 1), (0, 1), (0, 1), (0, 1)]  # distance: symbol 0

    acc = nbits = 0
    for value, width_bits in bits:
        acc |= value << nbits
        nbits += width_bits
    payload = b"\x2f" + acc.to_bytes((nbits + 7) // 8, "little")
    chunk = b"VP8L" + struct.pack("<I", len(payload)) + payload
    if len(payload) % 2:
        chunk += b"\x00"
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


_IMAGE_MAKERS: dict[str, tuple[Callable[[int, int], bytes], str]] = {
    "png": (png_bytes, "image/png"),
    "jpeg": (jpeg_bytes, "image/jpeg"),
    "jpg": (jpeg_bytes, "image/jpeg"),
    "gif": (gif_bytes, "image/gif"),
    "webp": (webp_bytes, "image/webp"),
}


@functools.lru_cache(maxsize=64)
def image_bytes(fmt: str, width: int = 3, height: int = 2) -> bytes:
    """The body of ``/image/<fmt>?w=width&h=height``."""
    return _IMAGE_MAKERS[fmt][0](width, height)


# --------------------------------------------------------------------------
# HTTP helpers


def http_date(when: float | None = None) -> str:
    return email.utils.formatdate(time.time() if when is None else when, usegmt=True)


def _parse_http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _date_param(value: str) -> str:
    """An HTTP date, or an integer offset in seconds from now ("-3600")."""
    try:
        return http_date(time.time() + int(value))
    except ValueError:
        return value


def _quote_etag(value: str) -> str:
    if value.startswith('"') or value.startswith("W/"):
        return value
    return f'"{value}"'


def _etag_opaque(value: str) -> str:
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value


def _etag_matches(if_none_match: str, etag: str) -> bool:
    """Weak comparison of an If-None-Match list against an entity tag."""
    if if_none_match.strip() == "*":
        return True
    wanted = _etag_opaque(etag)
    return any(_etag_opaque(tag) == wanted for tag in if_none_match.split(","))


def _not_modified(request_headers, etag: str | None, last_modified: str | None) -> bool:
    """RFC 9110 section 13.2.2: If-None-Match wins over If-Modified-Since."""
    inm = request_headers.get("If-None-Match")
    if inm is not None:
        return etag is not None and _etag_matches(inm, etag)
    ims = _parse_http_date(request_headers.get("If-Modified-Since"))
    lm = _parse_http_date(last_modified)
    return ims is not None and lm is not None and lm <= ims


def _accepts_gzip(value: str | None) -> bool:
    if not value:
        return False
    for item in value.split(","):
        name, _, params = item.strip().partition(";")
        if name.strip().lower() not in ("gzip", "x-gzip", "*"):
            continue
        q = params.strip()
        if q.lower().startswith("q="):
            try:
                return float(q[2:]) > 0
            except ValueError:
                return True
        return True
    return False


def _header_dict(headers) -> dict[str, str]:
    result: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        result[key] = f"{result[key]}, {value}" if key in result else value
    return result


def _is_disconnect(exc: BaseException | None) -> bool:
    return isinstance(exc, OSError)  # resets, broken pipes, timeouts, TLS errors


class _Resource:
    __slots__ = ("body", "headers", "status")

    def __init__(self, body: bytes, headers: dict[str, str], status: int):
        self.body = body
        self.headers = headers
        self.status = status

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


# --------------------------------------------------------------------------
# Server


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address, origin: "Origin"):
        self.origin = origin
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if _is_disconnect(exc) and not self.origin.verbose:
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "origin/1.0"
    sys_version = ""
    timeout = 120  # idle keep-alive connections end eventually
    # Headers and body leave in separate writes; without TCP_NODELAY the body
    # waits for the client's delayed ACK (about 40 ms a response).
    disable_nagle_algorithm = True

    server: _Server

    def version_string(self) -> str:
        return self.server_version

    # -- connection plumbing ------------------------------------------------

    def setup(self):
        origin = self.server.origin
        if origin.ssl_context is not None:
            self.request.settimeout(10)
            self.request = origin.ssl_context.wrap_socket(self.request, server_side=True)
        self.connection = self.request
        origin._track(self.request, True)
        super().setup()

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        self.server.origin._track(self.request, False)
        if self.server.origin.ssl_context is not None:
            try:
                self.request.close()
            except OSError:
                pass

    def log_message(self, format, *args):  # noqa: A002 - signature from base class
        if self.server.origin.verbose:
            super().log_message(format, *args)

    # -- dispatch -------------------------------------------------------------

    def do_GET(self):
        self._dispatch()

    def do_HEAD(self):
        self._dispatch()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._dispatch()

    @property
    def origin(self) -> "Origin":
        return self.server.origin

    @property
    def head(self) -> bool:
        return self.command == "HEAD"

    def _dispatch(self):
        target = self.path
        if "://" in target.split("?", 1)[0]:  # absolute-form, as sent to a proxy
            parts = urlsplit(target)
            target = parts.path + ("?" + parts.query if parts.query else "")
        parts = urlsplit(target)
        path = parts.path or "/"
        self.q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}

        if path == "/_hits":
            key = self.q.get("path", "/")
            self._send(200, json.dumps({"path": key, "hits": self.origin.hits(key)}).encode(),
                       "application/json")
            return
        if path == "/_reset":
            self.origin.reset_hits()
            self._send(200, b'{"reset": true}', "application/json")
            return

        self.origin._record(path, target, self.headers)

        resource = self.origin._resource(path)
        if resource is not None:
            self._serve_resource(resource)
            return

        handler, arg = self._route(path)
        if handler is None:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")
            return
        try:
            handler(arg)
        except ValueError as exc:
            self._send(400, f"bad request: {exc}\n".encode(), "text/plain; charset=utf-8")

    def _route(self, path: str):
        exact = {
            "/": self._index,
            "/drip": self._drip,
            "/stall": self._stall,
            "/truncate": self._truncate,
            "/loop": self._loop,
            "/redirect-to": self._redirect_to,
            "/cache": self._cache,
            "/gzip": self._gzip,
            "/text": self._text,
            "/text/invalid-utf8": self._invalid_utf8,
            "/type": self._type,
            "/headers": self._headers,
            "/slow-headers": self._slow_headers,
        }
        if path in exact:
            return exact[path], None
        prefixes = {
            "/bytes/": self._bytes,
            "/status/": self._status,
            "/redirect/": self._redirect,
            "/image/": self._image,
        }
        for prefix, handler in prefixes.items():
            if path.startswith(prefix) and len(path) > len(prefix):
                return handler, path[len(prefix):]
        return None, None

    # -- writing --------------------------------------------------------------

    def _start(self, status: int, headers: Iterable[tuple[str, str]] = ()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def _write(self, data: bytes | memoryview):
        if not self.head and data:
            self.wfile.write(data)

    def _write_chunk(self, data: bytes | memoryview):
        if not self.head and data:
            self.wfile.write(b"%x\r\n" % len(data))
            self.wfile.write(data)
            self.wfile.write(b"\r\n")

    def _end_chunks(self):
        if not self.head:
            self.wfile.write(b"0\r\n\r\n")

    def _send(self, status: int, body: bytes, content_type: str | None = None,
              headers: Iterable[tuple[str, str]] = ()):
        all_headers = list(headers)
        if content_type:
            all_headers.append(("Content-Type", content_type))
        all_headers.append(("Content-Length", str(len(body))))
        self._start(status, all_headers)
        self._stream(body)

    def _stream(self, body: bytes):
        view = memoryview(body)
        for i in range(0, len(view), _STREAM_CHUNK):
            self._write(view[i:i + _STREAM_CHUNK])

    def _int(self, name: str, default: int) -> int:
        value = self.q.get(name)
        return default if value in (None, "") else int(value)

    def _float(self, name: str, default: float) -> float:
        value = self.q.get(name)
        return default if value in (None, "") else float(value)

    # -- routes -----------------------------------------------------------------

    def _index(self, _):
        body = (
            "courier test origin\n"
            "routes: /bytes/N /drip /stall /truncate /status/CODE /redirect/N /loop\n"
            "        /redirect-to /cache /res/NAME /gzip /text /type /image/FMT\n"
            "        /headers /slow-headers /_hits /_reset\n"
        ).encode()
        self._send(200, body, "text/plain; charset=utf-8")

    def _bytes(self, arg: str):
        n = int(arg)
        if n < 0:
            raise ValueError("negative size")
        body = pattern(n, self.q.get("seed", ""))
        caching = [("Cache-Control", self.q["cache-control"])] if "cache-control" in self.q else []
        if self.q.get("chunked") == "1":
            self._start(200, [("Content-Type", "application/octet-stream"),
                              ("Transfer-Encoding", "chunked"), *caching])
            view = memoryview(body)
            for i in range(0, len(view), 64 * 1024):
                self._write_chunk(view[i:i + 64 * 1024])
            self._end_chunks()
        else:
            self._send(200, body, "application/octet-stream", caching)

    def _drip(self, _):
        size = self._int("size", 1000)
        chunks = max(1, self._int("chunks", 10))
        interval = self._float("interval", 0.1)
        delay = self._float("delay", 0.0)
        chunked = self.q.get("length") == "0"
        body = pattern(size, self.q.get("seed", ""))
        stop = self.origin._stopping

        if delay and stop.wait(delay):
            self.close_connection = True
            return
        headers = [("Content-Type", "application/octet-stream")]
        headers.append(("Transfer-Encoding", "chunked") if chunked
                       else ("Content-Length", str(size)))
        self._start(200, headers)
        if self.head:
            return
        self.wfile.flush()
        base, extra = divmod(size, chunks)
        offset = 0
        for i in range(chunks):
            if i and interval > 0 and stop.wait(interval):
                self.close_connection = True
                return
            n = base + (1 if i < extra else 0)
            piece = body[offset:offset + n]
            offset += n
            if chunked:
                self._write_chunk(piece)
            else:
                self._write(piece)
            self.wfile.flush()
        if chunked:
            self._end_chunks()

    def _stall(self, _):
        after = min(self._int("after", 0), STALL_CONTENT_LENGTH)
        hold = self._float("hold", 60.0)
        self._start(200, [("Content-Type", "application/octet-stream"),
                          ("Content-Length", str(STALL_CONTENT_LENGTH))])
        self.close_connection = True
        if self.head:
            return
        self._write(pattern(after, self.q.get("seed", "")))
        self.wfile.flush()
        self.origin._stopping.wait(hold)

    def _truncate(self, _):
        size = self._int("size", 1000)
        send = min(self._int("send", size // 2), size)
        self._start(200, [("Content-Type", "application/octet-stream"),
                          ("Content-Length", str(size))])
        self.close_connection = True
        self._write(pattern(send, self.q.get("seed", "")))
        self.wfile.flush()

    def _status(self, arg: str):
        code = int(arg)
        if not 100 <= code <= 999:
            raise ValueError("status out of range")
        headers = []
        if 300 <= code < 400 and "location" in self.q:
            headers.append(("Location", self.q["location"]))
        if code in (204, 304) or code < 200:
            self._start(code, headers)
            return
        self._send(code, f"status {code}".encode(), "text/plain; charset=utf-8", headers)

    def _redirect(self, arg: str):
        n = int(arg)
        if n <= 0:
            self._send(200, b"redirected", "text/plain; charset=utf-8")
        else:
            self._send(302, b"", None, [("Location", f"/redirect/{n - 1}")])

    def _loop(self, _):
        self._send(302, b"", None, [("Location", "/loop")])

    def _redirect_to(self, _):
        url = self.q.get("url")
        if not url:
            raise ValueError("url is required")
        status = self._int("status", 302)
        self._send(status, b"", None, [("Location", url)])

    def _cache(self, _):
        q = self.q
        headers: list[tuple[str, str]] = []
        directives = []
        if "max-age" in q:
            directives.append(f"max-age={int(q['max-age'])}")
        if q.get("no-store") == "1":
            directives.append("no-store")
        if q.get("no-cache") == "1":
            directives.append("no-cache")
        if q.get("must-revalidate") == "1":
            directives.append("must-revalidate")
        if "cache-control" in q:
            directives = [q["cache-control"]]
        if directives:
            headers.append(("Cache-Control", ", ".join(directives)))
        etag = _quote_etag(q["etag"]) if q.get("etag") else None
        last_modified = _date_param(q["last-modified"]) if q.get("last-modified") else None
        if etag:
            headers.append(("ETag", etag))
        if last_modified:
            headers.append(("Last-Modified", last_modified))
        if q.get("expires"):
            headers.append(("Expires", _date_param(q["expires"])))
        if q.get("vary"):
            headers.append(("Vary", q["vary"]))
        if q.get("age"):
            headers.append(("Age", q["age"]))

        if _not_modified(self.headers, etag, last_modified):
            self._start(304, headers)
            return
        query = urlsplit(self.path).query
        body = q["body"].encode() if "body" in q else f"cache {query}\n".encode()
        self._send(self._int("status", 200), body, "text/plain; charset=utf-8", headers)

    def _serve_resource(self, resource: _Resource):
        headers = [(k, v) for k, v in resource.headers.items()
                   if k.lower() not in ("content-length", "date")]
        if resource.header("Content-Type") is None:
            headers.append(("Content-Type", "application/octet-stream"))
        if _not_modified(self.headers, resource.header("ETag"),
                         resource.header("Last-Modified")):
            self._start(304, [(k, v) for k, v in headers if k.lower() != "content-type"])
            return
        self._send(resource.status, resource.body, None, headers)

    def _gzip(self, _):
        size = self._int("size", 1000)
        headers = [("Vary", "Accept-Encoding")]
        if _accepts_gzip(self.headers.get("Accept-Encoding")):
            headers.append(("Content-Encoding", "gzip"))
            body = _gzip_body(size)
        else:
            body = gzip_plain(size)
        self._send(200, body, "text/plain; charset=utf-8", headers)

    def _text(self, _):
        charset = self.q.get("charset", "utf-8")
        media_type = self.q.get("type", "text/plain")
        if "text" in self.q:
            body = self.q["text"].encode(charset)
        else:
            for candidate in (DEFAULT_TEXT, LATIN1_TEXT, ASCII_TEXT):
                try:
                    body = candidate.encode(charset)
                    break
                except UnicodeEncodeError:
                    continue
            else:
                raise ValueError(f"cannot encode sample text in {charset}")
        if self.q.get("declare") == "0":
            content_type = media_type
        else:
            content_type = f"{media_type}; charset={charset}"
        self._send(200, body, content_type)

    def _invalid_utf8(self, _):
        self._send(200, INVALID_UTF8, "text/plain; charset=utf-8")

    def _type(self, _):
        ct = self.q.get("ct", "application/octet-stream")
        self._send(200, f"type {ct}\n".encode(), ct)

    def _image(self, arg: str):
        fmt = arg.lower()
        if fmt not in _IMAGE_MAKERS:
            self._send(404, b"unknown image format\n", "text/plain; charset=utf-8")
            return
        width, height = self._int("w", 3), self._int("h", 2)
        if not (1 <= width <= 16384 and 1 <= height <= 16384):
            raise ValueError("image size must be within 1..16384")
        self._send(200, image_bytes(fmt, width, height), _IMAGE_MAKERS[fmt][1])

    def _headers(self, _):
        body = json.dumps(_header_dict(self.headers), sort_keys=True).encode()
        self._send(200, body, "application/json")

    def _slow_headers(self, _):
        if self.origin._stopping.wait(self._float("delay", 1.0)):
            self.close_connection = True
            return
        self._send(200, b"slow", "text/plain; charset=utf-8")


class Origin:
    """A threaded HTTP/1.1 origin on 127.0.0.1 (a free port unless ``port``).

    ``tls`` is ``None`` for plain HTTP or ``(certfile, keyfile)`` for HTTPS.
    """

    def __init__(self, port: int = 0, tls: tuple[str, str] | None = None,
                 host: str = "127.0.0.1", verbose: bool = False):
        self.host = host
        self.verbose = verbose
        self.ssl_context: ssl.SSLContext | None = None
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls[0], tls[1])
            self.ssl_context = ctx
        self._requested_port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._accepted = 0
        self._hits_by_path: dict[str, int] = {}
        self._hits_by_target: dict[str, int] = {}
        self._headers_by_path: dict[str, dict[str, str]] = {}
        self._headers_by_target: dict[str, dict[str, str]] = {}
        self._request_log: list[str] = []
        self._resources: dict[str, _Resource] = {}
        self._connections: set = set()

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> "Origin":
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"origin:{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server = self._server
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
            self._connections.clear()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def serve_forever(self) -> None:
        """Serve on the calling thread until :meth:`stop` is called elsewhere."""
        self.start()
        self._stopping.wait()

    def __enter__(self) -> "Origin":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- addresses ----------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("origin is not started")
        return self._server.server_address[1]

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def url(self, path: str = "/") -> str:
        if not path.startswith("/"):
            path = "/" + path
        return self.base_url + path

    # -- hit counters and request headers ------------------------------------------

    def hits(self, path: str) -> int:
        """Requests seen for ``path``; with a query string, for that exact target."""
        with self._lock:
            if "?" in path:
                return self._hits_by_target.get(path, 0)
            return self._hits_by_path.get(path, 0)

    def connections_accepted(self) -> int:
        """TCP connections accepted since the origin started."""
        with self._lock:
            return self._accepted

    def total_hits(self) -> int:
        with self._lock:
            return sum(self._hits_by_path.values())

    def reset_hits(self) -> None:
        with self._lock:
            self._hits_by_path.clear()
            self._hits_by_target.clear()
            self._headers_by_path.clear()
            self._headers_by_target.clear()
            self._request_log.clear()

    def request_log(self) -> list[str]:
        """Request targets (path and query) in the order they arrived, oldest first."""
        with self._lock:
            return list(self._request_log)

    def last_headers(self, path: str) -> dict[str, str]:
        """Headers (lower-case names) of the last request for ``path``, or {}."""
        with self._lock:
            table = self._headers_by_target if "?" in path else self._headers_by_path
            return dict(table.get(path, {}))

    def _record(self, path: str, target: str, headers) -> None:
        recorded = _header_dict(headers)
        with self._lock:
            self._hits_by_path[path] = self._hits_by_path.get(path, 0) + 1
            self._hits_by_target[target] = self._hits_by_target.get(target, 0) + 1
            self._headers_by_path[path] = recorded
            self._headers_by_target[target] = recorded
            self._request_log.append(target)

    def _track(self, conn, add: bool) -> None:
        with self._lock:
            if add:
                self._accepted += 1
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    # -- resources -----------------------------------------------------------------

    def set_resource(self, path: str, body: bytes | str,
                     headers: dict[str, str] | None = None, status: int = 200) -> str:
        """Define or replace the resource served at ``path``; returns its URL.

        A bare name (``"logo"``) is served at ``/res/logo``. Requests carrying
        If-None-Match / If-Modified-Since get a 304 driven by the resource's own
        ``ETag`` / ``Last-Modified`` headers. ``Date`` is always current.
        """
        if not path.startswith("/"):
            path = "/res/" + path
        if isinstance(body, str):
            body = body.encode()
        with self._lock:
            self._resources[path] = _Resource(bytes(body), dict(headers or {}), status)
        return self.url(path) if self._server is not None else path

    def remove_resource(self, path: str) -> None:
        if not path.startswith("/"):
            path = "/res/" + path
        with self._lock:
            self._resources.pop(path, None)

    def _resource(self, path: str) -> _Resource | None:
        with self._lock:
            return self._resources.get(path)


def _add_route(prefix: str, serve: Callable[[_Handler, str], None], *, exact: bool = False,
               named: bool = True) -> None:
    """Serves `prefix` itself (`exact`), or the paths under it (with a name
    after it when `named`), with serve(handler, the rest of the path), ahead
    of every route added before it; a resource set at the path wins. `q` holds
    the query, the request is recorded, and a ValueError is a 400."""
    previous = _Handler._dispatch

    def dispatch(self: _Handler) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        matches = path == prefix if exact else path.startswith(prefix) and (len(path) > len(prefix) or not named)
        if not matches or self.origin._resource(path) is not None:
            previous(self)
            return
        self.q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.origin._record(path, self.path, self.headers)
        try:
            serve(self, path[len(prefix):])
        except ValueError as exc:
            self._send(400, f"bad request: {exc}\n".encode(), "text/plain; charset=utf-8")

    _Handler._dispatch = dispatch  # type: ignore[method-assign]


# --------------------------------------------------------------------------
# Command line


def _watch_stdin(stop: Callable[[], None]) -> None:
    """Stop when stdin is a pipe and its writer goes away."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return
    if not stat.S_ISFIFO(mode):
        return

    def watch():
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        stop()

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Deterministic HTTP origin for tests.")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.add_argument("--no-stdin", action="store_true",
                        help="keep serving when stdin reaches end of file")
    args = parser.parse_args(argv)

    origin = Origin(port=args.port, tls=tuple(args.tls) if args.tls else None,
                    host=args.host, verbose=args.verbose)
    origin.start()
    print(f"PORT {origin.port}", flush=True)
    done = threading.Event()
    if not args.no_stdin:
        _watch_stdin(done.set)
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        origin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


# --------------------------------------------------------------------------
# Raw responses: exact bytes, for tests of what a hostile origin may send.
# Set from Python only (Origin.set_raw_response), so the command line above
# needs none of this.


def _set_raw_response(self: Origin, path: str, head: bytes | str, body: bytes | str = b"") -> str:
    """Serve ``head`` (status line and header lines, CRLF-separated, without
    the blank line that ends them) then ``body`` at ``path``, byte for byte,
    and close the connection; returns its URL. A bare name is served at
    ``/raw/<name>``. Nothing is added: no Date, no Content-Length."""
    if not path.startswith("/"):
        path = "/raw/" + path
    if isinstance(head, str):
        head = head.encode("latin-1")
    if isinstance(body, str):
        body = body.encode()
    head = head.rstrip(b"\r\n")
    with self._lock:
        raw = self.__dict__.setdefault("_raw_responses", {})
        raw[path] = head + b"\r\n\r\n" + body
    return self.url(path) if self._server is not None else path


def _raw_response(self: Origin, path: str) -> bytes | None:
    with self._lock:
        return self.__dict__.get("_raw_responses", {}).get(path)


Origin.set_raw_response = _set_raw_response  # type: ignore[attr-defined]
Origin._raw_response = _raw_response  # type: ignore[attr-defined]
_dispatch_without_raw = _Handler._dispatch


def _dispatch_with_raw(self: _Handler) -> None:
    path = urlsplit(self.path).path or "/"
    raw = self.origin._raw_response(path)
    if raw is None:
        _dispatch_without_raw(self)
        return
    self.origin._record(path, self.path, self.headers)
    self.close_connection = True
    if self.command == "HEAD":
        raw = raw[:raw.index(b"\r\n\r\n") + 4]
    self.wfile.write(raw)


_Handler._dispatch = _dispatch_with_raw  # type: ignore[method-assign]


# --------------------------------------------------------------------------
# A connection reset in the middle of a body: /reset?size=N&send=M announces
# N bytes (Content-Length), sends the first M of pattern(N, seed), then
# closes the socket with SO_LINGER 0, so the client gets a TCP RST rather
# than an orderly end of stream.

import io  # noqa: E402


def _reset_mid_body(self: _Handler) -> None:
    size = self._int("size", 1_000_000)
    send = min(self._int("send", size // 4), size)
    self._start(200, [("Content-Type", "application/octet-stream"),
                      ("Content-Length", str(size))])
    self.close_connection = True
    if self.head:
        return
    self._write(pattern(send, self.q.get("seed", "")))
    self.wfile.flush()
    self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # The buffered files hold references to the socket: close them first so
    # that closing the socket closes the descriptor (and sends the RST) now.
    self.wfile.close()
    self.rfile.close()
    self.request.close()
    # What the request handler flushes and closes afterwards goes nowhere.
    self.wfile = io.BytesIO()
    self.rfile = io.BytesIO()


_dispatch_without_reset = _Handler._dispatch


def _dispatch_with_reset(self: _Handler) -> None:
    target = self.path
    if "://" in target.split("?", 1)[0]:
        parts = urlsplit(target)
        target = parts.path + ("?" + parts.query if parts.query else "")
    parts = urlsplit(target)
    if parts.path != "/reset" or self.origin._resource("/reset") is not None:
        _dispatch_without_reset(self)
        return
    self.q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    self.origin._record(parts.path, target, self.headers)
    try:
        _reset_mid_body(self)
    except ValueError as exc:
        self._send(400, f"bad request: {exc}\n".encode(), "text/plain; charset=utf-8")


_Handler._dispatch = _dispatch_with_reset  # type: ignore[method-assign]


# --------------------------------------------------------------------------
# Bytes in a Location, and bodies held mid-way: routes for tests of where
# `courier get` places files and of what a redirect target becomes.
#
# /redirect-bytes?location=L   302 whose Location is L percent-decoded to
#                              bytes, sent as they are (%C3%28 sends 0xC3 '(')
# /hold/NAME?size=N&first=M    announces N bytes of pattern(N, NAME), sends
#                              the first M (default 1), then holds the rest
#                              until Origin.release(NAME)
#
# Origin.wait_held(NAME, count) waits until `count` requests for /hold/NAME
# have had their first bytes sent, and Origin.wait_sent(NAME, count) until
# they have had all of them written to the socket, so a test acts on that
# event, not after a sleep.


class _Holds:
    """Requests held at /hold/NAME, for one origin."""

    def __init__(self):
        self.changed = threading.Condition()
        self.started: dict[str, int] = {}
        self.released: set[str] = set()
        self.sent: dict[str, int] = {}


def _holds(self: Origin) -> _Holds:
    with self._lock:
        return self.__dict__.setdefault("_hold_state", _Holds())


def _wait_held(self: Origin, name: str, count: int = 1, timeout: float = 20) -> None:
    holds = _holds(self)
    with holds.changed:
        if not holds.changed.wait_for(lambda: holds.started.get(name, 0) >= count, timeout):
            raise TimeoutError(f"{count} request(s) for /hold/{name} not under way within {timeout} s "
                               f"(saw {holds.started.get(name, 0)})")


def _release(self: Origin, name: str) -> None:
    holds = _holds(self)
    with holds.changed:
        holds.released.add(name)
        holds.changed.notify_all()


def _wait_sent(self: Origin, name: str, count: int = 1, timeout: float = 20) -> None:
    holds = _holds(self)
    with holds.changed:
        if not holds.changed.wait_for(lambda: holds.sent.get(name, 0) >= count, timeout):
            raise TimeoutError(f"{count} request(s) for /hold/{name} not sent whole within {timeout} s "
                               f"(saw {holds.sent.get(name, 0)})")


Origin.wait_held = _wait_held  # type: ignore[attr-defined]
Origin.wait_sent = _wait_sent  # type: ignore[attr-defined]
Origin.release = _release  # type: ignore[attr-defined]
_stop_without_holds = Origin.stop


def _stop_with_holds(self: Origin) -> None:
    self._stopping.set()
    holds = _holds(self)
    with holds.changed:
        holds.changed.notify_all()
    _stop_without_holds(self)


Origin.stop = _stop_with_holds  # type: ignore[method-assign]


def _hold(self: _Handler, name: str) -> None:
    size = self._int("size", 1000)
    first = min(max(self._int("first", 1), 0), size)
    body = pattern(size, name)
    self._start(200, [("Content-Type", "application/octet-stream"), ("Content-Length", str(size))])
    if self.head:
        return
    self._write(body[:first])
    self.wfile.flush()
    holds = _holds(self.origin)
    with holds.changed:
        holds.started[name] = holds.started.get(name, 0) + 1
        holds.changed.notify_all()
        stopping = self.origin._stopping
        holds.changed.wait_for(lambda: name in holds.released or stopping.is_set(), 60)
        released = name in holds.released and not stopping.is_set()
    if not released:
        self.close_connection = True
        return
    self._write(body[first:])
    self.wfile.flush()
    with holds.changed:
        holds.sent[name] = holds.sent.get(name, 0) + 1
        holds.changed.notify_all()


def _redirect_bytes(self: _Handler) -> None:
    query = urlsplit(self.path).query
    # latin-1 maps each byte to one character, and send_header encodes the
    # value back with it: the Location leaves as exactly these bytes.
    location = parse_qs(query, encoding="latin-1").get("location", [""])[-1]
    if not location:
        raise ValueError("location is required")
    self._send(302, b"", None, [("Location", location)])


_add_route("/redirect-bytes", lambda self, _: _redirect_bytes(self), exact=True)
_add_route("/hold/", _hold)


# --------------------------------------------------------------------------
# A gzip bomb of one repeated byte: /gzip-fill?size=N&byte=B sends a gzip of
# N bytes of the byte B (0-255, default 1) with Content-Encoding: gzip, as
# text/plain without a charset, whatever the request accepts. 60 MB of 0x01
# compress to about 58 KB; each (N, B) is compressed once and kept.


@functools.lru_cache(maxsize=4)
def _gzip_fill_body(size: int, byte: int) -> bytes:
    return gzip.compress(bytes([byte]) * size, compresslevel=9, mtime=0)


def _gzip_fill(self: _Handler) -> None:
    size, byte = self._int("size", 1000), self._int("byte", 1)
    if not (0 <= size <= 1 << 30 and 0 <= byte <= 255):
        raise ValueError("size must be within 0..2^30 and byte within 0..255")
    self._send(200, _gzip_fill_body(size, byte), "text/plain", [("Content-Encoding", "gzip")])


_add_route("/gzip-fill", lambda self, _: _gzip_fill(self), exact=True)


# --------------------------------------------------------------------------
# Flaky resources, for tests of retries and mirrors. Origin.hits("/flaky/KEY")
# is the number of requests KEY saw.
#
# /flaky/KEY?statuses=503,503,200&retry-after=V&retry-after-in=S&size=N&seed=SEED
#     the n-th request for /flaky/KEY answers the n-th status of `statuses`
#     (the last one again once the list is spent; default 200); with
#     `hold=1` the first response waits for Origin.release("flaky/KEY")
#     (Origin.wait_held("flaky/KEY") waits for it to arrive). A status
#     outside 200-299 has the body "status CODE" and, when asked for,
#     `Retry-After: V` exactly as given, or an HTTP date S seconds from now
#     (`retry-after-in`, which may be negative); a 2xx status sends N bytes
#     (default 1000) of pattern(N, SEED), SEED defaulting to KEY, so
#     several keys can serve one resource.
# /cut/KEY?times=T&size=N&send=M&seed=SEED
#     the first T requests for /cut/KEY announce N bytes (default 100000),
#     send the first M (default N/2) and close the connection cleanly: a
#     body shorter than its Content-Length. Later ones send all N bytes.


def _flaky(self: _Handler, key: str) -> None:
    statuses = [int(s) for s in self.q.get("statuses", "200").split(",") if s.strip()] or [200]
    count = self.origin.hits(f"/flaky/{key}")
    status = statuses[min(count, len(statuses)) - 1]
    if count == 1 and self.q.get("hold") == "1":
        holds = _holds(self.origin)
        with holds.changed:
            holds.started[f"flaky/{key}"] = holds.started.get(f"flaky/{key}", 0) + 1
            holds.changed.notify_all()
            stopping = self.origin._stopping
            holds.changed.wait_for(lambda: f"flaky/{key}" in holds.released or stopping.is_set(), 60)
    if 200 <= status <= 299:
        size = self._int("size", 1000)
        self._send(status, pattern(size, self.q.get("seed", key)), "application/octet-stream")
        return
    headers = []
    if "retry-after" in self.q:
        headers.append(("Retry-After", self.q["retry-after"]))
    elif "retry-after-in" in self.q:
        headers.append(("Retry-After", http_date(time.time() + float(self.q["retry-after-in"]))))
    self._send(status, f"status {status}".encode(), "text/plain; charset=utf-8", headers)


def _cut(self: _Handler, key: str) -> None:
    size = self._int("size", 100_000)
    send = min(self._int("send", size // 2), size)
    body = pattern(size, self.q.get("seed", key))
    if self.origin.hits(f"/cut/{key}") > self._int("times", 1):
        self._send(200, body, "application/octet-stream")
        return
    self._start(200, [("Content-Type", "application/octet-stream"), ("Content-Length", str(size))])
    self.close_connection = True
    self._write(body[:send])


_add_route("/flaky/", _flaky)
_add_route("/cut/", _cut)


# --------------------------------------------------------------------------
# Files under any name, for `courier get`'s naming: /files/<anything>?size=N
# sends N bytes (default 100) of pattern(N, <the raw path>), whatever the
# path holds (escapes, `..`, a trailing `/`); ?disposition=V adds a
# Content-Disposition header of V, sent as its bytes (latin-1 maps each byte
# of the decoded query to one character).


def _files(self: _Handler) -> None:
    raw_path = urlsplit(self.path).path
    size = self._int("size", 100)
    if not 0 <= size <= 1 << 30:
        raise ValueError("size must be within 0..2^30")
    query = urlsplit(self.path).query
    disposition = parse_qs(query, encoding="latin-1").get("disposition", [""])[-1]
    headers = [("Content-Disposition", disposition)] if disposition else []
    self._send(200, pattern(size, raw_path), "application/octet-stream", headers)


_add_route("/files/", lambda self, _: _files(self), named=False)


# --------------------------------------------------------------------------
# Ranges and resumes: /ranged/NAME is a resource of `size` bytes of
# pattern(size, "NAME-vV"), V its version (1 until Origin.ranged_bump(NAME)),
# that honours `Range: bytes=N-` (and `bytes=N-M`) when `If-Range` is absent
# or names its current ETag or Last-Modified, and can cut its body short,
# hold it, or answer a range wrongly.
#
# /ranged/NAME?size=N
#   &validator=etag|weak|lm|none  what it carries (etag, the default: a strong
#                                 ETag "NAME-vV" and a Last-Modified; weak:
#                                 W/"NAME-vV" and no Last-Modified; lm: only
#                                 Last-Modified; none: neither)
#   &ranges=ignore                a 200 with the whole body to every request
#   &cut=M&cuts=K&how=close|reset the first K responses (default 1) send at
#                                 most M bytes of their body, then close
#                                 cleanly (a body shorter than its
#                                 Content-Length) or with a TCP reset
#   &hold=M                       the first response sends M bytes of its body,
#                                 then holds until the origin stops
#   &bad=KIND                     each 206 is wrong in one way: start (its
#                                 range starts one byte after the one asked,
#                                 and carries those bytes), length (a complete
#                                 length one more), star (complete length *),
#                                 huge (numbers past 2^63), past (a start past
#                                 the end), long (a body one byte longer than
#                                 its range, ended by closing the connection),
#                                 etag (another entity tag);
#                                 unasked: the first response is a 206 of the
#                                 whole body to a request without Range
#   &gzip=1                       Content-Encoding: gzip when accepted (the body
#                                 is gzip_plain(size), not the pattern)
#
# Origin.ranged_log(NAME) lists each request for it, oldest first, once each
# has been answered (within 5 s):
# {"range": <Range or None>, "if_range": <If-Range or None>,
#  "accept_encoding": ..., "status": S, "sent": <body bytes written>}.
# Origin.ranged_bump(NAME) makes a new version: new ETag, Last-Modified and
# bytes. Origin.ranged_body(NAME, size) is the current version's bytes.
# Origin.ranged_wait(NAME, count) waits until `count` requests are logged.

_RANGED_EPOCH = 1_600_000_000


class _Ranged:
    """The state of /ranged/NAME resources, for one origin."""

    def __init__(self):
        self.changed = threading.Condition()
        self.versions: dict[str, int] = {}
        self.requests: dict[str, list] = {}


def _ranged(self: Origin) -> _Ranged:
    with self._lock:
        return self.__dict__.setdefault("_ranged_state", _Ranged())


def _ranged_bump(self: Origin, name: str) -> None:
    state = _ranged(self)
    with state.changed:
        state.versions[name] = state.versions.get(name, 1) + 1


def _ranged_body(self: Origin, name: str, size: int) -> bytes:
    state = _ranged(self)
    with state.changed:
        version = state.versions.get(name, 1)
    return pattern(size, f"{name}-v{version}")


def _ranged_log(self: Origin, name: str, timeout: float = 5) -> list:
    """The log once every request in it has been answered: a client may
    read a whole body a moment before its handler records what it sent."""
    state = _ranged(self)
    with state.changed:
        state.changed.wait_for(
            lambda: all(entry["status"] is not None for entry in state.requests.get(name, [])), timeout)
        return [dict(entry) for entry in state.requests.get(name, [])]


def _ranged_wait(self: Origin, name: str, count: int, timeout: float = 20) -> list:
    state = _ranged(self)
    with state.changed:
        if not state.changed.wait_for(lambda: len(state.requests.get(name, [])) >= count, timeout):
            raise TimeoutError(f"{count} request(s) for /ranged/{name} not seen within {timeout} s "
                               f"(saw {len(state.requests.get(name, []))})")
        return [dict(entry) for entry in state.requests[name]]


Origin.ranged_bump = _ranged_bump  # type: ignore[attr-defined]
Origin.ranged_body = _ranged_body  # type: ignore[attr-defined]
Origin.ranged_log = _ranged_log  # type: ignore[attr-defined]
Origin.ranged_wait = _ranged_wait  # type: ignore[attr-defined]


def _asked_range(value: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) of `bytes=N-` or `bytes=N-M` within `size`, else None."""
    if not value or not value.startswith("bytes="):
        return None
    spec = value[len("bytes="):].strip()
    if "," in spec or "-" not in spec:
        return None
    first, _, last = spec.partition("-")
    if not first.isdigit() or (last and not last.isdigit()):
        return None
    start, end = int(first), (int(last) if last else size - 1)
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)


def _serve_ranged(self: _Handler, name: str) -> None:
    state = _ranged(self.origin)
    size = self._int("size", 1000)
    with state.changed:
        version = state.versions.get(name, 1)
        index = len(state.requests.get(name, []))
        entry = {"range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                 "accept_encoding": self.headers.get("Accept-Encoding"), "status": None, "sent": 0}
        state.requests.setdefault(name, []).append(entry)
        state.changed.notify_all()

    validator = self.q.get("validator", "etag")
    etag = f'"{name}-v{version}"'
    last_modified = http_date(_RANGED_EPOCH + 86400 * version)
    headers = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes")]
    if validator == "etag":
        headers += [("ETag", etag), ("Last-Modified", last_modified)]
    elif validator == "weak":
        headers.append(("ETag", "W/" + etag))
    elif validator == "lm":
        headers.append(("Last-Modified", last_modified))
    gzipped = self.q.get("gzip") == "1" and _accepts_gzip(self.headers.get("Accept-Encoding"))
    body = _gzip_body(size) if gzipped else pattern(size, f"{name}-v{version}")
    if gzipped:
        headers.append(("Content-Encoding", "gzip"))

    asked = None if self.q.get("ranges") == "ignore" or gzipped else _asked_range(self.headers.get("Range"), len(body))
    if_range = self.headers.get("If-Range")
    if asked is not None and if_range is not None:
        current = etag if validator == "etag" else (last_modified if validator == "lm" else None)
        if validator == "etag" and not if_range.startswith('"'):
            current = last_modified
        if if_range != current:
            asked = None

    bad = self.q.get("bad", "")
    status, piece, content_range = 200, body, None
    if asked is not None:
        first, last = asked
        status, piece = 206, body[first:last + 1]
        complete = str(len(body))
        if bad == "start":
            first += 1
            piece = body[first:last + 1]
        elif bad == "length":
            complete = str(len(body) + 1)
        elif bad == "star":
            complete = "*"
        elif bad == "huge":
            first, last, complete = 2**63 + first, 2**63 + last, str(2**64)
        elif bad == "past":
            first, last = len(body) + 5, len(body) + 10
        elif bad == "long":
            last -= 1
        elif bad == "etag":
            headers = [(k, f'"{name}-other"' if k == "ETag" else v) for k, v in headers]
        content_range = f"bytes {first}-{last}/{complete}"
    elif bad == "unasked" and index == 0:
        status, content_range = 206, f"bytes 0-{len(body) - 1}/{len(body)}"
    if content_range:
        headers.append(("Content-Range", content_range))
    if bad == "long" and status == 206:
        self.close_connection = True  # the body ends with the connection
    else:
        headers.append(("Content-Length", str(len(piece))))

    limit = len(piece)
    how = self.q.get("how", "close")
    if "cut" in self.q and index < self._int("cuts", 1):
        limit = min(limit, self._int("cut", 0))
    hold = "hold" in self.q and index == 0
    if hold:
        limit = min(limit, self._int("hold", 0))

    def record(sent: int) -> None:
        with state.changed:
            entry["status"], entry["sent"] = status, sent
            state.changed.notify_all()

    self._start(status, headers)
    if self.head:
        record(0)
        return
    sent = 0
    view = memoryview(piece)
    try:
        while sent < limit:
            n = min(_STREAM_CHUNK, limit - sent)
            self.wfile.write(view[sent:sent + n])
            sent += n
        self.wfile.flush()
    finally:
        record(sent)
    if limit == len(piece):
        return
    self.close_connection = True
    if hold:
        self.origin._stopping.wait(120)
    elif how == "reset":
        self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.wfile.close()
        self.rfile.close()
        self.request.close()
        self.wfile = io.BytesIO()
        self.rfile = io.BytesIO()


_add_route("/ranged/", _serve_ranged)

# End of the ranges and resumes block.


# --------------------------------------------------------------------------
# Bodies that are not what they should be, for tests of `integrity`: each
# is a complete 200 that no HTTP check can tell from the right one.
#
# /tampered/N?seed=S&flip=K   pattern(N, S) with byte K inverted (K < N),
#                             Content-Length N
# /tampered/N?seed=S&keep=M   the first M bytes of pattern(N, S), without a
#                             Content-Length, then the connection closed: a
#                             truncated body that reads as whole


def _tampered(self: _Handler, size: int) -> None:
    if not 0 <= size <= 1 << 30:
        raise ValueError("size must be within 0..2^30")
    body = bytearray(pattern(size, self.q.get("seed", "")))
    if "keep" in self.q:
        keep = self._int("keep", size)
        if not 0 <= keep <= size:
            raise ValueError("keep must be within 0..N")
        self._start(200, [("Content-Type", "application/octet-stream")])
        self.close_connection = True
        self._stream(bytes(body[:keep]))
        return
    flip = self._int("flip", 0)
    if not 0 <= flip < size:
        raise ValueError("flip must be within 0..N-1")
    body[flip] ^= 0xFF
    self._send(200, bytes(body), "application/octet-stream")


_add_route("/tampered/", lambda self, size: _tampered(self, int(size)), named=False)


# --------------------------------------------------------------------------
# Bodies corrupted in flight, for tests of retrying `integrity_mismatch`:
#
# /corrupt-once/KEY?size=N&flip=K&times=T&cut=M&seed=S
#     pattern(N, S) (S defaulting to KEY) with a strong ETag "KEY" and
#     Accept-Ranges; honours `Range: bytes=A-` when If-Range is absent or
#     names that ETag. The first T requests for KEY (default 1) have byte K
#     (default N/2) inverted, when it lies in what they send; with `cut`,
#     the first request sends at most M bytes of its body and closes the
#     connection cleanly (a body shorter than its Content-Length); with
#     `hold=1` the first request waits for Origin.release("corrupt-once/KEY")
#     before it is answered (Origin.wait_held("corrupt-once/KEY") waits for
#     it to arrive).
#
# Origin.corrupt_log(KEY) lists each request for it, oldest first:
# {"range": <Range or None>, "if_range": <If-Range or None>, "status": S,
#  "corrupt": <whether the inverted byte was sent>}.


def _corrupt_requests(self: Origin) -> dict:
    with self._lock:
        return self.__dict__.setdefault("_corrupt_requests", {})


def _corrupt_log(self: Origin, key: str) -> list:
    with self._lock:
        return [dict(entry) for entry in self.__dict__.get("_corrupt_requests", {}).get(key, [])]


Origin.corrupt_log = _corrupt_log  # type: ignore[attr-defined]


def _corrupt_once(self: _Handler, key: str) -> None:
    size = self._int("size", 100_000)
    if not 1 <= size <= 1 << 30:
        raise ValueError("size must be within 1..2^30")
    flip = self._int("flip", size // 2)
    if not 0 <= flip < size:
        raise ValueError("flip must be within 0..N-1")
    requests = _corrupt_requests(self.origin)
    with self.origin._lock:
        log = requests.setdefault(key, [])
        index = len(log)
        entry = {"range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                 "status": None, "corrupt": False}
        log.append(entry)
    if index == 0 and self.q.get("hold") == "1":
        holds = _holds(self.origin)
        with holds.changed:
            holds.started[f"corrupt-once/{key}"] = holds.started.get(f"corrupt-once/{key}", 0) + 1
            holds.changed.notify_all()
            stopping = self.origin._stopping
            holds.changed.wait_for(lambda: f"corrupt-once/{key}" in holds.released or stopping.is_set(), 60)
    body = bytearray(pattern(size, self.q.get("seed", key)))
    etag = f'"{key}"'
    status, first, last = _honoured_range(self, size, etag)
    corrupt = index < self._int("times", 1) and first <= flip <= last
    if corrupt:
        body[flip] ^= 0xFF
    piece = bytes(body[first:last + 1])
    limit = _sent_length(self, index, len(piece))
    with self.origin._lock:
        entry["status"], entry["corrupt"] = status, corrupt and flip - first < limit
    _send_piece(self, status, (first, last, size), etag, piece, limit)


def _honoured_range(self: _Handler, size: int, etag: str) -> tuple[int, int, int]:
    """The status, first and last byte of the answer to the request's
    `Range: bytes=A-B`, honoured when If-Range is absent or is `etag` (header
    values are latin-1 text: one character per byte)."""
    asked = _asked_range(self.headers.get("Range"), size)
    if asked is None or self.headers.get("If-Range") not in (None, etag):
        return 200, 0, size - 1
    return 206, asked[0], asked[1]


def _sent_length(self: _Handler, index: int, length: int) -> int:
    """How much of a body of `length` bytes the `index`th request gets: at
    most `cut` bytes for the first, all of it for the others."""
    return min(length, self._int("cut", length)) if index == 0 else length


def _send_piece(self: _Handler, status: int, span: tuple[int, int, int], etag: str, piece: bytes, limit: int) -> None:
    """Answers with `piece`, bytes first..last of `size` (`span`), as a 200
    or 206 with `etag`, sending its first `limit` bytes; a shorter body than
    announced ends with the connection closed cleanly."""
    first, last, size = span
    headers = [("Content-Type", "application/octet-stream"), ("ETag", etag), ("Accept-Ranges", "bytes"),
               ("Content-Length", str(len(piece)))]
    if status == 206:
        headers.append(("Content-Range", f"bytes {first}-{last}/{size}"))
    self._start(status, headers)
    self._stream(piece[:limit])
    if limit < len(piece):
        self.wfile.flush()
        self.close_connection = True


_add_route("/corrupt-once/", _corrupt_once)

# End of the bodies corrupted in flight block.


# --------------------------------------------------------------------------
# Validators that are not UTF-8, for tests that they go back byte for byte:
#
# /raw-etag/NAME?size=N&cut=M
#     pattern(N, NAME) with the strong ETag "NAME-" followed by the bytes
#     0xE9 0xFF (obs-text) and the closing quote, and Accept-Ranges; honours
#     `Range: bytes=A-` when If-Range is absent or is exactly those bytes.
#     With `cut`, the first response sends at most M bytes of its body and
#     closes the connection cleanly (a body shorter than its Content-Length).
#
# Origin.raw_etag(NAME) is that ETag's bytes; Origin.raw_etag_log(NAME) lists
# each request for it, oldest first: {"range": <Range or None>,
# "if_range": <If-Range's bytes or None>, "status": S}.


def _raw_etag(self: Origin, name: str) -> bytes:
    return b'"' + name.encode() + b'-\xe9\xff"'


def _raw_etag_log(self: Origin, name: str) -> list:
    with self._lock:
        return [dict(entry) for entry in self.__dict__.get("_raw_etag_requests", {}).get(name, [])]


Origin.raw_etag = _raw_etag  # type: ignore[attr-defined]
Origin.raw_etag_log = _raw_etag_log  # type: ignore[attr-defined]


def _serve_raw_etag(self: _Handler, name: str) -> None:
    size = self._int("size", 100_000)
    if not 1 <= size <= 1 << 30:
        raise ValueError("size must be within 1..2^30")
    etag = _raw_etag(self.origin, name)
    # http.server reads and writes header values as latin-1: one character per byte.
    if_range = self.headers.get("If-Range")
    if_range = None if if_range is None else if_range.encode("latin-1")
    with self.origin._lock:
        log = self.origin.__dict__.setdefault("_raw_etag_requests", {}).setdefault(name, [])
        index = len(log)
        entry = {"range": self.headers.get("Range"), "if_range": if_range, "status": None}
        log.append(entry)
    shown = etag.decode("latin-1")
    status, first, last = _honoured_range(self, size, shown)
    piece = pattern(size, name)[first:last + 1]
    limit = _sent_length(self, index, len(piece))
    with self.origin._lock:
        entry["status"] = status
    _send_piece(self, status, (first, last, size), shown, piece, limit)


_add_route("/raw-etag/", _serve_raw_etag)

# End of the validators that are not UTF-8 block.
