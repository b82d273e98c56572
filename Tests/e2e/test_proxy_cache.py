"""Scaling out behind one shared caching proxy: several courier processes,
each with a cache directory of its own, behind a real Squid (forward proxy,
``--proxy``) or a real nginx ``proxy_cache`` (reverse proxy for a known
origin). The origin must be asked once for what may be shared, and for every
client for what may not; the proxy settings and their credentials are
checked too. protocol/scaling.md describes the recipes these tests run."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

import nginx_origin
import squid_proxy
from origin import Origin, pattern
from squid_proxy import SquidProxy

CLIENTS = 8
RESOURCES = 5
SIZE = 64 * 1024
SHARED = {"Cache-Control": "max-age=300", "ETag": '"v1"'}


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def squid():
    """One Squid for the module; each test has an origin on a port of its
    own, so tests never see each other's cached responses."""
    if squid_proxy.binary() is None:
        pytest.skip("squid is not installed (scripts/setup installs it)")
    with SquidProxy() as proxy:
        yield proxy


@pytest.fixture
def clients(courier, tmp_path):
    """``clients(n, *args, env=...)``: n courier processes, each with a
    cache directory of its own (as on n machines)."""
    made = [0]

    def start(n: int, *args: str, env: dict | None = None) -> list:
        sessions = []
        for _ in range(n):
            directory = tmp_path / f"client{made[0]}"
            made[0] += 1
            directory.mkdir()
            sessions.append(courier(*args, cache=directory, env=env))
        return sessions

    return start


def fetch_everywhere(sessions: list, urls: list[str], **params) -> list[list[dict]]:
    """Every session downloads every URL, all at once; the outcomes, by session."""
    receipts = [[c.download(url, **params)["receipt"] for url in urls] for c in sessions]
    return [[c.wait_all(rs, timeout=60)[r] for r in rs] for c, rs in zip(sessions, receipts)]


def x_cache(outcome: dict) -> str:
    """Squid's verdict on the request: "HIT" or "MISS"."""
    return outcome["headers"].get("x-cache", "").split(" ", 1)[0]


def via_squid(outcome: dict) -> bool:
    return "squid" in outcome["headers"].get("via", "")


def report(capsys, text: str) -> None:
    with capsys.disabled():
        print("\n" + text)


# -- one origin fetch for N clients ---------------------------------------------------------


def test_clients_behind_squid_fetch_each_resource_from_the_origin_once(clients, origin, squid, capsys):
    bodies = {f"r{i}": pattern(SIZE, seed=f"r{i}") for i in range(RESOURCES)}
    shared = [origin.set_resource(name, body, SHARED) for name, body in bodies.items()]
    direct = [origin.set_resource(f"direct-{name}", body, SHARED) for name, body in bodies.items()]

    # Without the proxy: every client asks the origin for every resource.
    started = time.monotonic()
    outcomes = fetch_everywhere(clients(CLIENTS), direct, body="base64")
    direct_seconds = time.monotonic() - started
    assert all(o["ok"] and o["source"] == "network" for row in outcomes for o in row)
    direct_hits = sum(origin.hits(f"/res/direct-{name}") for name in bodies)
    assert direct_hits == CLIENTS * RESOURCES

    # Behind Squid: the origin is asked once a resource.
    proxied = clients(CLIENTS, "--proxy", squid.url)
    started = time.monotonic()
    outcomes = fetch_everywhere(proxied, shared, body="base64")
    proxy_seconds = time.monotonic() - started
    for row in outcomes:
        for outcome, body in zip(row, bodies.values()):
            assert outcome["ok"] and outcome["source"] == "network", outcome
            assert base64.b64decode(outcome["base64"]) == body
            assert via_squid(outcome)
    for name in bodies:
        assert origin.hits(f"/res/{name}") == 1, name
    entries = squid.wait_entries(CLIENTS * RESOURCES, prefix=origin.base_url + "/res/r")
    assert len(entries) == CLIENTS * RESOURCES
    to_origin = [e for e in entries if e.to_origin]
    assert len(to_origin) == RESOURCES, entries
    proxy_hits = sum(1 for e in entries if e.hit)
    collapsed = len(entries) - len(to_origin) - proxy_hits  # waited on the one fetch in flight
    x_hits = sum(1 for row in outcomes for o in row if x_cache(o) == "HIT")

    # Asked again, each client answers from its own cache: the proxy sees nothing.
    again = fetch_everywhere(proxied, shared)
    assert all(o["ok"] and o["source"] in ("memory", "disk") for row in again for o in row)
    assert len(squid.wait_entries(0, prefix=origin.base_url + "/res/r")) == CLIENTS * RESOURCES

    report(capsys, (
        f"squid {squid_proxy.version()}: {CLIENTS} clients x {RESOURCES} resources of {SIZE // 1024} KiB = "
        f"{CLIENTS * RESOURCES} requests; origin hits {direct_hits} without the proxy "
        f"({direct_seconds:.2f} s), {len(to_origin)} behind it ({proxy_seconds:.2f} s); "
        f"proxy hits {proxy_hits} (+{collapsed} collapsed onto the fetch in flight; X-Cache HIT {x_hits}); "
        f"repeat requests answered by the clients' own caches {CLIENTS * RESOURCES}"))


# -- what must stay private -----------------------------------------------------------------


def test_no_store_and_private_responses_are_fetched_for_every_client(clients, origin, squid):
    no_store = origin.url("/cache?no-store=1&body=no-store")
    private = origin.url("/cache?cache-control=private,%20max-age%3D300&body=private")
    sessions = clients(3, "--proxy", squid.url)
    for index, c in enumerate(sessions, start=1):
        for url in (no_store, private):
            outcome = c.fetch(url, body="text")
            assert outcome["ok"] and outcome["source"] == "network", outcome
            assert x_cache(outcome) == "MISS", outcome
        assert origin.hits(no_store[len(origin.base_url):]) == index
        assert origin.hits(private[len(origin.base_url):]) == index
    # A private response stays in the client that asked (courier is a private
    # cache); a no-store one is fetched again even there.
    assert sessions[0].fetch(private, body="text")["source"] == "memory"
    assert sessions[0].fetch(no_store, body="text")["source"] == "network"
    assert origin.hits(no_store[len(origin.base_url):]) == 4
    assert origin.hits(private[len(origin.base_url):]) == 3


def test_credentialed_requests_are_not_served_across_clients(clients, origin, squid):
    target = "/cache?max-age=300&etag=cred&body=for-one-user"
    url = origin.url(target)
    alice, bob, dave, carol, erin = clients(5, "--proxy", squid.url)
    asked = [
        (alice, url, {"Authorization": "Bearer alice-token"}, "Bearer alice-token"),
        (bob, url, {"Authorization": "Bearer bob-token"}, "Bearer bob-token"),
        (dave, url.replace("http://", "http://dave:dave-pw@"), {}, "Basic " + base64.b64encode(b"dave:dave-pw").decode()),
    ]
    for hits, (c, address, headers, authorization) in enumerate(asked, start=1):
        outcome = c.fetch(address, headers=headers, body="text")
        assert outcome["ok"] and outcome["source"] == "network", outcome
        assert x_cache(outcome) == "MISS", outcome
        assert origin.hits(target) == hits
        # The credentials reach the origin as they were given.
        assert origin.last_headers(target).get("authorization") == authorization
    # Nothing of theirs was kept: an anonymous client goes to the origin, and
    # only its (anonymous) response is shared.
    assert x_cache(carol.fetch(url, body="text")) == "MISS"
    assert origin.hits(target) == 4 and "authorization" not in origin.last_headers(target)
    assert x_cache(erin.fetch(url, body="text")) == "HIT"
    assert origin.hits(target) == 4
    entries = squid.wait_entries(5, prefix=url)
    # The URL's user:password never reaches the proxy in the request line.
    assert all("dave-pw" not in e.url for e in entries), entries
    assert [e.to_origin for e in entries] == [True, True, True, True, False], entries


def test_a_public_response_to_a_credentialed_request_is_shared(clients, origin, squid):
    """The origin decides: `public` lets a shared cache keep it (RFC 9111 §3.5)."""
    target = "/cache?cache-control=public,%20max-age%3D300&body=same-for-all"
    alice, bob = clients(2, "--proxy", squid.url)
    assert alice.fetch(origin.url(target), headers={"Authorization": "Bearer a"}, body="text")["ok"]
    outcome = bob.fetch(origin.url(target), headers={"Authorization": "Bearer b"}, body="text")
    assert outcome["ok"] and x_cache(outcome) == "HIT"
    assert origin.hits(target) == 1


def capture_request(courier_session, url: str, **params) -> bytes:
    """The bytes of the request head courier sends to a proxy, caught by a
    one-shot listener that answers 200 (no-store)."""
    caught: list[bytes] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(20)
        port = server.getsockname()[1]

        def serve():
            connection, _ = server.accept()
            with connection:
                connection.settimeout(20)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                caught.append(data)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: no-store\r\n"
                                   b"Connection: close\r\n\r\nok")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        c = courier_session(port)
        outcome = c.fetch(url, **params)
        thread.join(timeout=20)
    assert outcome["ok"], outcome
    return caught[0]


def test_what_courier_sends_to_a_proxy(courier):
    """Credentials stay in Authorization (never in the request line), proxy
    credentials go in Proxy-Authorization, and courier asks nothing of the
    proxy's cache by itself."""
    head = capture_request(lambda port: courier("--proxy", f"http://pu:proxy-pw@127.0.0.1:{port}"),
                           f"http://user:url-pw@127.0.0.1:{closed_port()}/private?x=1")
    request_line, *header_lines = head.decode().split("\r\n")
    headers = {line.split(":", 1)[0].lower(): line.split(":", 1)[1].strip() for line in header_lines if line}
    assert request_line.startswith("GET http://127.0.0.1:") and "url-pw" not in request_line
    assert request_line.endswith("/private?x=1 HTTP/1.1")
    assert headers["authorization"] == "Basic " + base64.b64encode(b"user:url-pw").decode()
    assert headers["proxy-authorization"] == "Basic " + base64.b64encode(b"pu:proxy-pw").decode()
    assert "cache-control" not in headers and "pragma" not in headers


# -- revalidation through the proxy ---------------------------------------------------------


def test_revalidation_is_answered_by_the_proxy_while_its_copy_is_fresh(clients, origin, squid):
    """Stale for courier (max-age=0), fresh for the shared cache (s-maxage,
    which courier, a private cache, ignores): courier's conditional requests
    get a 304 from Squid and the origin is asked once."""
    target = "/cache?cache-control=max-age%3D0,%20s-maxage%3D300&etag=r1&body=revalidate-me"
    url = origin.url(target)
    sessions = clients(3, "--proxy", squid.url)
    for c in sessions:
        first = c.fetch(url, body="text")
        assert first["ok"] and first["source"] == "network" and first["text"] == "revalidate-me", first
        second = c.fetch(url, body="text")
        assert second["ok"] and second["source"] == "revalidated" and second["text"] == "revalidate-me", second
    assert origin.hits(target) == 1
    entries = squid.wait_entries(6, prefix=url)
    assert [e.to_origin for e in entries] == [True] + [False] * 5, entries
    # Each client's second request was conditional and answered 304 by Squid.
    assert [e.status for e in entries[1::2]] == [304, 304, 304], entries


def test_revalidation_goes_through_the_proxy_to_the_origin(clients, origin, squid):
    """no-cache: Squid and courier both revalidate with the origin each time;
    the origin answers 304 until the resource changes."""
    url = origin.set_resource("changing", "one", {"Cache-Control": "no-cache", "ETag": '"v1"'})
    a, b = clients(2, "--proxy", squid.url)
    assert a.fetch(url, body="text")["text"] == "one"
    again = a.fetch(url, body="text")
    # The origin answers 304 to Squid. Squid 5.7, having refreshed its copy,
    # answers courier's conditional request with the whole body (200), not
    # with a 304 of its own.
    assert again["ok"] and again["text"] == "one", again
    assert again["source"] in ("revalidated", "network")
    assert origin.last_headers("/res/changing").get("if-none-match") == '"v1"'
    # b has no copy: Squid revalidates its own and serves the body.
    fresh = b.fetch(url, body="text")
    assert fresh["source"] == "network" and fresh["text"] == "one", fresh
    assert origin.hits("/res/changing") == 3
    entries = squid.wait_entries(3, prefix=url)
    assert [e.tag for e in entries[1:]] == ["TCP_REFRESH_UNMODIFIED"] * 2, entries

    origin.set_resource("changing", "two", {"Cache-Control": "no-cache", "ETag": '"v2"'})
    changed = a.fetch(url, body="text")
    assert changed["source"] == "network" and changed["text"] == "two", changed
    assert b.fetch(url, body="text")["text"] == "two"


def test_reload_is_answered_by_the_proxy_unless_the_request_says_no_cache(clients, origin, squid):
    """`cachePolicy: "reload"` bypasses courier's own caches; a fresh copy in
    the proxy still answers. `Cache-Control: no-cache` makes the proxy go to
    the origin too."""
    target = "/cache?max-age=300&etag=rl&body=reload"
    (c,) = clients(1, "--proxy", squid.url)
    assert c.fetch(origin.url(target))["ok"]
    reloaded = c.fetch(origin.url(target), cachePolicy="reload")
    assert reloaded["source"] == "network" and x_cache(reloaded) == "HIT"
    assert origin.hits(target) == 1
    end_to_end = c.fetch(origin.url(target), cachePolicy="reload", headers={"Cache-Control": "no-cache"})
    assert end_to_end["ok"] and end_to_end["source"] == "network"
    assert origin.hits(target) == 2


# -- failures -------------------------------------------------------------------------------


def failed(outcome: dict, code: str) -> dict:
    assert outcome["ok"] is False, outcome
    assert outcome["error"]["code"] == code, outcome
    return outcome["error"]


def test_a_proxy_nobody_listens_on_is_connect_failed_at_once(courier, origin):
    c = courier("--proxy", f"http://127.0.0.1:{closed_port()}")
    started = time.monotonic()
    failed(c.fetch(origin.url("/bytes/10"), transfer_timeout=30, retries=0), "connect_failed")
    assert time.monotonic() - started < 5
    assert origin.hits("/bytes/10") == 0


def test_a_proxy_that_goes_down_is_connect_failed_and_cached_copies_still_serve(clients, origin):
    if squid_proxy.binary() is None:
        pytest.skip("squid is not installed (scripts/setup installs it)")
    kept = origin.set_resource("kept", "kept", SHARED)
    with SquidProxy() as proxy:
        (c,) = clients(1, "--proxy", proxy.url)
        assert c.fetch(kept)["ok"]
        assert c.fetch(origin.url("/bytes/10?before=1"))["ok"]  # a connection to reuse
    started = time.monotonic()
    failed(c.fetch(origin.url("/bytes/10?after=1"), transfer_timeout=30, retries=0), "connect_failed")
    assert time.monotonic() - started < 5
    assert c.fetch(kept)["source"] in ("memory", "disk")


def test_an_origin_the_proxy_cannot_reach_is_its_503(courier, squid):
    c = courier("--proxy", squid.url)
    outcome = c.fetch(f"http://127.0.0.1:{closed_port()}/x", body="text", transfer_timeout=30, retries=0)
    assert failed(outcome, "http_status")["httpStatus"] == 503
    assert outcome["headers"]["x-squid-error"].startswith("ERR_CONNECT_FAIL"), outcome["headers"]


# -- HTTPS: a tunnel, not cached ------------------------------------------------------------


@pytest.fixture
def tls_origin(tls_cert):
    with Origin(tls=tls_cert) as o:
        yield o


def test_https_through_squid_is_a_tunnel_and_is_not_shared(clients, tls_origin, squid, tls_cert):
    target = "/cache?max-age=300&etag=t&body=secret-channel"
    sessions = clients(3, "--proxy", squid.url, "--ca-file", tls_cert[0])
    for c in sessions:
        outcome = c.fetch(tls_origin.url(target), body="text")
        assert outcome["ok"] and outcome["text"] == "secret-channel", outcome
        assert "x-cache" not in outcome["headers"]  # Squid never saw the response
    # Squid forwards bytes it cannot read: every client reaches the origin.
    assert tls_origin.hits(target) == 3
    for c in sessions:
        c.close()  # Squid logs a tunnel when it closes
    tunnels = squid.wait_entries(3, prefix=f"127.0.0.1:{tls_origin.port}")
    assert {(e.method, e.tag) for e in tunnels} == {("CONNECT", "TCP_TUNNEL")}, tunnels
    # The origin's certificate is verified end to end, through the tunnel.
    (untrusting,) = clients(1, "--proxy", squid.url)
    failed(untrusting.fetch(tls_origin.url("/bytes/10")), "tls_failed")


# -- proxy settings -------------------------------------------------------------------------


def test_proxy_from_the_flag_and_from_the_environment(clients, origin, tls_origin, squid, tls_cert):
    url = origin.url("/bytes/10")

    def through_squid(args: tuple = (), env: dict | None = None, address: str = url) -> bool:
        (c,) = clients(1, *args, env=env)
        outcome = c.fetch(address, cachePolicy="reload")
        assert outcome["ok"], outcome
        if address.startswith("http:"):
            return via_squid(outcome)
        before = tunnels()
        c.close()  # Squid logs a tunnel when it closes
        deadline = time.monotonic() + 1  # Squid logs a closed tunnel within milliseconds
        while tunnels() == before and time.monotonic() < deadline:
            time.sleep(0.01)
        return tunnels() > before

    def tunnels() -> int:
        return sum(1 for e in squid.entries() if e.method == "CONNECT" and e.url == f"127.0.0.1:{tls_origin.port}")

    assert through_squid(("--proxy", squid.url))
    assert through_squid(env={"http_proxy": squid.url})
    assert not through_squid(env={"http_proxy": squid.url, "no_proxy": "127.0.0.1"})
    assert not through_squid(env={"http_proxy": squid.url, "NO_PROXY": "127.0.0.1"})
    # Upper-case HTTP_PROXY is ignored (a CGI program cannot tell it from a
    # request's "Proxy:" header); HTTPS_PROXY and ALL_PROXY are honoured.
    assert not through_squid(env={"HTTP_PROXY": squid.url})
    assert through_squid(env={"all_proxy": squid.url})
    # --proxy wins over the environment, no_proxy included.
    assert through_squid(("--proxy", squid.url),
                         env={"http_proxy": f"http://127.0.0.1:{closed_port()}", "no_proxy": "127.0.0.1"})
    assert not through_squid(("--ca-file", tls_cert[0]), env={"http_proxy": squid.url},
                             address=tls_origin.url("/bytes/10"))
    assert through_squid(("--ca-file", tls_cert[0]), env={"https_proxy": squid.url},
                         address=tls_origin.url("/bytes/10"))
    assert through_squid(("--ca-file", tls_cert[0]), env={"HTTPS_PROXY": squid.url},
                         address=tls_origin.url("/bytes/10"))
    assert not through_squid(("--ca-file", tls_cert[0]), env={"https_proxy": squid.url, "no_proxy": "127.0.0.1"},
                             address=tls_origin.url("/bytes/10"))


PROXY_USER, PROXY_PASSWORD = "courier", "pr0xy-S3cret-Q7"


@pytest.fixture
def auth_squid():
    if squid_proxy.binary() is None:
        pytest.skip("squid is not installed (scripts/setup installs it)")
    with SquidProxy(credentials=(PROXY_USER, PROXY_PASSWORD)) as proxy:
        yield proxy


def assert_no_password(text: str) -> None:
    secret = base64.b64encode(f"{PROXY_USER}:{PROXY_PASSWORD}".encode()).decode()
    assert PROXY_PASSWORD not in text
    assert secret not in text


def test_proxy_credentials_are_used_but_never_echoed_or_logged(clients, origin, auth_squid):
    url = origin.url("/bytes/10")
    with_credentials = auth_squid.url_with_credentials(PROXY_USER, PROXY_PASSWORD)

    (anonymous,) = clients(1, "--proxy", auth_squid.url)
    assert failed(anonymous.fetch(url), "http_status")["httpStatus"] == 407

    (flagged,) = clients(1, "--proxy", with_credentials, "--log-level", "trace")
    result = flagged.initialize(clientInfo={"name": "test"})
    echoed = json.dumps(result)
    assert_no_password(echoed)
    assert result["config"]["proxy"] and f"127.0.0.1:{auth_squid.port}" in result["config"]["proxy"]
    outcome = flagged.fetch(url)
    assert outcome["ok"] and via_squid(outcome), outcome
    # Squid used them and did not pass them on.
    assert "proxy-authorization" not in origin.last_headers("/bytes/10")
    assert_no_password(json.dumps(outcome))

    (from_environment,) = clients(1, "--log-level", "trace", env={"http_proxy": with_credentials})
    assert_no_password(json.dumps(from_environment.initialize()))
    outcome = from_environment.fetch(url, cachePolicy="reload")
    assert outcome["ok"] and via_squid(outcome), outcome

    for c in (flagged, from_environment):
        c.shutdown()
        assert_no_password(c.stderr_text)
    assert flagged.stderr_text and from_environment.stderr_text  # trace did log


# -- the reverse-proxy recipe: nginx proxy_cache in front of a known origin -----------------

NGINX_CACHE = """
{user}
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log error;
events {{ worker_connections 1024; }}
http {{
    log_format cache '$upstream_cache_status $status $request_uri';
    access_log {root}/access.log cache;
    client_body_temp_path {root}/tmp;
    proxy_temp_path {root}/tmp;
    fastcgi_temp_path {root}/tmp;
    uwsgi_temp_path {root}/tmp;
    scgi_temp_path {root}/tmp;
    proxy_cache_path {root}/cache levels=1:2 keys_zone=origin:10m max_size=1g inactive=1d use_temp_path=off;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass {origin};
            proxy_http_version 1.1;
            proxy_cache origin;
            proxy_cache_lock on;
            proxy_cache_revalidate on;
            {private}
            add_header X-Cache-Status $upstream_cache_status always;
        }}
    }}
}}
"""

# Without these two lines nginx would keep, and serve to anyone, a response
# to a request with Authorization.
PRIVATE = "proxy_no_cache $http_authorization; proxy_cache_bypass $http_authorization;"


class NginxCache(nginx_origin.NginxProcess):
    """nginx terminating TLS on 127.0.0.1 and caching what one origin serves."""

    def __init__(self, root: Path, origin_url: str, tls: tuple[str, str], private: bool = True):
        self.root, self.origin_url, self.tls, self.private = root, origin_url, tls, private
        self.port = nginx_origin.free_port()
        self.process = None

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def start(self) -> "NginxCache":
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        (self.root / "nginx.conf").write_text(NGINX_CACHE.format(
            user="user root;" if os.geteuid() == 0 else "", root=self.root, port=self.port,
            cert=self.tls[0], key=self.tls[1], origin=self.origin_url,
            private=PRIVATE if self.private else ""))
        self.process = nginx_origin.launch(self.root, self.port)
        return self

    def log(self, count: int, prefix: str, timeout: float = 10) -> list[tuple[str, ...]]:
        """(cache status, status, URI) of the requests for ``prefix``, once
        there are ``count``."""
        path = self.root / "access.log"
        deadline = time.monotonic() + timeout
        while True:
            rows = [tuple(line.split()) for line in path.read_text().splitlines()] if path.exists() else []
            rows = [row for row in rows if row[2].startswith(prefix)]
            if len(rows) >= count or time.monotonic() > deadline:
                return rows
            time.sleep(0.01)



@pytest.fixture
def nginx_cache(tmp_path, origin, tls_cert):
    if nginx_origin.binary() is None:
        pytest.skip("nginx is not installed (scripts/setup installs it)")
    with NginxCache(tmp_path / "nginx", origin.base_url, tls_cert) as cache:
        yield cache


def test_clients_behind_an_nginx_reverse_proxy_fetch_each_resource_from_the_origin_once(
        clients, origin, nginx_cache, tls_cert, capsys):
    bodies = {f"n{i}": pattern(SIZE, seed=f"n{i}") for i in range(RESOURCES)}
    for name, body in bodies.items():
        origin.set_resource(name, body, SHARED)
    urls = [nginx_cache.url(f"/res/{name}") for name in bodies]
    sessions = clients(CLIENTS, "--ca-file", tls_cert[0])
    started = time.monotonic()
    outcomes = fetch_everywhere(sessions, urls, body="base64")
    seconds = time.monotonic() - started
    for row in outcomes:
        for outcome, body in zip(row, bodies.values()):
            assert outcome["ok"] and base64.b64decode(outcome["base64"]) == body, outcome
    for name in bodies:
        assert origin.hits(f"/res/{name}") == 1, name
    rows = nginx_cache.log(CLIENTS * RESOURCES, "/res/n")
    assert len(rows) == CLIENTS * RESOURCES
    assert sum(1 for row in rows if row[0] == "MISS") == RESOURCES, rows
    proxy_hits = sum(1 for row in rows if row[0] == "HIT")
    assert proxy_hits == CLIENTS * RESOURCES - RESOURCES, rows

    # Revalidation: stale for courier, fresh in nginx (s-maxage) → nginx's 304.
    target = "/cache?cache-control=max-age%3D0,%20s-maxage%3D300&etag=n&body=rv"
    for c in sessions[:3]:
        assert c.fetch(nginx_cache.url(target), body="text")["text"] == "rv"
        assert c.fetch(nginx_cache.url(target), body="text")["source"] == "revalidated"
    assert origin.hits(target) == 1

    # What may not be shared is not.
    for index, c in enumerate(sessions[:3], start=1):
        assert c.fetch(nginx_cache.url("/cache?no-store=1&max-age=300"))["ok"]
        assert c.fetch(nginx_cache.url("/cache?max-age=300&etag=a&who=1"),
                       headers={"Authorization": f"Bearer user-{index}"})["ok"]
        assert origin.hits("/cache?no-store=1&max-age=300") == index
        assert origin.hits("/cache?max-age=300&etag=a&who=1") == index
        assert origin.last_headers("/cache?max-age=300&etag=a&who=1")["authorization"] == f"Bearer user-{index}"

    report(capsys, (
        f"nginx {nginx_version()} proxy_cache over TLS: {CLIENTS} clients x {RESOURCES} resources = "
        f"{CLIENTS * RESOURCES} requests; origin hits {RESOURCES}; proxy hits {proxy_hits}; {seconds:.2f} s"))


def test_nginx_without_the_authorization_lines_would_share_credentialed_responses(
        clients, origin, tmp_path, tls_cert):
    """Why the recipe has `proxy_no_cache` / `proxy_cache_bypass
    $http_authorization`: nginx alone does not look at Authorization."""
    if nginx_origin.binary() is None:
        pytest.skip("nginx is not installed (scripts/setup installs it)")
    target = "/cache?max-age=300&etag=leak"
    with NginxCache(tmp_path / "unguarded", origin.base_url, tls_cert, private=False) as cache:
        alice, bob = clients(2, "--ca-file", tls_cert[0])
        assert alice.fetch(cache.url(target), headers={"Authorization": "Bearer alice"})["ok"]
        shared = bob.fetch(cache.url(target), headers={"Authorization": "Bearer bob"})
        assert shared["ok"] and shared["headers"]["x-cache-status"] == "HIT"
        assert origin.hits(target) == 1


def nginx_version() -> str:
    import subprocess
    out = subprocess.run([nginx_origin.binary(), "-v"], capture_output=True, text=True, timeout=10).stderr
    return out.strip().rsplit("/", 1)[-1]
