#!/usr/bin/env python3
"""A minimal HTTP forward proxy (absolute-form requests, no CONNECT).

Importable::

    from proxy import Proxy
    with Proxy() as p:
        p.url          # "http://127.0.0.1:PORT"
        p.requests     # absolute URLs forwarded so far

or runnable: ``python3 scripts/proxy.py [--port N]`` prints ``PORT <n>`` and
serves until killed (or until its stdin, when it is a pipe, is closed).
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import os
import stat
import sys
import threading
from urllib.parse import urlsplit

__all__ = ["Proxy"]

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "trailers", "transfer-encoding", "upgrade",
})
VIA = "1.1 courier-test-proxy"
_CHUNK = 64 * 1024


def _forwardable(headers) -> list[tuple[str, str]]:
    """Drop hop-by-hop headers, including any named in ``Connection``."""
    named = set()
    for value in headers.get_all("Connection") or []:
        named.update(token.strip().lower() for token in value.split(","))
    return [(k, v) for k, v in headers.items()
            if k.lower() not in HOP_BY_HOP and k.lower() not in named]


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address, proxy: "Proxy"):
        self.proxy = proxy
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], OSError) and not self.proxy.verbose:
            return
        super().handle_error(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "courier-test-proxy/1.0"
    sys_version = ""
    timeout = 120

    server: _Server

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format, *args):  # noqa: A002 - signature from base class
        if self.server.proxy.verbose:
            super().log_message(format, *args)

    def do_CONNECT(self):
        self._error(501, "CONNECT is not supported")

    def do_GET(self):
        self._forward()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = do_GET

    def _error(self, status: int, message: str):
        body = (message + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self):
        parts = urlsplit(self.path)
        if parts.scheme != "http" or not parts.hostname:
            self._error(400, "absolute-form http:// request expected")
            return
        self.server.proxy._record(self.path)

        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = _forwardable(self.headers)
        if not any(k.lower() == "host" for k, _ in headers):
            headers.append(("Host", parts.netloc.rpartition("@")[2]))
        headers.append(("Via", VIA))
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query

        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80,
                                          timeout=self.server.proxy.timeout)
        try:
            try:
                conn.putrequest(self.command, target, skip_host=True,
                                skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                conn.endheaders(body)
                response = conn.getresponse()
            except OSError as exc:
                self._error(502, f"upstream failed: {exc}")
                return
            self._relay(response)
        finally:
            conn.close()

    def _relay(self, response: http.client.HTTPResponse):
        self.log_request(response.status)
        self.send_response_only(response.status, response.reason)  # keeps upstream Date/Server
        relayed = _forwardable(response.headers)
        for name, value in relayed:
            self.send_header(name, value)
        self.send_header("Via", VIA)

        bodiless = (self.command == "HEAD" or response.status in (204, 304)
                    or 100 <= response.status < 200)
        has_length = any(k.lower() == "content-length" for k, _ in relayed)
        chunked = not bodiless and not has_length
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if bodiless:
            return

        try:
            while True:
                data = response.read1(_CHUNK) if chunked else response.read(_CHUNK)
                if not data:
                    break
                if chunked:
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
                else:
                    self.wfile.write(data)
                self.wfile.flush()
        except (http.client.IncompleteRead, OSError):
            # The upstream body broke off: the client must see it broken too.
            self.close_connection = True
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


class Proxy:
    """A threaded forward proxy on 127.0.0.1 (a free port unless ``port``)."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1",
                 timeout: float = 60.0, verbose: bool = False):
        self.host = host
        self.timeout = timeout
        self.verbose = verbose
        self._requested_port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._requests: list[str] = []

    def start(self) -> "Proxy":
        if self._server is None:
            self._server = _Server((self.host, self._requested_port), self)
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                name=f"proxy:{self.port}", daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> "Proxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("proxy is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def requests(self) -> list[str]:
        """Absolute URLs forwarded so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()

    def _record(self, url: str) -> None:
        with self._lock:
            self._requests.append(url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Minimal HTTP forward proxy for tests.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--no-stdin", action="store_true",
                        help="keep serving when stdin reaches end of file")
    args = parser.parse_args(argv)

    proxy = Proxy(port=args.port, host=args.host, verbose=args.verbose).start()
    print(f"PORT {proxy.port}", flush=True)
    done = threading.Event()
    if not args.no_stdin and stat.S_ISFIFO(os.fstat(0).st_mode):
        def watch():
            try:
                while os.read(0, 65536):
                    pass
            except OSError:
                pass
            done.set()
        threading.Thread(target=watch, daemon=True).start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
