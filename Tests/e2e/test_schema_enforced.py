"""What courier accepts is what protocol/openrpc.json says: for every method
and every param of the document, cases generated from the schema itself are
sent to the real binary.

Negative cases (each must be -32602 with `data.param` naming the param,
dotted below it, e.g. `options.maxActive`): a value of each wrong JSON type,
below `minimum` / above `maximum` (`exclusiveMinimum` / `exclusiveMaximum`
at the bound), an empty string where `minLength` is 1, a value outside an
`enum`, a string breaking a `pattern`, an element or member of the wrong
type inside an array or a map, an unknown name (of the method, and inside an
object with `additionalProperties: false`), a missing required param.

Positive cases (each must not be -32602): exactly `minimum`, exactly
`maximum`, every `enum` value, at the least length.

One session per method and top-level param; `download` positives fetch from
the local origin. `shutdown` gets negatives only, in its own session, and
`exit` (a notification, never answered) none: it takes no params.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import pytest

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "protocol" / "openrpc.json").read_text())

INVALID_PARAMS = -32602
UNKNOWN = "noSuchParam"

# One value of each JSON type; 1.5 is a number that is no integer.
SAMPLES: dict[str, Any] = {
    "null": None, "boolean": True, "integer": 7, "number": 1.5, "string": "x", "array": [], "object": {},
}

# Params whose content the document says is checked beyond its schema (a
# `url` is parsed, an `integrity` read as Subresource Integrity metadata):
# no positive case from the schema alone.
CONTENT_CHECKED = {("download", "url"), ("download", "integrity")}
# Methods whose negatives only are sent (a positive would end the session).
NEGATIVES_ONLY = {"shutdown"}
# Notifications: never answered, so nothing can be asserted about their params.
NOT_ANSWERED = {"exit"}


class Case(NamedTuple):
    params: dict
    param: str | None  # the param -32602 must name; None for a positive case
    what: str


# ---------------------------------------------------------------- the document

def resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = DOCUMENT
        for token in node["$ref"].lstrip("#").strip("/").split("/"):
            target = target[token.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def methods() -> dict[str, dict]:
    return {resolve(m)["name"]: resolve(m) for m in DOCUMENT["methods"]}


def descriptors(method: dict) -> list[dict]:
    return [resolve(p) for p in method.get("params", [])]


def types_of(schema: dict) -> list[str]:
    kind = schema.get("type")
    return [kind] if isinstance(kind, str) else list(kind or [])


def matches_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"string": str, "array": list, "object": dict}[kind] == type(value)


def valid_value(schema: dict, name: str, context: dict) -> Any:
    """A value the schema accepts, for the params around the one under test."""
    schema = resolve(schema)
    if name in context:
        return context[name]
    if "enum" in schema:
        return schema["enum"][0]
    kind = types_of(schema)[0] if types_of(schema) else "string"
    if kind == "object":
        return {key: valid_value(sub, key, {}) for key, sub in schema.get("properties", {}).items()
                if key in schema.get("required", [])}
    if kind in ("integer", "number"):
        return schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
    return {"string": "x", "boolean": True, "array": [], "null": None}[kind]


def breaking_string(pattern: str) -> str | None:
    for candidate in ("a\r\nb", "a:b", "a\nb", "", " ", "\x00"):
        if not re.search(pattern, candidate):
            return candidate
    return None


# ---------------------------------------------------------------- generating cases

def value_cases(schema: dict, path: str) -> Iterator[tuple[Any, str | None, str]]:
    """(value, param named by the refusal or None, what) for one schema."""
    schema = resolve(schema)
    kinds = types_of(schema)
    if kinds:
        for kind, sample in SAMPLES.items():
            if not any(matches_type(sample, k) for k in kinds):
                yield sample, path, f"{path}: a {kind} ({sample!r})"
    numeric = "integer" in kinds or "number" in kinds
    step = 1 if "number" not in kinds else None
    if numeric and "minimum" in schema:
        low = schema["minimum"]
        yield low - (step or (low / 2 if low > 0 else 0.5)), path, f"{path}: below minimum {low}"
        yield low, None, f"{path}: exactly minimum {low}"
    if numeric and "maximum" in schema:
        high = schema["maximum"]
        yield high + (step or 0.5), path, f"{path}: above maximum {high}"
        yield high, None, f"{path}: exactly maximum {high}"
    if numeric and "exclusiveMinimum" in schema:
        yield schema["exclusiveMinimum"], path, f"{path}: at exclusiveMinimum"
    if numeric and "exclusiveMaximum" in schema:
        yield schema["exclusiveMaximum"], path, f"{path}: at exclusiveMaximum"
    if "string" in kinds and schema.get("minLength", 0) >= 1:
        least = schema["minLength"]
        yield "", path, f"{path}: empty, minLength {least}"
        yield "x" * least, None, f"{path}: exactly minLength {least}"
    if "string" in kinds and "pattern" in schema and (broken := breaking_string(schema["pattern"])) is not None:
        yield broken, path, f"{path}: breaks pattern {schema['pattern']}"
    if "enum" in schema:
        outside = False if schema["enum"] == [True] else "no-such-value"
        yield outside, path, f"{path}: {outside!r} outside the enum"
        for value in schema["enum"]:
            yield value, None, f"{path}: enum value {value!r}"
    if "array" in kinds and "items" in schema:
        for element, param, what in value_cases(schema["items"], path):
            if param is not None:
                yield [element], path, f"{path}: element {what.split(': ', 1)[1]}"
    if "object" in kinds:
        yield from object_cases(schema, path)


def object_cases(schema: dict, path: str) -> Iterator[tuple[Any, str | None, str]]:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    base = {name: valid_value(properties[name], name, {}) for name in required}
    for name, sub in properties.items():
        for value, param, what in value_cases(sub, f"{path}.{name}"):
            yield {**base, name: value}, param, what
    for name in required:
        yield {k: v for k, v in base.items() if k != name}, f"{path}.{name}", f"{path}.{name}: missing"
    if schema.get("additionalProperties") is False:
        yield {**base, UNKNOWN: 1}, f"{path}.{UNKNOWN}", f"{path}: unknown name"
    elif isinstance(schema.get("additionalProperties"), dict):
        for value, param, what in value_cases(schema["additionalProperties"], path):
            if param is not None:
                yield {**base, "X-Member": value}, path, f"{path}: member {what.split(': ', 1)[1]}"
    names = schema.get("propertyNames", {})
    if "pattern" in names and (broken := breaking_string(names["pattern"])) is not None:
        yield {**base, broken: "v"}, path, f"{path}: member name breaking {names['pattern']}"


def startup_only(method: str, path: str) -> bool:
    """A start-up setting takes only its current value: no positive case."""
    options = resolve({"$ref": "#/components/schemas/ConfigOptions"})
    parts = path.split(".")
    return method == "initialize" and len(parts) > 1 and parts[0] == "options" \
        and parts[1] in options.get("x-startupOnly", [])


def cases(method_name: str, group: str, context: dict) -> list[Case]:
    """Every case of one method for one top-level param (`group`), or for
    the method's names (`group` "(names)")."""
    method = methods()[method_name]
    params = {p["name"]: p for p in descriptors(method)}
    base = {name: valid_value(p["schema"], name, context) for name, p in params.items() if p.get("required")}
    base.update({name: context[name] for name in CONTEXT_KEEP.get(method_name, ()) if name in context})
    found: list[Case] = []
    if group == "(names)":
        found.append(Case({**base, UNKNOWN: 1}, UNKNOWN, f"unknown param {UNKNOWN}"))
        for name, p in params.items():
            if p.get("required"):
                found.append(Case({k: v for k, v in base.items() if k != name}, name, f"{name}: missing"))
        if not params:
            found.append(Case({}, None, "no params"))
    else:
        for value, param, what in value_cases(params[group]["schema"], group):
            if param is None and (method_name in NEGATIVES_ONLY or (method_name, group) in CONTENT_CHECKED
                                  or startup_only(method_name, what.split(":")[0])):
                continue
            found.append(Case({**base, group: value}, param, what))
    if method_name in NEGATIVES_ONLY:
        found = [c for c in found if c.param is not None]
    return found


# Params kept around the one under test, so that the rules between params
# (exactly one of `task` or `receipt`) hold for positive cases.
CONTEXT_KEEP = {"bind": ("task",)}


def groups() -> list[tuple[str, str]]:
    found = []
    for name, method in methods().items():
        if name in NOT_ANSWERED:
            continue
        found.append((name, "(names)"))
        found += [(name, p["name"]) for p in descriptors(method)]
    return found


# ---------------------------------------------------------------- sending them

def context_for(method: str, group: str, origin) -> dict:
    """Valid values for the params around the one under test (`origin`
    None: only to count cases)."""
    context: dict[str, Any] = {}
    url = origin.url("/bytes/16") if origin else "http://127.0.0.1:9/"
    if method in ("download", "cache/lookup", "cache/remove"):
        context["url"] = url
    if method == "bind":
        context["view"] = "v"
        if group not in ("task", "receipt"):
            context["task"] = None
    return context


def run_cases(courier, method: str, found: list[Case]) -> None:
    c = courier()
    sent = [(c.send_request(method, copy.deepcopy(case.params)), case) for case in found]
    wrong = []
    for id, case in sent:
        response = c.wait_response(id, timeout=20)
        error = response.get("error")
        if case.param is None:
            if error and error["code"] == INVALID_PARAMS:
                wrong.append(f"{case.what}: refused {case.params} with {error}")
        elif not error or error["code"] != INVALID_PARAMS:
            wrong.append(f"{case.what}: {case.params} got {response.get('error') or 'a result'}, not -32602")
        elif (error.get("data") or {}).get("param") != case.param:
            wrong.append(f"{case.what}: data {error.get('data')} does not name {case.param!r}")
    assert not wrong, f"{len(wrong)} of {len(found)} cases:\n" + "\n".join(wrong)


@pytest.mark.parametrize("method,group", groups(), ids=[f"{m}-{g}" for m, g in groups()])
def test_generated_cases(courier, origin, method, group):
    found = cases(method, group, context_for(method, group, origin))
    assert found, f"no case for {method} {group}"
    run_cases(courier, method, found)


def test_positional_params_are_refused_for_every_method(courier):
    c = courier()
    for name in methods():
        if name in NOT_ANSWERED:
            continue
        response = c.wait_response(c.send_request(name, [1]))
        assert response.get("error", {}).get("code") == INVALID_PARAMS, (name, response)


def test_every_param_of_the_document_has_cases(origin):
    """The generator reaches every param: a param without a case would be
    one whose schema says nothing checkable."""
    total = {"negative": 0, "positive": 0}
    for method, group in groups():
        found = cases(method, group, context_for(method, group, origin))
        assert found, (method, group)
        for case in found:
            total["positive" if case.param is None else "negative"] += 1
    assert total["negative"] >= 200 and total["positive"] >= 50, total


# ---------------------------------------------------------------- the disagreements, one by one

def test_cancel_all_takes_only_true(courier):
    c = courier()
    response = c.wait_response(c.send_request("cancel", {"all": False}))
    assert response["error"]["code"] == INVALID_PARAMS
    assert response["error"]["data"] == {"param": "all"}
    assert c.request("cancel", {"all": True}) == {"cancelled": False, "count": 0}


def test_cache_lookup_and_remove_take_a_cache_key_alone(courier, origin):
    c = courier()
    url = origin.url("/cache?max-age=600&etag=k1")
    outcome = c.fetch(url, cacheKey="the-key")
    assert outcome["ok"], outcome
    found = c.request("cache/lookup", {"cacheKey": "the-key"})
    assert found["cached"] is True and found["fresh"] is True
    assert c.request("cache/lookup", {"url": "http://elsewhere.invalid/", "cacheKey": "the-key"})["cached"] is True
    assert c.request("cache/remove", {"cacheKey": "the-key"}) == {"removed": True}
    for method in ("cache/lookup", "cache/remove"):
        response = c.wait_response(c.send_request(method, {}))
        assert response["error"]["code"] == INVALID_PARAMS and response["error"]["data"] == {"param": "url"}


def test_expires_is_when_freshness_ends(courier, origin):
    import calendar
    import time
    c = courier()
    fresh = origin.url("/cache?max-age=600&etag=e1")
    assert c.fetch(fresh)["ok"]
    before = time.time()
    found = c.request("cache/lookup", {"url": fresh})
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", found["expires"]), found
    expires = calendar.timegm(time.strptime(found["expires"], "%Y-%m-%dT%H:%M:%SZ"))
    assert before + 590 <= expires <= before + 610, (found, before)
    # No freshness lifetime: stale at once, and `expires` is already past.
    stale = origin.url("/cache?max-age=0&etag=e2")
    assert c.fetch(stale)["ok"]
    found = c.request("cache/lookup", {"url": stale})
    assert found["fresh"] is False
    assert calendar.timegm(time.strptime(found["expires"], "%Y-%m-%dT%H:%M:%SZ")) <= time.time() + 1


@pytest.mark.parametrize("timeout,refused", [(0.0009, True), (0.001, False), (31536000, False), (31536001, True)])
def test_timeout_range_is_the_documented_one(courier, origin, timeout, refused):
    c = courier()
    for method, params in (("download", {"url": origin.url("/bytes/1"), "timeout": timeout}),
                           ("initialize", {"options": {"timeout": timeout, "connectTimeout": timeout}})):
        response = c.wait_response(c.send_request(method, params))
        assert ("error" in response) == refused, (method, response)


def test_startup_only_options_are_listed_and_take_only_their_value(courier):
    options = resolve({"$ref": "#/components/schemas/ConfigOptions"})
    c = courier()
    config = c.request("initialize", {})["config"]
    for name in options["x-startupOnly"]:
        assert c.request("initialize", {"options": {name: config[name]}})["config"][name] == config[name]
    response = c.wait_response(c.send_request("initialize", {"options": {"cacheDir": "/elsewhere"}}))
    assert response["error"]["data"] == {"param": "options.cacheDir"}


def test_shutdown_answers_once_every_stored_response_is_on_disk(courier, origin, cache_dir):
    """What `shutdown` "flushes": the response comes after every receipt has
    ended, and every response stored is then in the cache directory for the
    next courier."""
    c = courier()
    urls = [origin.url(f"/cache?max-age=600&etag=s{i}&size=2000") for i in range(20)]
    receipts = [c.download(url)["receipt"] for url in urls]
    # One has been stored before shutdown; the others may still be on their way
    assert c.wait(receipts[0])["ok"]
    assert c.request("shutdown") is None
    ended = {r: c.finished(r) for r in receipts}
    assert all(len(o) == 1 for o in ended.values()), ended
    c.exit()
    assert c.wait_exit(10) == 0
    stored = [url for r, url in zip(receipts, urls) if ended[r][0]["outcome"]["ok"]]
    assert stored
    later = courier()
    for url in stored:
        assert later.fetch(url, cachePolicy="cacheOnly")["ok"], url


def test_bad_client_info_changes_nothing(courier):
    c = courier()
    before = c.request("initialize", {})["config"]["maxActive"]
    response = c.wait_response(c.send_request("initialize", {"clientInfo": {"version": "1"},
                                                             "options": {"maxActive": before + 1}}))
    assert response["error"]["data"] == {"param": "clientInfo.name"}
    assert c.request("initialize", {})["config"]["maxActive"] == before


def test_initialize_log_level_takes_effect(courier):
    c = courier("--log-level", "info")
    c.request("initialize", {"options": {"logLevel": "debug"}})
    c.request("shutdown")
    c.exit()
    c.wait_exit(10)
    assert "shut down" in c.stderr_text, c.stderr_text


def test_wait_with_a_reused_slot_carries_the_outcome(courier, origin):
    c = courier()
    url = origin.url("/drip?numbytes=4&duration=0.6")
    first = c.download(url, slot="s")["receipt"]
    second = c.download(url, slot="s", wait=True, rpc_timeout=20)
    assert second["receipt"] == first and second["reused"] is True
    assert second["outcome"]["ok"] is True, second


# ---------------------------------------------------------------- --ca-file adds CAs

def _self_signed(directory: Path, name: str) -> tuple[str, str]:
    import subprocess
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def test_ca_file_adds_to_the_system_store(courier, tmp_path):
    """Origin A's CA is given with --ca-file; origin B's is in the system's
    hashed directory (here a temporary one, through $SSL_CERT_DIR). Both
    verify: the file did not replace the system's CAs."""
    import subprocess
    from origin import Origin
    a = _self_signed(tmp_path, "origin-a")
    b = _self_signed(tmp_path, "origin-b")
    system = tmp_path / "system-certs"
    system.mkdir()
    (system / "b.pem").write_text(Path(b[0]).read_text())
    subprocess.run(["openssl", "rehash", str(system)], check=True, capture_output=True, timeout=30)
    assert any(re.fullmatch(r"[0-9a-f]{8}\.\d", p.name) for p in system.iterdir())
    with Origin(tls=a) as origin_a, Origin(tls=b) as origin_b:
        c = courier("--ca-file", a[0], env={"SSL_CERT_DIR": str(system)})
        assert c.fetch(origin_a.url("/bytes/10"))["ok"]
        out = c.fetch(origin_b.url("/bytes/10"))
        assert out["ok"], out
        # B alone is not trusted by the file: without the system directory it fails.
        bare = courier("--ca-file", a[0], env={"SSL_CERT_DIR": str(tmp_path / "empty")})
        assert bare.fetch(origin_b.url("/bytes/10"))["error"]["code"] == "tls_failed"
