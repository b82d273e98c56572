"""Connection reuse and HTTP/2: what the origin sees of courier's
connections, against the test origin (HTTP/1.1 keep-alive) and against an
nginx that offers HTTP/2 over TLS."""

from __future__ import annotations

import pytest

import nginx_origin
from nginx_origin import NginxOrigin


@pytest.fixture
def h2_origin(tmp_path, tls_cert):
    """nginx on 127.0.0.1 serving /f/0 … /f/9 over TLS with HTTP/2, logging
    the connection each request came on."""
    if nginx_origin.binary() is None:
        pytest.skip("nginx is not installed (scripts/setup installs it)")
    root = tmp_path / "nginx"
    (root / "www" / "f").mkdir(parents=True)
    for index in range(10):
        (root / "www" / "f" / str(index)).write_bytes(bytes([index]) * 50_000)
    with NginxOrigin(root, tls=tls_cert, log_requests=True) as nginx:
        yield nginx


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
    c = courier("--ca-file", tls_cert[0], "--max-active", "10")
    receipts = [c.download(h2_origin.url(f"/f/{index}"), body="base64")["receipt"] for index in range(10)]
    outcomes = [c.wait(receipt) for receipt in receipts]
    for index, outcome in enumerate(outcomes):
        assert outcome["ok"] and outcome["httpVersion"] == "2", outcome
        assert outcome["size"] == 50_000
    rows = [row for row in h2_origin.access_log() if row[2].startswith("/f/")]
    assert len(rows) == 10 and {row[1] for row in rows} == {"HTTP/2.0"}
    # Ten transfers at once, multiplexed over one TLS connection.
    assert len({row[0] for row in rows}) == 1, rows
