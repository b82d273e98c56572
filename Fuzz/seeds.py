"""Fuzz seeds from the conformance cases, and a seeded mutator.

The seeds are the string literals of the framing, codec and dispatcher
tests (Swift and end-to-end) and of the cache tests, so the fuzzers start
from what the tests already know to matter. `python3 Fuzz/seeds.py DIR`
writes one corpus directory per harness under DIR; the end-to-end fuzz test
imports `messages` and `Mutator` from here.
"""

from __future__ import annotations

import ast
import json
import random
import re
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

RPC_SOURCES = [
    *sorted((REPO / "Tests" / "JSONRPCTests").glob("*.swift")),
    REPO / "Tests" / "JSONTests" / "JSONCodecTests.swift",
    REPO / "Tests" / "e2e" / "test_transport.py",
]
HTTP_SOURCES = [
    REPO / "Tests" / "CourierTests" / "HTTPCachePolicyTests.swift",
    REPO / "Tests" / "CourierTests" / "DiskCacheTests.swift",
]

_SWIFT_RAW = re.compile(r'#"(.*?)"#')
_SWIFT_PLAIN = re.compile(r'(?<![#"])"((?:[^"\\\n]|\\.)*)"(?!#)')
_SWIFT_ESCAPE = re.compile(r'\\(u\{[0-9a-fA-F]+\}|.)')


def _swift_unescape(text: str) -> str:
    simple = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\", '"': '"', "'": "'"}

    def replace(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape.startswith("u{"):
            try:
                return chr(int(escape[2:-1], 16))
            except ValueError:
                return ""
        # An interpolation "\(x)" is left as the text it was.
        return simple.get(escape, "\\" + escape)

    return _SWIFT_ESCAPE.sub(replace, text)


def literals(path: Path) -> list[bytes]:
    """Every string (and bytes) literal of a Swift or Python source file."""
    text = path.read_text(encoding="utf-8")
    found: list[bytes] = []
    if path.suffix == ".py":
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                value = node.value
                found.append(value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass"))
    else:
        for match in _SWIFT_RAW.finditer(text):
            found.append(match.group(1).encode("utf-8"))
        for match in _SWIFT_PLAIN.finditer(_SWIFT_RAW.sub("", text)):
            found.append(_swift_unescape(match.group(1)).encode("utf-8", "surrogatepass"))
    return [item for item in dict.fromkeys(found) if item and len(item) <= 4096]


def messages() -> list[bytes]:
    """The conformance cases' literals that look like a message (or part of one)."""
    result = []
    for path in RPC_SOURCES:
        for item in literals(path):
            stripped = item.strip()
            if stripped[:1] in (b"{", b"[", b'"') or b"jsonrpc" in item or b"Content-Length" in item:
                result.append(item)
    return list(dict.fromkeys(result))


def lsp(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _framer_seeds(bodies: list[bytes]) -> list[bytes]:
    seeds = []
    for index, body in enumerate(bodies):
        control = bytes([index % 256])
        seeds.append(control + body)
        seeds.append(control + body + b"\n" + bodies[(index + 1) % len(bodies)] + b"\r\n")
        seeds.append(control + lsp(body) + lsp(bodies[(index + 7) % len(bodies)]))
    return seeds


def binary_head(key: str, url: str, status: int, headers: list[tuple[str, str]], vary: dict[str, str],
                times: tuple[float, float, float], raw: dict[str, bytes] | None = None,
                digests: dict[str, bytes] | None = None) -> bytes:
    """A disk cache entry's head in the binary form `StoredHead` reads
    (times in seconds since 1970, stored as seconds since 2001)."""
    def string(value: str | bytes) -> bytes:
        data = value.encode() if isinstance(value, str) else value
        return struct.pack("<I", len(data)) + data

    def pairs(items) -> bytes:
        return struct.pack("<I", len(items)) + b"".join(string(name) + string(value) for name, value in items)

    head = b"\x00CH\x01" + struct.pack("<H", status)
    head += b"".join(struct.pack("<d", time - 978307200) for time in times)
    head += string(key) + string(url) + pairs(headers) + pairs(list(vary.items()))
    return head + pairs(list((raw or {}).items())) + pairs(list((digests or {}).items()))


def _http_seeds() -> list[bytes]:
    texts = [item for path in HTTP_SOURCES for item in literals(path)]
    metadata = json.dumps({
        "key": "GET https://example.org/a", "url": "https://example.org/a", "status": 200,
        "headers": [["cache-control", "max-age=60"], ["etag", '"v1"'], ["date", "Sun, 06 Nov 1994 08:49:37 GMT"]],
        "vary": {"accept": "image/*"}, "requestTime": 784111777.5, "responseTime": 784111778.25,
        "storedAt": 784111778.25,
    }, separators=(",", ":")).encode()
    header = b"CRCH\r\n\x1a\n" + struct.pack("<IIQQQ", 1, len(metadata), 5, 0x1234, 0x5678)
    policy_prefix = struct.pack(">IIII", 200, 784111777, 784111778, 784111900)
    binary = binary_head(
        "GET https://example.org/a", "https://example.org/a", 200,
        [("cache-control", "max-age=60"), ("etag", '"v1"'), ("date", "Sun, 06 Nov 1994 08:49:37 GMT")],
        {"accept": "image/*"}, (784111777.5, 784111778.25, 784111778.25), {"etag": b'"\xe9"'}, {"sha256": bytes(32)})
    seeds = [b"\x00" + header, b"\x01" + metadata, b"\x01" + binary, b"\x04" + policy_prefix + b"\n".join(
        [b"Cache-Control: max-age=60, must-revalidate", b"Date: Sun, 06 Nov 1994 08:49:37 GMT",
         b"Authorization: x", b"Vary: Accept", b"ETag: W/\"x\"", b"Accept: a"])]
    for text in texts:
        for selector in (2, 3):
            seeds.append(bytes([selector]) + text)
        seeds.append(b"\x04" + policy_prefix + text)
    return seeds


def _cache_directory_seeds() -> list[bytes]:
    """Journal lines (selector 0), entries (1: flags, claimed length, memory
    bound, metadata for the key `k`) and journals (2) for
    Fuzz/FuzzCacheDirectory, naming its sandbox's victim directory."""
    sandbox = "/tmp/courier-fuzz-cache"
    partial = ".x.courier-4242-a.part"
    lines = [
        f"partial 2049 131073 /home/user/Documents/{partial}",
        f"partial 1 2 {sandbox}/victim/{partial}",
        f"partial {sandbox}/victim/{partial}",
        f"partial 1 2 {sandbox}/cache/link/{partial}",
        f"downloads {sandbox}/victim/4242",
        f"downloads {sandbox}/cache/link/4242",
        "partial 18446744073709551615 0 /a b/.c d.courier-4242-zz.part",
        "4242-a", "2147483647-zzzzzzzzzzzzz", "0-a",
    ]
    journal = "\n".join(lines).encode() + b"\n"
    metadata = json.dumps({
        "key": "k", "url": "https://example.org/k", "status": 200, "headers": [["cache-control", "max-age=60"]],
        "vary": {}, "requestTime": 784111777.5, "responseTime": 784111778.25, "storedAt": 784111778.25,
    }, separators=(",", ":")).encode()
    binary = binary_head("k", "https://example.org/k", 200, [("cache-control", "max-age=60")], {},
                         (784111777.5, 784111778.25, 784111778.25))
    seeds = [b"\x00" + journal, b"\x02" + journal, b"\x02"]
    for kind in range(6):
        for claimed, bound in ((16, 10), (1 << 20, 23), (1 << 20, 4), (512 << 30, 23), (2 ** 63, 0)):
            for head in (metadata, binary):
                seeds.append(b"\x01" + bytes([kind << 2]) + struct.pack("<Q", claimed) + bytes([bound]) + head)
    return seeds


def write_corpora(root: Path) -> None:
    bodies = messages()
    corpora = {
        "FuzzFramer": _framer_seeds(bodies),
        "FuzzCodec": bodies,
        "FuzzDispatcher": bodies,
        "FuzzHTTP": _http_seeds(),
        "FuzzCacheDirectory": _cache_directory_seeds(),
    }
    for name, seeds in corpora.items():
        directory = root / name
        directory.mkdir(parents=True, exist_ok=True)
        for index, seed in enumerate(seeds):
            (directory / f"seed-{index:04d}").write_bytes(seed)
        print(f"{name}: {len(seeds)} seeds", file=sys.stderr)


class Mutator:
    """Deterministic byte mutations: bit flips, inserts, deletes, splices
    between seeds, interesting integers and tokens, truncation."""

    INTERESTING = [b"0", b"-1", b"1e999", b"9223372036854775808", b"-9223372036854775809", b"1.7976931348623157e309",
                   b"null", b"true", b"[]", b"{}", b'""', b"\\u0000", b"\\ud800", b"\xff", b"\xc3", b"\x00",
                   b"\r\n", b"\n", b"Content-Length: ", b"4294967296", b'"id":', b'"method":', b'"jsonrpc":"2.0"',
                   b'"params":', b"[" * 40]

    def __init__(self, seeds: list[bytes], seed: int):
        self.seeds = seeds
        self.random = random.Random(seed)

    def mutate(self, data: bytes | None = None) -> bytes:
        rng = self.random
        data = bytearray(data if data is not None else rng.choice(self.seeds))
        for _ in range(rng.randint(1, 4)):
            choice = rng.randrange(7)
            position = rng.randint(0, len(data))
            if choice == 0 and data:
                index = rng.randrange(len(data))
                data[index] ^= 1 << rng.randrange(8)
            elif choice == 1:
                data[position:position] = bytes([rng.randrange(256)])
            elif choice == 2 and data:
                del data[position:position + rng.randint(1, 8)]
            elif choice == 3:
                other = rng.choice(self.seeds)
                start = rng.randint(0, len(other))
                data[position:position] = other[start:start + rng.randint(1, 32)]
            elif choice == 4:
                data[position:position] = rng.choice(self.INTERESTING)
            elif choice == 5:
                del data[position:]
            else:
                other = rng.choice(self.seeds)
                data = data[:position] + other[rng.randint(0, len(other)):]
        return bytes(data)


if __name__ == "__main__":
    write_corpora(Path(sys.argv[1]))
