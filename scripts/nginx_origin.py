#!/usr/bin/env python3
"""An nginx on 127.0.0.1 serving the files of a directory: the fast origin of
the download benchmark, and the HTTP/2 origin of the tests.

    with NginxOrigin(root, tls=(cert, key)) as nginx:   # HTTP/2 over TLS
        url = nginx.url("/f/0")
        nginx.access_log()   # [(connection, protocol, uri), ...]

Files are served from ``<root>/www``; nginx keeps its own files beside it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

CONF = """
{user}
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log error;
events {{ worker_connections 1024; }}
http {{
    log_format conn '$connection $server_protocol $request_uri';
    access_log {access_log};
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path {root}/tmp;
    proxy_temp_path {root}/tmp;
    fastcgi_temp_path {root}/tmp;
    uwsgi_temp_path {root}/tmp;
    scgi_temp_path {root}/tmp;
    server {{
        listen 127.0.0.1:{port}{listen};
        {certificates}
        root {root}/www;
    }}
}}
"""


def binary() -> str | None:
    """The nginx executable, if it is installed."""
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    return found if os.path.exists(found) else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(root: Path, port: int) -> subprocess.Popen:
    """Starts nginx on ``root/nginx.conf`` (prefix ``root``) and waits, up to
    10 s, until it accepts connections on ``port``."""
    executable = binary()
    if executable is None:
        raise RuntimeError("nginx is not installed (scripts/setup installs nginx-light)")
    process = subprocess.Popen([executable, "-c", str(root / "nginx.conf"), "-p", str(root)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited: {(root / 'error.log').read_text()}")
            if time.monotonic() > deadline:
                process.terminate()
                process.wait(timeout=10)
                raise RuntimeError("nginx did not start within 10 s")
            time.sleep(0.02)


class NginxProcess:
    """An nginx that `start` launches and `stop` (or leaving a `with`) ends."""

    process: subprocess.Popen | None = None

    def start(self):
        raise NotImplementedError

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class NginxOrigin(NginxProcess):
    """nginx serving ``<root>/www``: plain HTTP/1.1, or with ``tls=(cert,
    key)`` HTTPS offering HTTP/2. ``log_requests`` keeps an access log."""

    def __init__(self, root: str | os.PathLike, tls: tuple[str, str] | None = None,
                 log_requests: bool = False):
        self.root = Path(root)
        self.tls = tls
        self.log_requests = log_requests
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def start(self) -> "NginxOrigin":
        (self.root / "www").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        # As root, nginx's workers would switch to nobody, who may not read
        # private temporary directories.
        user = "user root;" if os.geteuid() == 0 else ""
        certificates = f"ssl_certificate {self.tls[0]}; ssl_certificate_key {self.tls[1]};" if self.tls else ""
        (self.root / "nginx.conf").write_text(CONF.format(
            user=user, root=self.root, port=self.port, listen=" ssl http2" if self.tls else "",
            certificates=certificates, access_log=f"{self.root}/access.log conn" if self.log_requests else "off"))
        self.process = launch(self.root, self.port)
        return self

    def access_log(self) -> list[tuple[str, ...]]:
        """(connection number, protocol, URI) of each request served so far."""
        path = self.root / "access.log"
        return [tuple(line.split()) for line in path.read_text().splitlines()] if path.exists() else []

