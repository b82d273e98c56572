"""End-to-end tests of courier's trust boundaries (protocol/security.md):
destinations stay inside --download-root, no header can be injected,
resources are told apart by their bytes, redirects keep the client's trust
boundaries, the cache never serves one resource or identity for another,
and fetched data and credentials stay private."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

import disk_tier
from courier_client import RpcError
from origin import Origin, pattern

INVALID_PARAMS = -32602


@pytest.fixture
def tls_origin(tls_cert):
    with Origin(tls=tls_cert) as o:
        yield o


@pytest.fixture
def second_origin():
    with Origin() as o:
        yield o


def failed(out: dict, code: str) -> dict:
    assert out["ok"] is False, out
    assert out["error"]["code"] == code, out
    return out["error"]


def invalid_params(c, url: str, **params) -> RpcError:
    with pytest.raises(RpcError) as raised:
        c.download(url, **params)
    assert raised.value.code == INVALID_PARAMS, raised.value
    return raised.value


def tree(path: Path) -> dict[str, bytes | str]:
    """Every entry under ``path``: file contents, or where a symlink points."""
    found: dict[str, bytes | str] = {}
    for entry in sorted(path.rglob("*")):
        relative = str(entry.relative_to(path))
        if entry.is_symlink():
            found[relative] = "-> " + os.readlink(entry)
        elif entry.is_file():
            found[relative] = entry.read_bytes()
        else:
            found[relative] = "dir"
    return found


# -- destinations ---------------------------------------------------------------------


@pytest.fixture
def jail(tmp_path):
    """A download root and, beside it, a directory outside it holding a file
    that nothing may touch."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    (outside / "sub").mkdir(parents=True)
    (outside / "victim.txt").write_bytes(b"precious")
    return root, outside


def test_destination_with_a_nul_byte_is_invalid_params(courier, origin, jail):
    root, _ = jail
    c = courier("--download-root", str(root))
    error = invalid_params(c, origin.url("/bytes/10"), destination=f"{root}/a\u0000b")
    assert error.data == {"param": "destination"}
    assert origin.total_hits() == 0 and tree(root) == {}


@pytest.mark.parametrize("layout", [
    "link/file",            # a symlinked directory in the middle
    "link/../file2",        # … with `..` after it
    "link/new/dir/file",    # … under which directories would be created
    "victim-link",          # the last component
    "a/../../outside/x",    # `..` climbing above the root
])
def test_symlinks_and_dot_dot_never_lead_outside_the_root(courier, origin, jail, layout):
    root, outside = jail
    (root / "link").symlink_to(outside / "sub")
    (root / "victim-link").symlink_to(outside / "victim.txt")
    (root / "a").mkdir()
    before_outside, before_root = tree(outside), tree(root)
    c = courier("--download-root", str(root))

    out = c.fetch(origin.url("/bytes/64"), destination=f"{root}/{layout}")

    failed(out, "destination_not_allowed")
    assert tree(outside) == before_outside
    assert tree(root) == before_root
    assert origin.total_hits() == 0


def test_a_planted_symlink_at_the_body_file_name_is_not_followed(courier, origin, jail):
    # Given symlinks at every name a body file could be predicted to take
    # beside the destination (the process id and task ids are public)
    root, outside = jail
    (root / "dir").mkdir()
    c = courier("--download-root", str(root))
    for task in range(1, 4):
        for name in (f".courier-{c.pid}-t{task}.part", f".file.courier-{c.pid}-t{task}.part"):
            (root / "dir" / name).symlink_to(outside / "victim.txt")

    # When a download streams into that directory
    out = c.fetch(origin.url("/bytes/5000"), destination=f"{root}/dir/file", body="none")

    # Then the body lands at the destination and the file outside is intact
    assert out["ok"], out
    assert (root / "dir" / "file").read_bytes() == pattern(5000)
    assert (outside / "victim.txt").read_bytes() == b"precious"


def test_the_root_is_compared_as_bytes(courier, origin, tmp_path):
    # "rootK" and "root\u212A" (KELVIN SIGN) are equal as Swift Strings.
    root = tmp_path / "rootK"
    root.mkdir()
    lookalike = tmp_path / "root\u212a"
    c = courier("--download-root", str(root))

    out = c.fetch(origin.url("/bytes/10"), destination=f"{lookalike}/f")

    failed(out, "destination_not_allowed")
    assert not lookalike.exists()


def test_missing_directories_inside_the_root_are_created(courier, origin, jail):
    root, outside = jail
    c = courier("--download-root", str(root))
    out = c.fetch(origin.url("/bytes/300"), destination=f"{root}/x/./y/../z/file")
    assert out["ok"], out
    assert (root / "x" / "z" / "file").read_bytes() == pattern(300)
    assert tree(outside) == {"sub": "dir", "victim.txt": b"precious"}


def test_a_destination_file_gets_the_usual_mode(courier, origin, tmp_path):
    c = courier()
    out = c.fetch(origin.url("/bytes/10"), destination=str(tmp_path / "out" / "f"))
    assert out["ok"], out
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "out" / "f").st_mode) == 0o666 & ~umask


# -- headers ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    "a\r\nX-Injected: 1",   # "\r\n" is one Character in Swift
    "a\nX-Injected: 1",
    "a\rX-Injected: 1",
    "a\u0000b",
    "a\u0001b",
    "\r\n\u0301",
])
def test_header_values_with_line_breaks_or_controls_are_refused(courier, origin, value):
    c = courier()
    error = invalid_params(c, origin.url("/headers"), headers={"X-Test": value})
    assert error.data == {"param": "headers"}
    error = invalid_params(c, origin.url("/headers"), accept=["text/plain", value])
    assert error.data == {"param": "accept"}
    assert origin.total_hits() == 0
    assert c.fetch(origin.url("/headers"))["ok"]


@pytest.mark.parametrize("name", ["X Test", "X:Test", "", "X\u00e9", "X\r\nY"])
def test_header_names_must_be_tokens(courier, origin, name):
    c = courier()
    error = invalid_params(c, origin.url("/headers"), headers={name: "v"})
    assert error.data == {"param": "headers"}
    assert origin.total_hits() == 0


def test_url_with_a_nul_or_a_line_break_is_invalid(courier, origin):
    c = courier()
    for url in (origin.url("/bytes/1") + "\u0000\u0301", origin.url("/bytes/1") + "\r\n", origin.url("/a b")):
        invalid_params(c, url)
    assert origin.total_hits() == 0


# -- identity ---------------------------------------------------------------------------


def test_canonically_equivalent_urls_are_two_resources(courier, origin):
    # "café" precomposed and decomposed: equal as Swift Strings, two URLs on
    # the wire (curl sends the bytes percent-encoded).
    origin.set_resource("/res/caf%c3%a9", "precomposed", {"Cache-Control": "max-age=600"})
    origin.set_resource("/res/cafe%cc%81", "decomposed", {"Cache-Control": "max-age=600"})
    c = courier()
    precomposed, decomposed = origin.base_url + "/res/caf\u00e9", origin.base_url + "/res/cafe\u0301"

    # Concurrently (not coalesced) …
    receipts = [c.download(url, body="text")["receipt"] for url in (precomposed, decomposed)]
    outcomes = c.wait_all(receipts)
    assert [outcomes[r]["text"] for r in receipts] == ["precomposed", "decomposed"]
    # … and again from the cache, each its own entry.
    assert c.fetch(decomposed, body="text")["text"] == "decomposed"
    assert c.fetch(precomposed, body="text")["text"] == "precomposed"
    assert origin.hits("/res/caf%c3%a9") == 1 and origin.hits("/res/cafe%cc%81") == 1


def test_canonically_equivalent_slots_and_views_are_distinct(courier, origin):
    c = courier()
    first = c.download(origin.url("/stall?after=10"), slot="K")
    second = c.download(origin.url("/stall?after=20"), slot="\u212a")
    # A download for one slot does not supersede the other's.
    assert second["reused"] is False
    c.wait_progress(first["task"])
    assert first["receipt"] not in c.outcomes
    c.bind("e\u0301", task=first["task"])
    c.bind("\u00e9", task=second["task"])
    # Each view hears its state right after its bind's reply.
    c.wait_until(lambda: len(c.notifications("view/animating")) >= 2, what="a view/animating per view")
    views = {n.params["view"] for n in c.notifications("view/animating")}
    assert views == {"e\u0301", "\u00e9"}
    assert c.cancel(slot="K")["cancelled"]
    assert failed(c.wait(first["receipt"]), "cancelled")
    assert second["receipt"] not in c.outcomes


# -- redirects -------------------------------------------------------------------------


def test_https_to_http_redirect_is_insecure_redirect(courier, tls_origin, origin, tls_cert):
    target = origin.url("/bytes/10")
    c = courier("--ca-file", tls_cert[0])
    out = c.fetch(tls_origin.url(f"/redirect-to?url={target}"))
    failed(out, "insecure_redirect")
    assert origin.total_hits() == 0

    allowed = courier("--ca-file", tls_cert[0], "--allow-insecure-redirects")
    out = allowed.fetch(tls_origin.url(f"/redirect-to?url={target}"), body="base64")
    assert out["ok"], out
    assert base64.b64decode(out["base64"]) == pattern(10)
    assert out["finalUrl"] == target


CREDENTIALS = {"Authorization": "Bearer s3cret", "Cookie": "session=s3cret", "Proxy-Authorization": "Basic s3cret"}


def test_credentials_do_not_follow_a_redirect_to_another_origin(courier, origin, second_origin):
    c = courier()
    target = second_origin.url("/headers")
    out = c.fetch(origin.url(f"/redirect-to?url={target}"), headers={**CREDENTIALS, "X-Other": "kept"})
    assert out["ok"], out
    seen = second_origin.last_headers("/headers")
    assert not {"authorization", "cookie", "proxy-authorization"} & set(seen), seen
    assert seen["x-other"] == "kept"
    assert origin.last_headers("/redirect-to")["authorization"] == "Bearer s3cret"


def test_credentials_follow_a_redirect_within_one_origin(courier, origin):
    c = courier()
    out = c.fetch(origin.url(f"/redirect-to?url={origin.url('/headers')}"), headers=CREDENTIALS)
    assert out["ok"], out
    seen = origin.last_headers("/headers")
    assert {k.lower(): v for k, v in CREDENTIALS.items()}.items() <= seen.items()


def test_allow_scheme_does_not_widen_redirects(courier, origin, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"local file")
    c = courier("--allow-scheme", "file")
    out = c.fetch(origin.url(f"/redirect-to?url=file://{secret}"))
    failed(out, "scheme_not_allowed")
    assert c.fetch(f"file://{secret}", body="text")["text"] == "local file"


def test_an_allowed_scheme_libcurl_does_not_know_keeps_http_working(courier, origin):
    # libcurl refuses a whole protocol list for one name it does not know,
    # whatever came before it in the list: "aaa" sorts first.
    c = courier("--allow-scheme", "aaa")
    out = c.fetch(origin.url("/bytes/5"), body="text", retries=0)
    assert out["ok"], out
    failed(c.fetch("aaa://example/", retries=0), "scheme_not_allowed")


def test_redirect_hops_are_counted_by_courier(courier, origin):
    c = courier()
    out = c.fetch(origin.url("/redirect/10"), body="text")
    assert out["ok"] and out["text"] == "redirected", out
    error = failed(c.fetch(origin.url("/redirect/11")), "too_many_redirects")
    assert error["curlCode"] == 47


# -- the cache --------------------------------------------------------------------------


def entry_files(session, cache_dir) -> list:
    """What the disk tier holds: its rows' keys and the files in ``http/``,
    once ``session``'s courier has its disk tier open (``cache/stats``
    answers only then)."""
    assert session.request("cache/stats", {})["disk"]["path"]
    with disk_tier.connect(cache_dir) as db:
        keys = [key for (key,) in db.execute("SELECT key FROM responses")]
    return keys + [p for p in (Path(cache_dir) / "http").iterdir()]


def test_a_cache_key_never_answers_a_plain_request_nor_the_reverse(courier, origin):
    c = courier()
    a = origin.url("/cache?max-age=600&body=a")
    b = origin.url("/cache?max-age=600&body=b")
    # b's response stored under the cacheKey that spells a's URL …
    assert c.fetch(b, cacheKey=a, body="text")["text"] == "b"
    # … does not answer a plain request for a,
    assert c.fetch(a, body="text")["text"] == "a"
    # and a's plain entry does not answer the cacheKey.
    assert c.fetch(b, cacheKey=a, body="text")["source"] == "memory"
    assert c.fetch(b, cacheKey=a, body="text", cachePolicy="reload")["text"] == "b"
    assert c.cache_lookup(a)["cached"] and c.cache_lookup("", cacheKey=a)["cached"]
    assert c.request("cache/lookup", {"cacheKey": b})["cached"] is False
    assert origin.hits("/cache") == 3


@pytest.mark.parametrize("how", ["header", "url"])
def test_responses_to_credentialed_requests_are_never_stored(courier, origin, cache_dir, how):
    c = courier()
    path = "/cache?max-age=600&cache-control=public,max-age=600&body=mine"
    params = {"headers": {"Authorization": "Bearer hunter2"}} if how == "header" else {}
    url = origin.url(path).replace("http://", "http://alice:hunter2@") if how == "url" else origin.url(path)
    for _ in range(2):
        out = c.fetch(url, body="text", **params)
        assert out["ok"] and out["source"] == "network", out
    assert origin.hits("/cache") == 2
    assert entry_files(c, cache_dir) == []
    for file in Path(cache_dir).rglob("*"):
        if file.is_file():
            assert b"hunter2" not in file.read_bytes(), file


def test_a_no_store_redirect_is_not_stored(courier, origin, cache_dir):
    target = origin.url("/cache?max-age=600&body=target")
    origin.set_resource("/res/moved", b"", {"Location": target, "Cache-Control": "no-store"}, status=301)
    c = courier()
    for _ in range(2):
        assert c.fetch(origin.url("/res/moved"), body="text")["text"] == "target"
    assert origin.hits("/res/moved") == 2
    assert origin.hits("/cache") == 2
    assert entry_files(c, cache_dir) == []


def test_a_temporary_redirect_is_asked_again_and_its_target_is_stored_under_its_own_url(courier, origin):
    target = origin.url("/cache?max-age=600&body=target")
    permanent_target = target + "&p=1"
    origin.set_resource("/res/temporary", b"", {"Location": target}, status=302)
    origin.set_resource("/res/permanent", b"", {"Location": permanent_target}, status=301)
    c = courier()
    for _ in range(2):
        assert c.fetch(origin.url("/res/temporary"), body="text")["text"] == "target"
        assert c.fetch(origin.url("/res/permanent"), body="text")["text"] == "target"
    # The 302 is asked every time (its target is fetched through it again);
    # the 301 and its target are answered by the cache the second time.
    assert origin.hits("/res/temporary") == 2
    assert origin.hits("/res/permanent") == 1
    assert c.cache_lookup(target)["cached"]
    assert not c.cache_lookup(origin.url("/res/temporary"))["cached"]
    assert c.cache_lookup(origin.url("/res/permanent"))["cached"]
    assert c.fetch(target, body="text")["source"] in ("memory", "disk")


def test_vary_is_honoured(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=600&vary=X-Lang")
    sources = [c.fetch(url, headers={"X-Lang": lang})["source"] for lang in ("en", "en", "fr", "fr")]
    # A stored "en" variant never answers "fr"; each key keeps its latest variant.
    assert sources[0] == "network" and sources[1] in ("memory", "disk")
    assert sources[2] == "network" and sources[3] in ("memory", "disk")
    assert c.fetch(url, headers={"X-Lang": "en"})["source"] == "network"
    assert origin.hits("/cache") == 3


def test_files_holding_fetched_data_are_private(courier, origin, cache_dir, tmp_path):
    c = courier()
    out = c.fetch(origin.url("/cache?max-age=600&body=x"), body="none")
    assert out["ok"], out
    destination = tmp_path / "given" / "y.bin"
    destination.parent.mkdir()
    large = origin.set_resource("private-large", pattern(100 * 1024, "private"), {"Cache-Control": "max-age=600"})
    given = c.fetch(large, body="none", destination=str(destination))
    assert given["ok"], given
    # A body file the cache shares with a destination has the destination's
    # mode; every other file is 0600 and every directory 0700.
    shared = {(destination.stat().st_dev, destination.stat().st_ino)}
    assert stat.S_IMODE((Path(cache_dir) / "http").stat().st_mode) == 0o700
    linked = 0
    for p in Path(cache_dir).rglob("*"):
        info = p.lstat()
        assert stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode), p
        if stat.S_ISDIR(info.st_mode):
            assert stat.S_IMODE(info.st_mode) == 0o700, (p, oct(info.st_mode))
        elif stat.S_IMODE(info.st_mode) != 0o600:
            assert (info.st_dev, info.st_ino) in shared, (p, oct(info.st_mode))
            linked += 1
    assert linked == (1 if stat.S_IMODE(destination.stat().st_mode) != 0o600 else 0)
    assert stat.S_IMODE(os.stat(out["path"]).st_mode) == 0o600


# -- logs ------------------------------------------------------------------------------


def test_logs_carry_no_credentials_and_no_forged_lines(courier, origin):
    c = courier("--log-level", "trace")
    c.initialize(clientInfo={"name": "editor\n2026-01-01T00:00:00+0000 critical courier: forged", "version": "1"})
    url = origin.url("/headers").replace("http://", "http://alice:pa55word@")
    assert c.fetch(url, headers={"Authorization": "Bearer t0ken", "Cookie": "id=c00kie"})["ok"]
    c.send_raw(b'{"jsonrpc":"2.0","id":"x","method":"download","params":{"url":"' + url.encode() + b'",\n')
    c.close()
    log = c.stderr_text
    for secret in ("pa55word", "t0ken", "c00kie"):
        assert secret not in log, log
    assert not any(line.startswith("2026-01-01T00:00:00+0000 critical") for line in log.splitlines()), log
    assert "editor\\n2026" in log
