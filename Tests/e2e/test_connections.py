"""Connection reuse and HTTP/2: what the origin sees of courier's
connections, against the test origin (HTTP/1.1 keep-alive) and against an
nginx that offers HTTP/2 over TLS."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

NGINX_CONF = """
{user}
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log error;
events {{ worker_connections 256; }}
http {{
    log_format conn '$connection $server_protocol $request_uri';
    access_log {root}/access.log conn;
    client_body_temp_path {root}/tmp;
    proxy_temp_path {root}/tmp;
    fastcgi_temp_path {root}/tmp;
    uwsgi_temp_path {root}/tmp;
    scgi_temp_path {root}/tmp;
    server {{
        listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root}/www;
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def h2_origin(tmp_path, tls_cert):
    """nginx on 127.0.0.1 serving /f/0 … /f/9 over TLS with HTTP/2; yields
    (base URL, a function returning the access log as (connection,
    protocol, uri) rows)."""
    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (scripts/setup installs it)")
    root = tmp_path / "nginx"
    (root / "www" / "f").mkdir(parents=True)
    (root / "tmp").mkdir()
    for index in range(10):
        (root / "www" / "f" / str(index)).write_bytes(bytes([index]) * 50_000)
    port = free_port()
    cert, key = tls_cert
    # As root, nginx's workers would switch to nobody, who cannot read pytest's
    # private temporary directories.
    user = "user root;" if os.geteuid() == 0 else ""
    (root / "nginx.conf").write_text(NGINX_CONF.format(user=user, root=root, port=port, cert=cert, key=key))
    process = subprocess.Popen([NGINX, "-c", str(root / "nginx.conf"), "-p", str(root)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert process.poll() is None, (root / "error.log").read_text()
            assert time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.02)

    def access_log() -> list[tuple[str, str, str]]:
        path = root / "access.log"
        return [tuple(line.split()) for line in path.read_text().splitlines()] if path.exists() else []

    yield f"https://127.0.0.1:{port}", access_log
    process.terminate()
    process.wait(timeout=10)


def test_sequential_downloads_reuse_one_connection(courier, origin):
    c = courier("--max-active", "1")
    before = origin.connections_accepted()
    for index in range(20):
        outcome = c.fetch(origin.url(f"/bytes/1000?reuse={index}"), cachePolicy="reload")
        assert outcome["ok"] and outcome["httpVersion"] == "1.1", outcome
    assert origin.connections_accepted() - before == 1


def test_concurrent_downloads_to_one_host_use_their_own_connections(courier, origin):
    c = courier("--max-active", "4")
    before = origin.connections_accepted()
    receipts = [c.download(origin.url(f"/drip?size=4000&chunks=4&interval=0.1&c={index}"))["receipt"]
                for index in range(4)]
    assert all(c.wait(receipt)["ok"] for receipt in receipts)
    assert origin.connections_accepted() - before == 4


def test_http2_is_used_when_the_origin_offers_it(courier, h2_origin, tls_cert):
    base, access_log = h2_origin
    c = courier("--ca-file", tls_cert[0], "--max-active", "10")
    receipts = [c.download(f"{base}/f/{index}", body="base64")["receipt"] for index in range(10)]
    outcomes = [c.wait(receipt) for receipt in receipts]
    for index, outcome in enumerate(outcomes):
        assert outcome["ok"] and outcome["httpVersion"] == "2", outcome
        assert outcome["size"] == 50_000
    rows = [row for row in access_log() if row[2].startswith("/f/")]
    assert len(rows) == 10 and {row[1] for row in rows} == {"HTTP/2.0"}
    # Ten transfers at once, multiplexed over one TLS connection.
    assert len({row[0] for row in rows}) == 1, rows
