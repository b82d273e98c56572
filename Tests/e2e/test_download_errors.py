"""End-to-end tests of failed downloads: every outcome error code the
downloader produces, each from the real condition, in one attempt
(`retries: 0`; what is retried is in test_retries.py)."""

from __future__ import annotations

import socket

import pytest

from origin import Origin, pattern


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def failed(out: dict, code: str) -> dict:
    assert out["ok"] is False, out
    assert out["error"]["code"] == code, out
    assert isinstance(out["error"]["message"], str) and out["error"]["message"]
    assert "path" not in out and "text" not in out and "base64" not in out
    return out["error"]


@pytest.mark.parametrize("status", [404, 500])
def test_http_status_outside_2xx(courier, origin, status):
    c = courier()
    out = c.fetch(origin.url(f"/status/{status}"), body="text", retries=0)
    error = failed(out, "http_status")
    assert error["httpStatus"] == status
    assert out["status"] == status
    assert out["headers"]["content-type"] == "text/plain; charset=utf-8"
    assert out["contentType"] == "text/plain; charset=utf-8"
    assert origin.hits(f"/status/{status}") == 1


def test_closed_port_is_connect_failed(courier):
    c = courier()
    out = c.fetch(f"http://127.0.0.1:{closed_port()}/bytes/10", retries=0)
    error = failed(out, "connect_failed")
    assert error["curlCode"] == 7
    assert out["status"] is None


def test_invalid_host_is_dns_failed(courier):
    c = courier()
    out = c.fetch("http://courier-e2e.invalid/bytes/10", timeout=60)
    error = failed(out, "dns_failed")
    assert error["curlCode"] == 6


def test_stalled_origin_is_timeout(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/stall?after=1000"), transfer_timeout=0.5, retries=0)
    error = failed(out, "timeout")
    assert error["curlCode"] == 28
    assert 450 <= out["durationMs"] < 5000
    assert origin.hits("/stall") == 1


def test_redirect_loop_is_too_many_redirects(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/loop"))
    error = failed(out, "too_many_redirects")
    assert error["curlCode"] == 47
    assert origin.hits("/loop") == 11


def test_redirect_to_file_is_scheme_not_allowed(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/redirect-to?url=file:///etc/passwd"), body="text")
    failed(out, "scheme_not_allowed")
    assert origin.hits("/redirect-to") == 1


def test_ftp_url_is_refused_without_contacting_anything(courier):
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        c = courier()
        result = c.download(f"ftp://127.0.0.1:{port}/file.bin")
        assert result["state"] == "finished"
        failed(c.wait(result["receipt"]), "scheme_not_allowed")
        assert c.tasks() == []
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_accept_filters_content_types(courier, origin):
    c = courier()
    refused = c.fetch(origin.url("/text?n=1"), accept=["image/*"])
    failed(refused, "unacceptable_content_type")
    assert refused["contentType"] == "text/plain; charset=utf-8"
    assert origin.last_headers("/text?n=1")["accept"] == "image/*"

    accepted = c.fetch(origin.url("/text?n=2"), accept=["text/*"], body="text")
    assert accepted["ok"], accepted
    assert origin.last_headers("/text?n=2")["accept"] == "text/*"

    image = c.fetch(origin.url("/image/png"), accept=["image/jpeg", "image/png"])
    assert image["ok"] and image["image"]["format"] == "png"

    own_header = c.fetch(origin.url("/text?n=3"), accept=["text/plain"],
                         headers={"Accept": "text/plain;q=0.9"})
    assert own_header["ok"]
    assert origin.last_headers("/text?n=3")["accept"] == "text/plain;q=0.9"


def test_max_bytes_below_content_length_is_too_large(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/bytes/5000000"), maxBytes=1000)
    failed(out, "too_large")
    assert out["size"] < 5_000_000
    assert c.fetch(origin.url("/bytes/1000"), maxBytes=1000)["ok"]


def test_max_bytes_without_content_length_fails_while_bytes_arrive(courier, origin):
    c = courier()
    result = c.download(origin.url("/bytes/3000000?chunked=1"), maxBytes=100_000)
    out = c.wait(result["receipt"])
    failed(out, "too_large")
    assert out["size"] < 3_000_000
    seen = [p["received"] for _, p in c.progress_by_task[result["task"]]]
    assert all(n < 3_000_000 for n in seen)


def test_destination_outside_download_root(courier, origin, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    c = courier("--download-root", str(root))
    result = c.download(origin.url("/bytes/10"), destination=str(tmp_path / "elsewhere.bin"))
    assert result["state"] == "finished"
    failed(c.wait(result["receipt"]), "destination_not_allowed")
    assert not (tmp_path / "elsewhere.bin").exists()
    assert origin.total_hits() == 0


def test_unwritable_destination_is_io(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/bytes/10"), destination="/proc/courier-e2e/out.bin")
    failed(out, "io")
    assert origin.hits("/bytes/10") == 1


def test_truncated_body_is_network(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/truncate?size=10000&send=4000"), retries=0)
    error = failed(out, "network")
    assert error["curlCode"] == 18


def test_cancel_is_cancelled(courier, origin):
    c = courier()
    result = c.download(origin.url("/stall?after=100"))
    c.wait_progress(result["task"])
    assert c.cancel(result["receipt"]) == {"cancelled": True, "count": 1}
    failed(c.wait(result["receipt"]), "cancelled")
    assert origin.hits("/stall") == 1


def test_shutdown_ends_every_receipt_before_its_result(courier, origin):
    c = courier("--max-active", "2")
    running = [c.download(origin.url(f"/stall?after=100&seed={n}"))["receipt"] for n in range(2)]
    queued = [c.download(origin.url(f"/bytes/10?n={n}"))["receipt"] for n in range(3)]
    assert sorted(t["state"] for t in c.tasks()) == ["queued"] * 3 + ["running"] * 2
    shutdown_id = c.send_request("shutdown")
    assert c.wait_response(shutdown_id)["result"] is None
    receipts = running + queued
    order = [m.message for m in c.messages]
    answered_at = next(i for i, m in enumerate(order) if m.get("id") == shutdown_id)
    ended_at = {m["params"]["receipt"]: i for i, m in enumerate(order)
                if m.get("method") == "download/finished"}
    assert set(ended_at) == set(receipts)
    assert all(ended_at[r] < answered_at for r in receipts)
    for receipt in receipts:
        failed(c.outcomes[receipt][0], "shutdown")
    assert origin.total_hits() <= 2
    c.exit()
    assert c.wait_exit(10) == 0


def test_end_of_input_lets_a_download_under_way_end_as_it_would(courier, origin):
    c = courier()
    result = c.download(origin.url("/status/404?delay=0"), body="text")
    stalled = c.download(origin.url("/stall?after=100&hold=1"), timeout=0.5)
    c.wait_progress(stalled["task"])
    c.close_stdin()
    assert c.wait_exit(10) == 0
    failed(c.outcomes[result["receipt"]][0], "http_status")
    failed(c.outcomes[stalled["receipt"]][0], "timeout")


@pytest.fixture
def tls_origin(tls_cert):
    with Origin(tls=tls_cert) as o:
        yield o


def test_self_signed_https_is_tls_failed(courier, tls_origin):
    c = courier()
    out = c.fetch(tls_origin.url("/bytes/100"))
    error = failed(out, "tls_failed")
    assert error["curlCode"] in (35, 60)
    assert tls_origin.total_hits() == 0


def test_self_signed_https_succeeds_with_its_ca_file(courier, tls_origin, tls_cert):
    c = courier("--ca-file", tls_cert[0])
    out = c.fetch(tls_origin.url("/bytes/100"), body="base64")
    assert out["ok"], out
    assert out["finalUrl"].startswith("https://127.0.0.1:")
    assert tls_origin.hits("/bytes/100") == 1
    import base64
    assert base64.b64decode(out["base64"]) == pattern(100)
