"""The protocol reference (protocol/openrpc.json) is well formed, agrees with
the product contract (DESIGN.md), and its examples match its own schemas."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema  # noqa: E402

DESIGN_PATH = (Path(__file__).resolve().parent / "../../../shared/DESIGN.md").resolve()

METHODS = [
    "initialize", "shutdown", "exit", "rpc.discover",
    "download", "cancel", "suspend", "resume", "progress", "bind",
    "cache/stats", "cache/lookup", "cache/remove", "cache/clear",
    "indicator/configure", "indicator/state", "indicator/increment", "indicator/decrement",
]
NOTIFICATIONS = ["download/progress", "download/retrying", "download/finished", "indicator/visibility", "view/animating",
                 "view/progress"]
OUTCOME_ERROR_CODES = [
    "cancelled", "shutdown", "http_status", "unacceptable_content_type", "too_large", "timeout",
    "dns_failed", "connect_failed", "tls_failed", "too_many_redirects", "scheme_not_allowed",
    "insecure_redirect", "not_cached", "destination_not_allowed", "io", "integrity_mismatch", "network",
]


def schemas():
    return schema.document()["components"]["schemas"]


def enum_of(name):
    return schemas()[name]["enum"]


def all_refs(node, path="#"):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield path, value
            else:
                yield from all_refs(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from all_refs(value, f"{path}/{i}")


def all_schemas():
    """(where, schema) for every schema of the document."""
    doc = schema.document()
    for name, s in doc["components"]["schemas"].items():
        yield f"components.schemas.{name}", s
    for name, cd in doc["components"].get("contentDescriptors", {}).items():
        yield f"components.contentDescriptors.{name}", cd["schema"]
    entries = [("method", m) for m in schema.methods().values()]
    entries += [("notification", n) for n in schema.notifications().values()]
    for kind, entry in entries:
        for p in entry.get("params", []):
            if "$ref" not in p:
                yield f"{kind} {entry['name']} param {p['name']}", p["schema"]
        if "result" in entry:
            yield f"{kind} {entry['name']} result", schema.deref(entry["result"])["schema"]


# ---------------------------------------------------------------- shape

def test_document_header():
    doc = schema.document()
    assert doc["openrpc"] == "1.3.2"
    assert doc["info"]["title"] == "courier"
    assert re.fullmatch(r"\d+\.\d+\.\d+", doc["info"]["version"])
    assert doc["info"].get("description")


def test_every_method_is_complete():
    names = [schema.deref(m)["name"] for m in schema.document()["methods"]]
    assert len(names) == len(set(names)), "method names must be unique"
    for name, m in schema.methods().items():
        assert m.get("summary") and m.get("description"), name
        assert m.get("paramStructure") == "by-name", name
        assert isinstance(m.get("params"), list), name
        assert m.get("x-status") in ("implemented", "planned"), name
        params = schema.params_of(m)
        assert len({p["name"] for p in params}) == len(params), f"{name}: duplicate param names"
        for p in params:
            assert p.get("name") and "schema" in p, f"{name}: param without name or schema"
        if m.get("x-notification"):
            assert "result" not in m, f"{name} is a notification and has no result"
        else:
            result = schema.deref(m.get("result"))
            assert result and result.get("name") and "schema" in result, f"{name} lacks a result"
        for e in m.get("errors", []):
            e = schema.deref(e)
            assert isinstance(e["code"], int) and isinstance(e["message"], str), name


def test_every_notification_is_complete():
    names = [n["name"] for n in schema.document()["x-notifications"]]
    assert len(names) == len(set(names)), "notification names must be unique"
    for name, n in schema.notifications().items():
        assert n.get("summary") and n.get("description"), name
        assert n.get("paramStructure") == "by-name", name
        assert n.get("x-status") in ("implemented", "planned"), name
        for p in schema.params_of(n):
            assert p.get("name") and "schema" in p, name


def test_names_are_exactly_the_contract():
    assert sorted(schema.methods()) == sorted(METHODS)
    assert sorted(schema.notifications()) == sorted(NOTIFICATIONS)
    assert schema.methods()["exit"].get("x-notification") is True


def test_lifecycle_methods_are_implemented():
    assert {"initialize", "shutdown", "exit", "rpc.discover"} <= schema.implemented_methods()


def test_every_ref_resolves():
    refs = list(all_refs(schema.document()))
    assert refs
    for where, target in refs:
        assert target.startswith("#/"), f"{where}: only local references are used, got {target}"
        schema.resolve_pointer(target)


@pytest.mark.parametrize("validator", [jsonschema.Draft202012Validator, jsonschema.Draft7Validator])
def test_every_schema_is_valid_json_schema(validator):
    for where, s in all_schemas():
        try:
            validator.check_schema(s)
        except jsonschema.SchemaError as e:
            raise AssertionError(f"{where}: {e.message}") from e


def test_results_allow_later_fields():
    for name, s in schemas().items():
        if s.get("type") == "object" and name not in ("ConfigOptions", "RequestHeaders", "ResponseHeaders"):
            assert s.get("additionalProperties") is True, f"{name} must keep additionalProperties true"


def test_error_components():
    codes = schema.error_codes()
    assert set(codes) == {-32700, -32600, -32601, -32602, -32603, -32001, -32002}
    assert codes[-32001] == "UnknownReceipt"
    assert codes[-32002] == "BatchTooLarge"


# ---------------------------------------------------------------- against DESIGN.md

@pytest.fixture(scope="module")
def design():
    if not DESIGN_PATH.exists():
        pytest.skip(f"{DESIGN_PATH} not found")
    return DESIGN_PATH.read_text(encoding="utf-8")


def quoted_after(text, marker):
    """The `"word"` values from `marker` to the end of its table row or paragraph."""
    start = text.find(marker)
    assert start >= 0, f"DESIGN.md has no {marker!r}"
    rest = text[start + len(marker):]
    end = min(i for i in (rest.find("\n|"), rest.find("\n\n"), rest.find("\n- "), len(rest)) if i >= 0)
    return list(dict.fromkeys(re.findall(r'`"([A-Za-z0-9_]+)"`', rest[:end])))


def test_design_names_are_all_documented(design):
    code_spans = re.findall(r"`([^`]+)`", design)
    # Every slash-named method or notification in DESIGN.md is in the document …
    slash_names = {m.group(1) for span in code_spans if (m := re.match(r"([a-z]+/[a-z]+)(?:\s|$)", span))}
    assert slash_names <= set(METHODS) | set(NOTIFICATIONS), slash_names - set(METHODS) - set(NOTIFICATIONS)
    # … and every name of the document appears in DESIGN.md.
    for name in METHODS + NOTIFICATIONS:
        assert any(span == name or span.startswith(name + " ") for span in code_spans), f"{name} not in DESIGN.md"


def test_outcome_error_codes_match_design(design):
    start = design.index("with `code` one of") + len("with `code` one of")
    paragraph = design[start:design.index("(any other failure)", start)]
    design_codes = re.findall(r"`([a-z_]+)`", paragraph)
    assert design_codes == OUTCOME_ERROR_CODES
    assert enum_of("OutcomeErrorCode") == design_codes
    assert schemas()["OutcomeError"]["properties"]["code"] == {"$ref": "#/components/schemas/OutcomeErrorCode"}


def test_enums_match_design(design):
    assert enum_of("Priority") == quoted_after(design, "| `priority` |")
    assert enum_of("CachePolicy") == quoted_after(design, "| `cachePolicy` |")
    assert enum_of("Body") == quoted_after(design, "| `body` |")
    assert enum_of("OutcomeSource") == quoted_after(design, "- `source`:")
    assert enum_of("BindingKind") == quoted_after(design, "with `kind`")
    assert enum_of("DownloadState") == quoted_after(design, "where `state`\nis")
    states = re.findall(r"`(notActive|delayingStart|active|delayingEnd)`", design)
    assert enum_of("IndicatorStateName") == list(dict.fromkeys(states))
    assert enum_of("TaskState") == enum_of("DownloadState")[:2] + ["suspended", "retrying", "finished"]


# ---------------------------------------------------------------- examples and helpers

def test_examples_validate():
    count = 0
    for name, m in schema.methods().items():
        declared = {p["name"]: p for p in schema.params_of(m)}
        for pairing in m.get("examples", []):
            pairing = schema.deref(pairing)
            params = {}
            for example in pairing["params"]:
                example = schema.deref(example)
                assert example["name"] in declared, f"{name} example {pairing['name']!r}: unknown param {example['name']}"
                params[example["name"]] = example["value"]
            schema.validate_params(name, params)
            if "result" in pairing:
                schema.validate_result(name, schema.deref(pairing["result"])["value"])
            count += 1
    assert count >= 5
    for name in ("initialize", "download", "cancel"):
        assert schema.methods()[name].get("examples"), f"{name} has no example"


def test_validate_message_accepts_good_messages():
    init_result = schema.methods()["initialize"]["examples"][0]["result"]["value"]
    assert schema.validate_message({"jsonrpc": "2.0", "id": 1, "result": init_result}, "initialize") == "result"
    assert schema.validate_message({"jsonrpc": "2.0", "id": "a", "result": None}, "shutdown") == "result"
    assert schema.validate_message(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request", "data": {"limit": 16777216}}}
    ) == "error"
    assert schema.validate_message({"jsonrpc": "2.0", "method": "download/progress", "params": {
        "task": "t1", "receipts": ["r1", "r2"], "received": 10, "expected": None, "fraction": None, "bytesPerSecond": 0}}) == "notification"
    assert schema.validate_message({"jsonrpc": "2.0", "method": "download/finished", "params": {
        "receipt": "r1", "task": "t1", "outcome": {"ok": False, "url": "http://127.0.0.1:1/", "source": "network",
                                                   "size": 0, "durationMs": 3.5, "status": None,
                                                   "error": {"code": "connect_failed", "message": "refused", "curlCode": 7}}}}) == "notification"
    batch = [{"jsonrpc": "2.0", "id": 1, "result": None}, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found"}}]
    assert schema.validate_message(batch, {1: "shutdown", 2: "nope"}) == "batch"


@pytest.mark.parametrize("msg, method, complaint", [
    ({"jsonrpc": "2.0", "id": 1, "result": {"receipt": "r1", "task": "t1", "state": "done", "reused": False}}, "download", "state"),
    ({"jsonrpc": "2.0", "id": 1, "result": {"cancelled": True}}, "cancel", "count"),
    ({"jsonrpc": "2.0", "id": 1, "result": {}}, "no/such", "not in"),
    ({"jsonrpc": "2.0", "id": 1}, None, "exactly one"),
    ({"jsonrpc": "1.0", "id": 1, "result": None}, None, "jsonrpc"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}, None, "integer"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32099, "message": "m"}}, None, "not documented"),
    ({"jsonrpc": "2.0", "method": "view/animating", "params": {"view": "v"}}, None, "animating"),
    ({"jsonrpc": "2.0", "method": "indicator/visibility", "params": [True, 1]}, None, "by-name"),
    ({"jsonrpc": "2.0", "method": "download/finished", "params": {"receipt": "r1", "task": "t1", "outcome": {
        "ok": True, "url": "u", "source": "network", "size": 1, "durationMs": 1, "headers": {"Content-Type": "x"}}}}, None, "headers"),
    ({"jsonrpc": "2.0", "method": "nope", "params": {}}, None, "nope"),
])
def test_validate_message_rejects_bad_messages(msg, method, complaint):
    with pytest.raises(AssertionError, match=re.escape(complaint)):
        schema.validate_message(msg, method)


# ---------------------------------------------------------------- README.md

README_PATH = schema.DOCUMENT_PATH.parent / "README.md"


def readme_statuses(heading):
    text = README_PATH.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    section = section[:section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    rows = re.findall(r"^\| `([^`]+)`[^\n]*\| (implemented|planned) \|$", section, re.M)
    return dict(rows)


def test_readme_tables_match_the_document():
    methods = readme_statuses("## Methods")
    notifications = readme_statuses("## Notifications")
    assert methods == {name: m["x-status"] for name, m in schema.methods().items()}
    assert notifications == {name: n["x-status"] for name, n in schema.notifications().items()}


def test_readme_lsp_examples_have_exact_lengths():
    text = README_PATH.read_text(encoding="utf-8")
    pairs = re.findall(r"Content-Length: (\d+)\n\n  (\{[^\n]*\})\n", text)
    assert len(pairs) >= 5
    for length, body in pairs:
        assert int(length) == len(body.encode("utf-8")), body


def test_the_checks_document_is_made_from_the_protocol_document():
    """courier checks params against Resources/openrpc-checks.json, which
    scripts/openrpc_checks.py derives from protocol/openrpc.json."""
    scripts = Path(__file__).resolve().parents[2] / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        import openrpc_checks
    finally:
        sys.path.remove(str(scripts))
    assert openrpc_checks.main(["--check"]) == 0, "run scripts/openrpc_checks.py"
    compact = openrpc_checks.checks(schema.document())
    # Nothing a check reads is left out: every method's params and every schema
    assert [m["name"] for m in compact["methods"]] == [m["name"] for m in schema.document()["methods"]]
    assert set(compact["components"]["schemas"]) == set(schema.document()["components"]["schemas"])
    # and it is a small part of the document's bytes
    assert len(openrpc_checks.CHECKS.read_bytes()) < len(openrpc_checks.DOCUMENT.read_bytes()) / 3
