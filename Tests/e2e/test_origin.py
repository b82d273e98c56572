"""Tests of the test servers themselves: scripts/origin.py and scripts/proxy.py."""

import email.utils
import gzip
import http.client
import json
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import pytest

from origin import (DEFAULT_TEXT, INVALID_UTF8, LATIN1_TEXT, Origin, gzip_plain,
                    image_bytes, pattern)
from proxy import Proxy

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def origin():
    with Origin() as o:
        yield o


@pytest.fixture(autouse=True)
def _fresh_counters(origin):
    origin.reset_hits()


def get(origin, path, headers=None, method="GET"):
    """One request on a fresh connection: (status, headers as lower-case dict, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        conn.close()


# -- content ----------------------------------------------------------------


def test_pattern_is_deterministic_seeded_and_sliceable():
    assert pattern(1000) == pattern(1000)
    assert pattern(1000, "a") != pattern(1000, "b")
    assert len(pattern(0)) == 0
    big = pattern(300_000, "s")
    assert len(big) == 300_000
    assert big[123_456:123_556] == pattern(100, "s", offset=123_456)
    assert big[:65536] != big[65536:131072]


def test_bytes_route_length_and_content(origin):
    status, headers, body = get(origin, "/bytes/1000")
    assert status == 200
    assert headers["content-length"] == "1000"
    assert headers["content-type"] == "application/octet-stream"
    assert body == pattern(1000)

    _, _, seeded = get(origin, "/bytes/1000?seed=x")
    assert seeded == pattern(1000, "x") != body

    status, headers, body = get(origin, "/bytes/0")
    assert (status, headers["content-length"], body) == (200, "0", b"")


def test_bytes_large_and_chunked(origin):
    _, _, body = get(origin, "/bytes/3000000")
    assert body == pattern(3_000_000)
    _, headers, body = get(origin, "/bytes/200000?chunked=1")
    assert headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in headers
    assert body == pattern(200_000)


def test_head_sends_headers_only(origin):
    status, headers, body = get(origin, "/bytes/500", method="HEAD")
    assert (status, headers["content-length"], body) == (200, "500", b"")


def test_keep_alive_connection_serves_several_requests(origin):
    conn = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=10)
    for n in (1, 10, 100):
        conn.request("GET", f"/bytes/{n}")
        assert conn.getresponse().read() == pattern(n)
    conn.close()
    assert origin.hits("/bytes/100") == 1


def test_unknown_path_is_404(origin):
    assert get(origin, "/no/such/thing")[0] == 404


# -- hit counters and recorded headers -----------------------------------------


def test_hit_counters_per_path_and_per_target(origin):
    get(origin, "/bytes/5")
    get(origin, "/bytes/5?seed=a")
    get(origin, "/bytes/5?seed=a")
    assert origin.hits("/bytes/5") == 3
    assert origin.hits("/bytes/5?seed=a") == 2
    assert origin.hits("/bytes/6") == 0

    status, _, body = get(origin, "/_hits?path=/bytes/5")
    assert status == 200 and json.loads(body) == {"path": "/bytes/5", "hits": 3}
    get(origin, "/_hits?path=/_hits")
    assert origin.hits("/_hits") == 0

    assert get(origin, "/_reset", method="POST")[0] == 200
    assert origin.hits("/bytes/5") == 0


def test_last_headers_and_header_echo(origin):
    status, headers, body = get(origin, "/headers", {"X-Probe": "one", "Accept": "image/*"})
    assert status == 200 and headers["content-type"] == "application/json"
    echoed = json.loads(body)
    assert echoed["x-probe"] == "one" and echoed["accept"] == "image/*"
    assert origin.last_headers("/headers")["x-probe"] == "one"
    assert origin.last_headers("/never") == {}


# -- caching -------------------------------------------------------------------


def test_cache_headers_and_etag_revalidation(origin):
    path = "/cache?max-age=60&etag=v1&vary=Accept"
    status, headers, body = get(origin, path)
    assert status == 200
    assert headers["cache-control"] == "max-age=60"
    assert headers["etag"] == '"v1"'
    assert headers["vary"] == "Accept"
    assert "date" in headers
    assert b"max-age=60" in body

    status, headers, body = get(origin, path, {"If-None-Match": '"v1"'})
    assert (status, body) == (304, b"")
    assert headers["etag"] == '"v1"' and "date" in headers
    assert get(origin, path, {"If-None-Match": 'W/"v1", "zz"'})[0] == 304
    assert get(origin, path, {"If-None-Match": '"v2"'})[0] == 200


def test_cache_last_modified_revalidation(origin):
    modified = email.utils.formatdate(time.time() - 3600, usegmt=True)
    path = "/cache?last-modified=" + urllib.request.quote(modified)
    _, headers, _ = get(origin, path)
    assert headers["last-modified"] == modified
    now = email.utils.formatdate(usegmt=True)
    earlier = email.utils.formatdate(time.time() - 7200, usegmt=True)
    assert get(origin, path, {"If-Modified-Since": now})[0] == 304
    assert get(origin, path, {"If-Modified-Since": earlier})[0] == 200
    # If-None-Match takes precedence over If-Modified-Since.
    assert get(origin, path, {"If-Modified-Since": now, "If-None-Match": '"x"'})[0] == 200


def test_cache_directives_body_and_status(origin):
    _, headers, body = get(origin, "/cache?no-store=1&no-cache=1&body=hello&expires=-10")
    assert headers["cache-control"] == "no-store, no-cache"
    assert body == b"hello"
    expires = email.utils.parsedate_to_datetime(headers["expires"]).timestamp()
    assert expires < time.time()
    assert get(origin, "/cache?status=404&max-age=5")[0] == 404


def test_resources_can_be_replaced_and_revalidated(origin):
    url = origin.set_resource("doc", b"first", {"ETag": '"1"', "Cache-Control": "max-age=0"})
    assert url == origin.url("/res/doc")
    status, headers, body = get(origin, "/res/doc")
    assert (status, body, headers["etag"]) == (200, b"first", '"1"')
    assert get(origin, "/res/doc", {"If-None-Match": '"1"'})[0] == 304

    origin.set_resource("/res/doc", "second", {"ETag": '"2"', "Content-Type": "text/plain"})
    status, headers, body = get(origin, "/res/doc", {"If-None-Match": '"1"'})
    assert (status, body, headers["content-type"]) == (200, b"second", "text/plain")
    assert origin.hits("/res/doc") == 3
    origin.remove_resource("doc")
    assert get(origin, "/res/doc")[0] == 404


# -- encodings ---------------------------------------------------------------------


def test_gzip_only_when_accepted(origin):
    status, headers, body = get(origin, "/gzip?size=5000", {"Accept-Encoding": "gzip, br"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert len(body) < 5000 and gzip.decompress(body) == gzip_plain(5000)

    _, headers, body = get(origin, "/gzip?size=5000")
    assert "content-encoding" not in headers and body == gzip_plain(5000)
    _, headers, _ = get(origin, "/gzip", {"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in headers


def test_text_charsets(origin):
    _, headers, body = get(origin, "/text")
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert body.decode("utf-8") == DEFAULT_TEXT

    _, headers, body = get(origin, "/text?charset=iso-8859-1")
    assert headers["content-type"] == "text/plain; charset=iso-8859-1"
    assert body.decode("latin-1") == LATIN1_TEXT

    _, headers, body = get(origin, "/text?charset=utf-16&text=hi&declare=0")
    assert headers["content-type"] == "text/plain" and body.decode("utf-16") == "hi"

    _, headers, body = get(origin, "/text/invalid-utf8")
    assert headers["content-type"] == "text/plain; charset=utf-8" and body == INVALID_UTF8


def test_type_route(origin):
    _, headers, body = get(origin, "/type?ct=application/x-thing%3B%20v%3D1")
    assert headers["content-type"] == "application/x-thing; v=1" and body


# -- images ------------------------------------------------------------------------


def image_size(data):
    """(format, width, height) read from the image's own headers."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        assert data[12:16] == b"IHDR"
        return ("png", *struct.unpack(">II", data[16:24]))
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return ("gif", *struct.unpack("<HH", data[6:10]))
    if data.startswith(b"\xff\xd8"):
        i = 2
        while i < len(data):
            assert data[i] == 0xFF
            marker = data[i + 1]
            (length,) = struct.unpack(">H", data[i + 2:i + 4])
            if marker in (0xC0, 0xC1, 0xC2):
                height, width = struct.unpack(">HH", data[i + 5:i + 9])
                return ("jpeg", width, height)
            i += 2 + length
        raise AssertionError("no SOF marker")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
        assert data[12:16] == b"VP8L" and data[20] == 0x2F
        (bits,) = struct.unpack("<I", data[21:25])
        return ("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    raise AssertionError("unknown image format")


@pytest.mark.parametrize("fmt", ["png", "jpeg", "gif", "webp"])
def test_images_carry_their_dimensions(origin, fmt):
    status, headers, body = get(origin, f"/image/{fmt}")
    assert status == 200 and headers["content-type"] == f"image/{fmt}"
    assert image_size(body) == (fmt, 3, 2)
    _, _, body = get(origin, f"/image/{fmt}?w=640&h=33")
    assert image_size(body) == (fmt, 640, 33)
    assert body == image_bytes(fmt, 640, 33)


def test_png_is_decodable():
    data = image_bytes("png", 4, 3)
    assert data[8:12] == struct.pack(">I", 13)
    idat_len = struct.unpack(">I", data[33:37])[0]
    assert data[37:41] == b"IDAT"
    raw = zlib.decompress(data[41:41 + idat_len])
    assert len(raw) == 3 * (1 + 4 * 3)
    assert data.endswith(b"IEND\xaeB`\x82")


# -- redirects and statuses -----------------------------------------------------------


def test_redirect_chain(origin):
    status, headers, _ = get(origin, "/redirect/3")
    assert (status, headers["location"]) == (302, "/redirect/2")
    with urllib.request.urlopen(origin.url("/redirect/3"), timeout=10) as response:
        assert response.read() == b"redirected"
    assert origin.hits("/redirect/0") == 1


def test_loop_and_redirect_to(origin):
    status, headers, _ = get(origin, "/loop")
    assert (status, headers["location"]) == (302, "/loop")
    status, headers, _ = get(origin, "/redirect-to?url=file:///etc/passwd&status=301")
    assert (status, headers["location"]) == (301, "file:///etc/passwd")


@pytest.mark.parametrize("code", [200, 201, 404, 418, 500, 503])
def test_status_codes(origin, code):
    status, _, body = get(origin, f"/status/{code}")
    assert (status, body) == (code, f"status {code}".encode())


def test_status_204_has_no_body(origin):
    status, _, body = get(origin, "/status/204")
    assert (status, body) == (204, b"")


# -- slow responses -----------------------------------------------------------------


def test_drip_sends_in_chunks(origin):
    start = time.monotonic()
    status, headers, body = get(origin, "/drip?size=1000&chunks=4&interval=0.05")
    assert time.monotonic() - start >= 0.14
    assert (status, headers["content-length"], body) == (200, "1000", pattern(1000))
    _, headers, body = get(origin, "/drip?size=999&chunks=3&interval=0&length=0")
    assert headers.get("transfer-encoding") == "chunked" and body == pattern(999)


def test_stall_and_slow_headers_end_when_the_server_stops():
    with Origin() as o:
        stall = socket.create_connection(("127.0.0.1", o.port), timeout=5)
        stall.sendall(b"GET /stall?after=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while b"\r\n\r\n" not in received or len(received.split(b"\r\n\r\n", 1)[1]) < 10:
            received += stall.recv(4096)
        assert b"Content-Length: 1000000" in received
        slow = socket.create_connection(("127.0.0.1", o.port), timeout=5)
        slow.sendall(b"GET /slow-headers?delay=30 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)
        start = time.monotonic()
    assert time.monotonic() - start < 2
    stall.settimeout(2)
    while stall.recv(4096):
        pass
    assert slow.recv(4096) == b""
    stall.close()
    slow.close()


def test_truncated_body_breaks_off(origin):
    conn = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=10)
    conn.request("GET", "/truncate?size=100&send=10")
    with pytest.raises(http.client.IncompleteRead):
        conn.getresponse().read()
    conn.close()


def test_many_concurrent_connections(origin):
    errors = []
    barrier = threading.Barrier(200)

    def client():
        try:
            conn = http.client.HTTPConnection("127.0.0.1", origin.port, timeout=20)
            conn.connect()
            barrier.wait()
            conn.request("GET", "/bytes/64")
            assert conn.getresponse().read() == pattern(64)
            conn.close()
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert origin.hits("/bytes/64") == 200


# -- TLS and the command line --------------------------------------------------------


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_tls(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    with Origin(tls=(str(cert), str(key))) as o:
        assert o.url("/bytes/7").startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(o.url("/bytes/7"), context=context, timeout=10) as r:
            assert r.read() == pattern(7)
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(o.url("/bytes/7"), timeout=10)


@pytest.mark.parametrize("script", ["origin.py", "proxy.py"])
def test_command_line_prints_port_and_ends_at_eof(script):
    with subprocess.Popen([sys.executable, str(SCRIPTS / script)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline()
            assert line.startswith("PORT ")
            port = int(line.split()[1])
            if script == "origin.py":
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/bytes/3", timeout=10) as r:
                    assert r.read() == pattern(3)
            proc.stdin.close()
            assert proc.wait(5) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


# -- proxy ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxy():
    with Proxy() as p:
        yield p


def via_proxy(proxy, url, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        conn.request("GET", url, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_proxy_forwards_and_records(origin, proxy):
    proxy.reset()
    url = origin.url("/bytes/5000?seed=p")
    status, headers, body = via_proxy(proxy, url, {"X-Probe": "through"})
    assert (status, body) == (200, pattern(5000, "p"))
    assert headers["content-length"] == "5000"
    assert proxy.requests == [url]
    assert origin.hits("/bytes/5000") == 1
    forwarded = origin.last_headers("/bytes/5000")
    assert forwarded["x-probe"] == "through" and "via" in forwarded


def test_proxy_streams_chunked_and_relays_statuses(origin, proxy):
    _, headers, body = via_proxy(proxy, origin.url("/bytes/100000?chunked=1"))
    assert headers.get("transfer-encoding") == "chunked" and body == pattern(100_000)
    assert via_proxy(proxy, origin.url("/status/404"))[0] == 404
    status, _, body = via_proxy(proxy, origin.url("/cache?etag=p"), {"If-None-Match": '"p"'})
    assert (status, body) == (304, b"")


def test_proxy_with_urllib_and_dead_upstream(origin, proxy):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url}))
    with opener.open(origin.url("/redirect/2"), timeout=10) as response:
        assert response.read() == b"redirected"

    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    assert via_proxy(proxy, f"http://127.0.0.1:{port}/x")[0] == 502
