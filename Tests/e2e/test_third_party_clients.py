"""courier driven by third-party JSON-RPC clients from PyPI that speak the LSP
base protocol (Content-Length framing): pygls and python-lsp-jsonrpc."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from schema import validate_result

REPO = Path(__file__).resolve().parents[2]
COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")
DOCUMENT = json.loads((REPO / "protocol" / "openrpc.json").read_text(encoding="utf-8"))
TIMEOUT = 10


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch, tmp_path):
    """Every courier started here keeps its cache in the test's own directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def check_initialize(result: dict) -> None:
    validate_result("initialize", result)
    assert result["serverInfo"]["name"] == "courier"
    assert result["capabilities"]["framing"] == "lsp"


# ---------------------------------------------------------------- pygls


def test_pygls_json_rpc_client():
    pygls_client = pytest.importorskip("pygls.client")
    from pygls.exceptions import JsonRpcMethodNotFound
    from pygls.protocol import JsonRPCResponseMessage, default_converter

    def plain_results():
        """pygls turns results into namedtuples (renaming keys such as "$ref");
        keep them as the JSON objects courier sent."""
        converter = default_converter()
        converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
        return converter

    sent: list[bytes] = []

    async def session() -> int:
        client = pygls_client.JsonRPCClient(converter_factory=plain_results)
        await client.start_io(COURIER)
        writer = client.protocol.writer

        class Recorder:
            def write(self, data: bytes):
                sent.append(data)
                return writer.write(data)

            def __getattr__(self, name):
                return getattr(writer, name)

        client.protocol.set_writer(Recorder())
        server = client._server
        try:
            async def request(method: str, params=None):
                return await asyncio.wait_for(
                    client.protocol.send_request_async(method, params), TIMEOUT)

            check_initialize(await request("initialize", {"clientInfo": {"name": "pygls", "version": "2"}}))

            with pytest.raises(JsonRpcMethodNotFound):
                await request("no/such/method", {})

            discovered = await request("rpc.discover")
            validate_result("rpc.discover", discovered)
            assert discovered == DOCUMENT

            assert await request("shutdown") is None
            client.protocol.notify("exit")
            return await asyncio.wait_for(server.wait(), TIMEOUT)
        finally:
            if server.returncode is None:
                server.kill()
                await server.wait()
            await asyncio.wait_for(client.stop(), TIMEOUT)

    assert asyncio.run(session()) == 0
    exits = [data for data in sent if b"\"exit\"" in data]
    assert len(exits) == 1, sent


# ---------------------------------------------------------------- python-lsp-jsonrpc


def test_python_lsp_jsonrpc_endpoint():
    streams = pytest.importorskip("pylsp_jsonrpc.streams")
    from pylsp_jsonrpc.endpoint import Endpoint
    from pylsp_jsonrpc.exceptions import JsonRpcMethodNotFound

    proc = subprocess.Popen([COURIER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    writer = streams.JsonRpcStreamWriter(proc.stdin)
    reader = streams.JsonRpcStreamReader(proc.stdout)
    endpoint = Endpoint({}, writer.write, max_workers=1)
    listener = threading.Thread(target=reader.listen, args=(endpoint.consume,), daemon=True)
    listener.start()
    try:
        def request(method: str, params=None):
            return endpoint.request(method, params).result(timeout=TIMEOUT)

        check_initialize(request("initialize", {"clientInfo": {"name": "pylsp-jsonrpc"}}))

        with pytest.raises(JsonRpcMethodNotFound):
            request("no/such/method")

        discovered = request("rpc.discover", {})
        validate_result("rpc.discover", discovered)
        assert discovered == DOCUMENT

        assert request("shutdown") is None
        endpoint.notify("exit")
        assert proc.wait(timeout=TIMEOUT) == 0
        listener.join(timeout=TIMEOUT)
        assert not listener.is_alive(), "the reader did not see the end of courier's output"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        endpoint.shutdown()
        writer.close()
        proc.stdout.close()
