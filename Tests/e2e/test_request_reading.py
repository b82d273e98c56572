"""A `download` request is read the same whatever its text holds: each
message below, sent as raw text, gets the JSON-RPC error (code, message and
data) or the download its value asks for, so a change in how params are
found or read shows as a changed answer. Python's json cannot write most of
these (repeated names, a NUL in a name, numbers beyond 64 bits)."""

from __future__ import annotations

import pytest

BAD_URL = "not a url"
# Refused requests fetch nothing: a fixed URL keeps the errors' byte positions fixed.
OK = "http://127.0.0.1:9/reading"

# (case, params text, the error the request gets)
REFUSED: list[tuple[str, str, dict]] = [
    ("repeated url, last refused", '{"url":"{ok}","url":"' + BAD_URL + '"}',
     {"code": -32602, "data": {"param": "url"}, "message": "param 'url' is not a valid absolute URL"}),
    ("repeated priority, last refused", '{"url":"{ok}","priority":"high","priority":"urgent"}',
     {"code": -32602, "data": {"param": "priority"}, "message": "param 'priority' must be one of [\"high\",\"normal\",\"low\"], not \"urgent\""}),
    ("NUL in the url", '{"url":"http://127.0.0.1/a\\u0000b"}',
     {"code": -32602, "data": {"param": "url"}, "message": "param 'url' is not a valid absolute URL"}),
    ("NUL in a name", '{"url\\u0000":"{ok}"}',
     {"code": -32700, "message": "Parse error: NUL byte in object key not supported near '\"url\\u0000\"' at byte 75"}),
    ("integer beyond 64 bits", '{"url":"{ok}","maxBytes":99999999999999999999}',
     {"code": -32700, "message": "Parse error: integer out of 64-bit range (too big integer near '99999999999999999999' at byte 130)"}),
    ("real beyond a double", '{"url":"{ok}","timeout":1e400}',
     {"code": -32700, "message": "Parse error: number out of a double's range (real number overflow near '1e400' at byte 114)"}),
    ("real where an integer goes", '{"url":"{ok}","retries":1e19}',
     {"code": -32602, "data": {"param": "retries"}, "message": "param 'retries' must be integer, not 1e19"}),
    ("fraction where an integer goes", '{"url":"{ok}","maxBytes":1.5}',
     {"code": -32602, "data": {"param": "maxBytes"}, "message": "param 'maxBytes' must be integer, not 1.5"}),
    ("timeout out of range", '{"url":"{ok}","timeout":1e308}',
     {"code": -32602, "data": {"param": "timeout"}, "message": "param 'timeout' must be at most 31536000, not 1e+308"}),
    ("deep header value", '{"url":"{ok}","headers":{"a":' + "[" * 500 + "]" * 500 + "}}",
     {"code": -32602, "data": {"param": "headers"}, "message": "param 'headers' must be string, not array"}),
    ("too deep to parse", '{"url":"{ok}","headers":{"a":' + "[" * 3000 + "]" * 3000 + "}}",
     {"code": -32700, "message": "Parse error: maximum parsing depth reached near '[' at byte 2161"}),
    ("too many values to parse", '{"url":"{ok}","headers":{"a":' + "[" * 100_000 + "]" * 100_000 + "}}",
     {"code": -32600, "data": {"limit": 100000}, "message": "Invalid Request: a message may hold at most 100000 values"}),
    ("url of another type", '{"url":5}',
     {"code": -32602, "data": {"param": "url"}, "message": "param 'url' must be string, not 5"}),
    ("url null", '{"url":null}',
     {"code": -32602, "data": {"param": "url"}, "message": "param 'url' must be string, not null"}),
    ("no url", '{"slot":"s"}',
     {"code": -32602, "data": {"param": "url"}, "message": "missing param 'url'"}),
    ("headers an array", '{"url":"{ok}","headers":[]}',
     {"code": -32602, "data": {"param": "headers"}, "message": "param 'headers' must be object, not array"}),
    ("a header of a number", '{"url":"{ok}","headers":{"x":1}}',
     {"code": -32602, "data": {"param": "headers"}, "message": "param 'headers' must be string, not 1"}),
    ("slot a number", '{"url":"{ok}","slot":1}',
     {"code": -32602, "data": {"param": "slot"}, "message": "param 'slot' must be string, not 1"}),
    ("accept a string", '{"url":"{ok}","accept":"x"}',
     {"code": -32602, "data": {"param": "accept"}, "message": "param 'accept' must be array, not string"}),
    ("mirrors of a number", '{"url":"{ok}","mirrors":[1]}',
     {"code": -32602, "data": {"param": "mirrors"}, "message": "param 'mirrors' must be string, not 1"}),
    ("body a boolean", '{"url":"{ok}","body":true}',
     {"code": -32602, "data": {"param": "body"}, "message": "param 'body' must be string, not true"}),
    ("wait a string", '{"url":"{ok}","wait":"yes"}',
     {"code": -32602, "data": {"param": "wait"}, "message": "param 'wait' must be boolean, not string"}),
    ("cachePolicy unknown", '{"url":"{ok}","cachePolicy":"sometimes"}',
     {"code": -32602, "data": {"param": "cachePolicy"}, "message": "param 'cachePolicy' must be one of [\"default\",\"reload\",\"cacheElseLoad\",\"cacheOnly\"], not \"sometimes\""}),
    ("two wrong, first in the document's order named", '{"wait":"yes","url":"{ok}","slot":2}',
     {"code": -32602, "data": {"param": "slot"}, "message": "param 'slot' must be string, not 2"}),
    ("unknown names, first in sorted order named", '{"url":"{ok}","zzz":1,"aaa":2}',
     {"code": -32602, "data": {"param": "aaa"}, "message": "unknown param 'aaa'"}),
    ("positional", '["{ok}"]',
     {"code": -32602, "message": "params must be given by name, as an object"}),
]

# (case, params text): each fetches `{ok}` and waits for it.
ACCEPTED: list[tuple[str, str]] = [
    ("repeated url, last kept", '{"url":"' + BAD_URL + '","url":"{ok}","wait":true}'),
    ("repeated priority, last kept", '{"url":"{ok}","priority":"urgent","priority":"low","wait":true}'),
    ("NUL in a slot", '{"url":"{ok}","slot":"a\\u0000b","wait":true}'),
    ("largest maxBytes", '{"url":"{ok}","maxBytes":9223372036854775807,"wait":true}'),
    ("integer-valued real", '{"url":"{ok}","retries":2.0,"wait":true}'),
    ("many names repeated", '{' + ",".join(['"url":"' + BAD_URL + '"'] * 50) + ',"url":"{ok}","wait":false,"wait":true}'),
]


def send_raw_message(c, text: str) -> None:
    body = text.encode()
    c.send_raw(body + b"\n" if c.framing == "ndjson" else b"Content-Length: %d\r\n\r\n" % len(body) + body)


def next_response(c) -> dict:
    while True:
        message = c.next_message(timeout=20)
        if isinstance(message, dict) and "method" not in message:
            return message


def answers(c, cases, ok: str = OK) -> list[dict]:
    found = []
    for index, (_, params, *_) in enumerate(cases):
        id = f"reading-{index}"
        if hasattr(c, "methods_by_id"):
            c.methods_by_id[id] = "download"
        send_raw_message(c, '{"jsonrpc":"2.0","id":"%s","method":"download","params":%s}' % (id, params.replace("{ok}", ok)))
        found.append(next_response(c))
    return found


def test_refused_requests_get_the_same_error(courier):
    c = courier()
    wrong = [f"{case}: {answer.get('error') or answer}"
             for (case, _, expected), answer in zip(REFUSED, answers(c, REFUSED)) if answer.get("error") != expected]
    assert not wrong, "\n".join(wrong)


def test_accepted_requests_fetch_what_their_last_values_say(courier, origin):
    url = origin.set_resource("reading", b"reading")
    c = courier()
    wrong = []
    for (case, _), answer in zip(ACCEPTED, answers(c, ACCEPTED, ok=url)):
        outcome = (answer.get("result") or {}).get("outcome") or {}
        if not outcome.get("ok") or outcome.get("url") != url:
            wrong.append(f"{case}: {answer}")
    assert not wrong, "\n".join(wrong)
