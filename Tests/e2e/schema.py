"""Validation of courier's messages against protocol/openrpc.json.

Results, notifications and errors are checked against the schemas of the
OpenRPC document, with its "$ref"s resolved inside the document. Every check
raises AssertionError with a message naming what is wrong.

    from schema import validate_message
    validate_message(response, request_method="download")
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

DOCUMENT_PATH = (Path(__file__).resolve().parent / "../../protocol/openrpc.json").resolve()
DOCUMENT_URI = "urn:courier:openrpc"

# JSON-RPC 2.0's reserved codes; application codes are in components.errors.
STANDARD_ERROR_CODES = {-32700, -32600, -32601, -32602, -32603}


# ---------------------------------------------------------------- the document

@functools.lru_cache(maxsize=None)
def document() -> dict:
    """The OpenRPC document, parsed once."""
    with DOCUMENT_PATH.open(encoding="utf-8") as f:
        return json.load(f)


@functools.lru_cache(maxsize=None)
def registry() -> Registry:
    """A registry holding the whole document, so "#/components/..." resolves."""
    resource = Resource.from_contents(document(), default_specification=DRAFT202012)
    return Registry().with_resource(DOCUMENT_URI, resource)


def resolve_pointer(pointer: str) -> Any:
    """The value at a local reference such as "#/components/schemas/Outcome"."""
    if not pointer.startswith("#"):
        raise AssertionError(f"not a local reference: {pointer!r}")
    value: Any = document()
    for token in filter(None, pointer[1:].split("/")):
        token = token.replace("~1", "/").replace("~0", "~")
        try:
            value = value[int(token)] if isinstance(value, list) else value[token]
        except (KeyError, IndexError, ValueError) as e:
            raise AssertionError(f"reference {pointer!r} does not resolve (at {token!r})") from e
    return value


def deref(obj: Any) -> Any:
    """Follows a Reference Object ({"$ref": ...}) until it reaches a value."""
    seen = set()
    while isinstance(obj, dict) and set(obj) == {"$ref"}:
        target = obj["$ref"]
        if target in seen:
            raise AssertionError(f"reference cycle at {target!r}")
        seen.add(target)
        obj = resolve_pointer(target)
    return obj


def methods() -> dict[str, dict]:
    """Client→server methods by name (requests and the `exit` notification)."""
    return {deref(m)["name"]: deref(m) for m in document()["methods"]}


def notifications() -> dict[str, dict]:
    """Server→client notifications by name, from `x-notifications`."""
    return {n["name"]: n for n in document().get("x-notifications", [])}


def implemented_methods() -> set[str]:
    """Names of the methods whose `x-status` is "implemented"."""
    return {name for name, m in methods().items() if m.get("x-status") == "implemented"}


def implemented_notifications() -> set[str]:
    """Names of the notifications whose `x-status` is "implemented"."""
    return {name for name, n in notifications().items() if n.get("x-status") == "implemented"}


def error_codes() -> dict[int, str]:
    """Every documented JSON-RPC error code → the name it has in components.errors."""
    return {e["code"]: name for name, e in document()["components"]["errors"].items()}


def params_of(entry: Mapping) -> list[dict]:
    """The content descriptors of a method's or notification's params, dereferenced."""
    return [deref(p) for p in entry.get("params", [])]


# ---------------------------------------------------------------- schema checks

def _location(obj: Any) -> str:
    """The JSON pointer of an object inside the document (found by identity)."""

    def walk(node: Any, path: str) -> str | None:
        if node is obj:
            return path
        if isinstance(node, dict):
            items: Iterable = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            return None
        for key, child in items:
            if isinstance(child, (dict, list)):
                token = str(key).replace("~", "~0").replace("/", "~1")
                found = walk(child, f"{path}/{token}")
                if found is not None:
                    return found
        return None

    found = walk(document(), "#")
    if found is None:
        raise AssertionError("schema is not part of the OpenRPC document")
    return found


@functools.lru_cache(maxsize=None)
def _validator(pointer: str) -> jsonschema.protocols.Validator:
    schema = {"$ref": DOCUMENT_URI + pointer}
    return jsonschema.Draft202012Validator(schema, registry=registry())


def validator_for(schema: Mapping) -> jsonschema.protocols.Validator:
    """A validator for a schema that lives in the document ("$ref"s resolve)."""
    return _validator(_location(schema))


def check(instance: Any, schema: Mapping, what: str) -> None:
    """Validates `instance` against a schema of the document."""
    errors = sorted(validator_for(schema).iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for e in errors[:10]:
            where = "/".join(str(p) for p in e.absolute_path) or "(top)"
            lines.append(f"  at {where}: {e.message}")
            for sub in sorted(e.context, key=lambda c: (list(c.relative_schema_path), c.message))[:6]:
                branch = sub.relative_schema_path[0] if sub.relative_schema_path else "?"
                subwhere = "/".join(str(p) for p in sub.absolute_path) or "(top)"
                lines.append(f"    alternative {branch}, at {subwhere}: {sub.message}")
        more = f"\n  … and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise AssertionError(
            f"{what} does not match protocol/openrpc.json:\n" + "\n".join(lines) + more
            + f"\n  value: {json.dumps(instance, ensure_ascii=False)[:2000]}"
        )


def _check_by_name(entry: Mapping, params: Any, what: str, allow_extra: bool) -> None:
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise AssertionError(f"{what}: params must be an object (by-name), got {json.dumps(params)[:200]}")
    descriptors = params_of(entry)
    declared = {d["name"]: d for d in descriptors}
    missing = [d["name"] for d in descriptors if d.get("required") and d["name"] not in params]
    if missing:
        raise AssertionError(f"{what}: missing required param(s) {missing}; got {sorted(params)}")
    if not allow_extra:
        extra = sorted(set(params) - set(declared))
        if extra:
            raise AssertionError(f"{what}: undocumented param(s) {extra}")
    for name, value in params.items():
        if name in declared:
            check(value, declared[name]["schema"], f"{what} param {name!r}")


# ---------------------------------------------------------------- public API

def validate_result(method: str, result: Any) -> None:
    """Checks a response's `result` against the method's result schema."""
    m = methods().get(method)
    if m is None:
        raise AssertionError(f"method {method!r} is not in protocol/openrpc.json")
    if "result" not in m:
        raise AssertionError(f"{method!r} is a notification and has no result, yet a result came: {result!r}")
    check(result, deref(m["result"])["schema"], f"result of {method!r}")


def validate_params(method: str, params: Any, allow_extra: bool = False) -> None:
    """Checks by-name params of a client→server method (for tests' own requests)."""
    m = methods().get(method)
    if m is None:
        raise AssertionError(f"method {method!r} is not in protocol/openrpc.json")
    _check_by_name(m, params, f"params of {method!r}", allow_extra)


def validate_notification(name: str, params: Any, allow_extra: bool = True) -> None:
    """Checks a server→client notification: required params present, each param valid.

    Params the document does not name are accepted unless allow_extra is False
    (fields may be added without a protocol version change)."""
    n = notifications().get(name)
    if n is None:
        raise AssertionError(f"notification {name!r} is not in x-notifications of protocol/openrpc.json")
    _check_by_name(n, params, f"notification {name!r}", allow_extra)


def validate_error(error: Any, known_codes_only: bool = True) -> None:
    """Checks a JSON-RPC error object: integer `code`, string `message`.

    With known_codes_only, `code` must also be a documented one (a JSON-RPC
    reserved code or one of components.errors)."""
    if not isinstance(error, dict):
        raise AssertionError(f"error must be an object, got {error!r}")
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool):
        raise AssertionError(f"error.code must be an integer, got {code!r}")
    if not isinstance(message, str):
        raise AssertionError(f"error.message must be a string, got {message!r}")
    extra = set(error) - {"code", "message", "data"}
    if extra:
        raise AssertionError(f"error object has members beyond code/message/data: {sorted(extra)}")
    if known_codes_only and code not in STANDARD_ERROR_CODES | set(error_codes()):
        raise AssertionError(f"error code {code} is not documented in protocol/openrpc.json")


def validate_message(msg: Any, request_method: str | Mapping[Any, str] | None = None) -> str:
    """Checks one message courier wrote and returns its kind.

    Kinds: "result", "error", "notification", or "batch" for an array of
    responses. `request_method` names the method of the request answered; for a
    batch, pass a mapping from request id to method. Without it a result is
    checked only as a JSON-RPC envelope."""
    if isinstance(msg, list):
        if not msg:
            raise AssertionError("courier never writes an empty batch")
        for entry in msg:
            if not isinstance(entry, dict) or "id" not in entry:
                raise AssertionError(f"a batch answer holds responses only, got {entry!r}")
            method = request_method.get(entry["id"]) if isinstance(request_method, Mapping) else None
            kind = validate_message(entry, method)
            if kind == "notification":
                raise AssertionError(f"a batch answer holds responses only, got {entry!r}")
        return "batch"

    if not isinstance(msg, dict):
        raise AssertionError(f"a message must be an object or an array, got {msg!r}")
    if msg.get("jsonrpc") != "2.0":
        raise AssertionError(f'"jsonrpc" must be "2.0", got {msg.get("jsonrpc")!r}')

    if "method" in msg:
        if "id" in msg:
            raise AssertionError(f"courier sends no requests to the client, got {msg!r}")
        extra = set(msg) - {"jsonrpc", "method", "params"}
        if extra:
            raise AssertionError(f"notification has unexpected members {sorted(extra)}")
        validate_notification(msg["method"], msg.get("params"))
        return "notification"

    if "id" not in msg:
        raise AssertionError(f"a response must carry an id, got {msg!r}")
    if not (msg["id"] is None or isinstance(msg["id"], (str, int, float))) or isinstance(msg["id"], bool):
        raise AssertionError(f"response id must be a string, number or null, got {msg['id']!r}")
    has_result, has_error = "result" in msg, "error" in msg
    if has_result == has_error:
        raise AssertionError(f"a response has exactly one of result and error, got {sorted(msg)}")
    extra = set(msg) - {"jsonrpc", "id", "result", "error"}
    if extra:
        raise AssertionError(f"response has unexpected members {sorted(extra)}")
    if has_error:
        validate_error(msg["error"])
        return "error"
    if isinstance(request_method, Mapping):
        request_method = request_method.get(msg["id"])
    if request_method is not None:
        validate_result(request_method, msg["result"])
    return "result"

