"""A redirect's `Location` is followed as the bytes the origin sent: courier
asks the next hop for exactly what `curl -L` asks for (libcurl's URL API
escapes a space, a control or a byte that is not ASCII as `%xx`), never for a
lossy decoding of those bytes, in which a lone 0xC3 became U+FFFD and the
request `/%ef%bf%bd(`. The expected targets are what curl 7.88, the libcurl
courier links, requested for each `Location`."""

from __future__ import annotations

from urllib.parse import quote_from_bytes

import pytest

CASES = [
    # (Location as sent, "{base}" standing for the origin; the target curl asks for)
    pytest.param(b"{base}/landing/\xc3(", "/landing/%c3(", id="absolute, a lone 0xC3"),
    pytest.param(b"/landing/\xc3(", "/landing/%c3(", id="relative, a lone 0xC3"),
    pytest.param(b"{base}/landing/x\xc3(?q=\xc3 y&r=%41#f\xc3", "/landing/x%c3(?q=%c3+y&r=%41",
                 id="absolute, bytes and a space in the query, a fragment"),
    pytest.param(b"{base}/landing/a b", "/landing/a%20b", id="absolute, a space"),
    pytest.param(b"HTTP://{host}/landing/../up\xc3", "/up%c3", id="upper-case scheme, dot segment"),
]


@pytest.mark.parametrize("location, target", CASES)
def test_the_next_hop_asks_for_what_curl_asks_for(courier, origin, location, target):
    # Given a redirect whose Location carries bytes that are not all UTF-8
    sent = location.replace(b"{base}", origin.base_url.encode()).replace(b"{host}", f"{origin.host}:{origin.port}".encode())
    origin.set_resource(target.split("?")[0], b"landed")
    url = origin.url("/redirect-bytes?location=" + quote_from_bytes(sent, safe=""))
    # When it is followed
    out = courier().fetch(url, body="text")
    # Then the next hop asked for those bytes, escaped as curl escapes them
    assert origin.request_log() == [url.removeprefix(origin.base_url), target]
    assert out["ok"] and out["text"] == "landed", out
    assert out["finalUrl"].startswith(origin.url(target))
