"""End-to-end tests of courier's lifecycle: initialize, shutdown, exit, end of
input, rpc.discover and the command line, in both framings."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import disk_tier
from conftest import Session, checked_sessions
from courier_client import Courier, RpcError, frame
from schema import (implemented_methods, implemented_notifications, methods, notifications,
                    validate_message)

REPO = Path(__file__).resolve().parents[2]
COURIER = os.environ.get("COURIER") or str(REPO / ".build" / "debug" / "courier")
DOCUMENT = REPO / "protocol" / "openrpc.json"
EX_USAGE = 64


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch, tmp_path):
    """Every courier started here keeps its cache in the test's own directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture(params=("ndjson", "lsp"))
def framing(request) -> str:
    return request.param


@pytest.fixture
def spawn(framing):
    """Starts courier in the test's framing; stops and checks it at teardown."""
    yield from checked_sessions(lambda *args: Session(COURIER, list(args), framing=framing))


@pytest.fixture
def c(spawn) -> Courier:
    return spawn()


def call(c: Courier, method: str, params: Any = None, timeout: float = 10) -> dict:
    """Sends a request; returns its response, checked against the document."""
    id = c.send_request(method, params)
    response = c.wait_response(id, timeout)
    validate_message(response, request_method=method)
    return response


def result_of(c: Courier, method: str, params: Any = None) -> Any:
    response = call(c, method, params)
    assert "result" in response, response
    return response["result"]


def error_code(c: Courier, method: str, params: Any = None) -> int:
    response = call(c, method, params)
    assert "error" in response, response
    return response["error"]["code"]


def send_raw_message(c: Courier, text: str) -> None:
    body = text.encode()
    c.send_raw(body + b"\n" if c.framing == "ndjson" else b"Content-Length: %d\r\n\r\n" % len(body) + body)


def version_output() -> str:
    done = subprocess.run([COURIER, "--version"], capture_output=True, text=True, timeout=10)
    return done.stdout.strip()


def _library_version(name: str, function: str) -> str | None:
    path = ctypes.util.find_library(name)
    if path is None:
        return None
    try:
        fn = getattr(ctypes.CDLL(path), function)
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_char_p
    return fn().decode()


# ---------------------------------------------------------------- initialize


def test_initialize_describes_the_server(spawn, framing):
    c = spawn("--max-active", "7", "--max-message-bytes", "1MiB")
    result = result_of(c, "initialize", {"clientInfo": {"name": "tests", "version": "1"}})
    assert result["serverInfo"]["name"] == "courier"
    assert result["serverInfo"]["version"] == version_output()
    assert result["protocolVersion"] == "1.0"
    capabilities = result["capabilities"]
    assert capabilities["framing"] == framing
    assert sorted(capabilities["framings"]) == ["lsp", "ndjson"]
    assert capabilities["maxMessageBytes"] == 1 << 20
    assert set(capabilities["methods"]) >= {"initialize", "shutdown", "rpc.discover"}
    config = result["config"]
    assert config["maxActive"] == 7
    assert config["maxMessageBytes"] == 1 << 20
    assert config["framing"] == "auto"
    curl = result["libraries"]["curl"]
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", curl["version"]), curl
    assert curl["features"] and all(isinstance(f, str) for f in curl["features"]), curl
    assert "ssl" in curl["features"], curl
    jansson = result["libraries"]["jansson"]
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?\S*", jansson["version"]), jansson
    system_curl = _library_version("curl", "curl_version")
    if system_curl is not None:
        assert f"libcurl/{curl['version']}" in system_curl, (curl["version"], system_curl)
    system_jansson = _library_version("jansson", "jansson_version_str")
    if system_jansson is not None:
        assert jansson["version"] == system_jansson


def test_initialize_reports_defaults(c):
    config = result_of(c, "initialize")["config"]
    assert config["maxActive"] == 4
    assert config["prioritization"] == "fifo"
    assert config["maxMessageBytes"] == 16 * 1024 * 1024
    assert config["activationDelay"] == 1.0
    assert config["completionDelay"] == 0.17


def test_capabilities_name_only_documented_methods_and_notifications(c):
    capabilities = result_of(c, "initialize")["capabilities"]
    assert set(capabilities["methods"]) <= set(methods()), capabilities["methods"]
    assert set(capabilities["notifications"]) <= set(notifications()), capabilities["notifications"]


def test_capabilities_advertise_every_implemented_method(c):
    capabilities = result_of(c, "initialize")["capabilities"]
    assert implemented_methods() <= set(capabilities["methods"]), capabilities["methods"]
    assert implemented_notifications() <= set(capabilities["notifications"])


def test_initialize_options_change_the_config(c):
    options = {"maxActive": 2, "prioritization": "lifo", "timeout": 12.5, "activationDelay": 0.5}
    config = result_of(c, "initialize", {"options": options})["config"]
    for name, value in options.items():
        assert config[name] == value, (name, config[name])
    again = result_of(c, "initialize", {})["config"]
    assert {name: again[name] for name in options} == options
    assert result_of(c, "initialize", None)["config"]["maxActive"] == 2


@pytest.mark.parametrize("options", [
    {"noSuchOption": 1},
    {"maxActive": "x"},
    {"maxActive": 0},
    {"maxActive": 1.5},
    {"prioritization": "random"},
    {"timeout": "soon"},
])
def test_initialize_refuses_bad_options(c, options):
    assert error_code(c, "initialize", {"options": options}) == -32602
    assert result_of(c, "initialize")["config"]["maxActive"] == 4


def test_refused_initialize_changes_nothing(c):
    before = result_of(c, "initialize")["config"]
    assert error_code(c, "initialize", {"options": {"maxActive": 3, "timeout": "x"}}) == -32602
    assert result_of(c, "initialize")["config"] == before


def test_startup_only_options_accept_only_their_current_value(c):
    before = result_of(c, "initialize")["config"]
    assert error_code(c, "initialize", {"options": {"cacheDir": "/elsewhere", "maxActive": 3}}) == -32602
    config = result_of(c, "initialize", {"options": {"cacheDir": before["cacheDir"], "maxActive": 3}})["config"]
    assert config["cacheDir"] == before["cacheDir"]
    assert config["maxActive"] == 3


def test_initialize_is_optional(c):
    assert result_of(c, "rpc.discover")["openrpc"]
    assert result_of(c, "shutdown") is None
    c.exit()
    assert c.wait_exit(5) == 0


# ---------------------------------------------------------------- shutdown and exit


def test_shutdown_then_every_request_is_refused(c):
    result_of(c, "initialize")
    assert result_of(c, "shutdown") is None
    for method, params in (("initialize", None), ("rpc.discover", None), ("shutdown", None),
                           ("no/such/method", None), ("initialize", [1])):
        assert error_code(c, method, params) == -32600, method
    c.notify("no/such/method")
    c.notify("initialize")
    id = c.send_request("rpc.discover")
    assert c.wait_response(id)["error"]["code"] == -32600
    answered = [received.message for received in c.messages]
    assert len(answered) == 8, answered
    assert all("id" in message for message in answered), answered
    c.exit()
    assert c.wait_exit(5) == 0


def test_exit_after_shutdown_exits_0(c):
    assert result_of(c, "shutdown") is None
    c.exit()
    assert c.wait_exit(5) == 0


def test_exit_without_shutdown_exits_1(c):
    result_of(c, "initialize")
    c.exit()
    assert c.wait_exit(5) == 1


def test_null_params_are_no_params(c):
    send_raw_message(c, '{"jsonrpc":"2.0","id":"i","method":"initialize","params":null}')
    response = c.wait_response("i")
    validate_message(response, request_method="initialize")
    assert response["result"]["serverInfo"]["name"] == "courier"
    send_raw_message(c, '{"jsonrpc":"2.0","id":"d","method":"rpc.discover","params":null}')
    assert c.wait_response("d")["result"] == json.loads(DOCUMENT.read_text())
    send_raw_message(c, '{"jsonrpc":"2.0","id":"s","method":"shutdown","params":null}')
    response = c.wait_response("s")
    validate_message(response, request_method="shutdown")
    assert response == {"jsonrpc": "2.0", "id": "s", "result": None}
    send_raw_message(c, '{"jsonrpc":"2.0","method":"exit","params":null}')
    assert c.wait_exit(5) == 0


def test_exit_with_null_params_without_shutdown_exits_1(c):
    send_raw_message(c, '{"jsonrpc":"2.0","method":"exit","params":null}')
    assert c.wait_exit(5) == 1


def test_requests_before_exit_are_answered(c):
    c.send_raw(b"".join(frame(m, c.framing) for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize"},
        {"jsonrpc": "2.0", "id": 2, "method": "rpc.discover"},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 4, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    )))
    assert c.wait_exit(5) == 0
    ids = []
    for _ in range(4):
        message = c.next_message(timeout=5)
        validate_message(message, request_method={1: "initialize", 2: "rpc.discover", 4: "shutdown"})
        ids.append(message["id"])
    assert ids == [1, 2, 3, 4]


def test_end_of_input_exits_0_within_a_second(c):
    result_of(c, "initialize")
    c.close_stdin()
    start = time.monotonic()
    code = c.wait_exit(10)
    elapsed = time.monotonic() - start
    assert code == 0
    assert elapsed < 1.0, f"courier took {elapsed:.2f} s to exit after end of input"


def test_end_of_input_without_any_message_exits_0():
    done = subprocess.run([COURIER], input=b"", capture_output=True, timeout=10)
    assert done.returncode == 0
    assert done.stdout == b""


def test_end_of_input_lets_every_download_finish_then_exits_0(spawn, origin):
    # Given two downloads under way, one waiting in the queue behind them and
    # one sent with wait: true
    c = spawn("--max-active", "2")
    urls = [origin.url(f"/drip?size=60000&chunks=6&interval=0.05&n={n}") for n in range(4)]
    receipts = [c.download(url)["receipt"] for url in urls[:3]]
    waiting = c.send_request("download", {"url": urls[3], "body": "text", "wait": True})
    c.wait_until(lambda: len(c.progress_by_task) >= 2, what="two downloads running")

    # When the client closes courier's stdin: no more requests
    c.close_stdin()

    # Then each download runs to its end, its outcome and the waiting answer
    # are written, and courier exits with 0
    assert c.wait_exit(30) == 0
    outcomes = c.wait_all(receipts, timeout=5)
    assert all(o["ok"] and o["size"] == 60000 for o in outcomes.values()), outcomes
    answer = c.wait_response(waiting, timeout=5)
    assert answer["result"]["outcome"]["ok"] and answer["result"]["outcome"]["size"] == 60000


def test_end_of_input_ends_a_suspended_download_with_shutdown_once_the_rest_is_done(spawn, origin):
    # Given a suspended download beside one that runs
    c = spawn()
    held = c.download(origin.url("/drip?size=60000&chunks=6&interval=0.2&held=1"))
    c.request("suspend", {"receipt": held["receipt"]})
    running = c.download(origin.url("/drip?size=30000&chunks=6&interval=0.05&run=1"))

    # When input ends: no request can resume the suspended one any more
    c.close_stdin()

    # Then the running one finishes, the suspended one ends with shutdown,
    # in that order, and courier exits with 0
    assert c.wait_exit(30) == 0
    outcomes = c.wait_all([running["receipt"], held["receipt"]], timeout=5)
    assert outcomes[running["receipt"]]["ok"], outcomes
    assert outcomes[held["receipt"]]["error"]["code"] == "shutdown", outcomes
    assert c.finished_order == [running["receipt"], held["receipt"]]


def test_a_normal_run_writes_nothing_on_stderr(origin):
    # Given courier spawned by a program with the default settings
    with Session(COURIER, []) as c:
        # When the program does what programs do
        c.initialize(clientInfo={"name": "an editor", "version": "1"})
        assert c.fetch(origin.url("/bytes/1000"))["ok"]
        assert c.fetch(origin.url("/status/404"))["error"]["code"] == "http_status"
        c.shutdown()
        c.exit()
        assert c.wait_exit(10) == 0
    # Then its stderr stays empty (read to its end when the session closed)
    assert c.stderr_text == ""


# ---------------------------------------------------------------- rpc.discover


@pytest.mark.parametrize("params", [None, {}])
def test_rpc_discover_returns_the_document(c, params):
    result = result_of(c, "rpc.discover", params)
    expected = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    assert result == expected
    assert json.dumps(result, sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_rpc_discover_refuses_params(c):
    assert error_code(c, "rpc.discover", {"x": 1}) == -32602
    assert error_code(c, "rpc.discover", [1]) == -32602


# ---------------------------------------------------------------- command line


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage_and_exits_0(flag):
    done = subprocess.run([COURIER, flag], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    for word in ("USAGE", "--max-active", "--framing", "--max-message-bytes", "--cache-dir", "--version"):
        assert word in done.stdout, word


def test_version_prints_and_exits_0():
    done = subprocess.run([COURIER, "--version"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\n", done.stdout), done.stdout


@pytest.mark.parametrize("args", [
    ["--bogus"],
    ["--max-active", "x"],
    ["--max-active"],
    ["--max-active", "0"],
    ["--framing", "xml"],
    ["--max-message-bytes", "lots"],
    ["--log-level", "loud"],
    ["unexpected"],
], ids=lambda a: " ".join(a))
def test_bad_command_line_exits_with_usage_error(args):
    done = subprocess.run([COURIER, *args], input=b"", capture_output=True, timeout=10)
    assert done.returncode == EX_USAGE, (done.returncode, done.stderr)
    assert done.stderr.strip(), "no message on stderr"
    assert done.stdout == b""


def test_bad_command_line_names_the_flag():
    done = subprocess.run([COURIER, "--max-active", "many"], input="", capture_output=True,
                          text=True, timeout=10)
    assert done.returncode != 0
    assert "max-active" in done.stderr


def config_from(args: list[str], cwd: Path | None = None) -> dict:
    """The `config` of the `initialize` answer of a courier started with `args`."""
    with Session(COURIER, args, cwd=cwd) as c:
        return c.initialize()["config"]


def test_every_command_line_option_reaches_the_config(tmp_path):
    root = tmp_path / "root"
    config = config_from([
        "--cache-dir", str(tmp_path / "cache"), "--memory-capacity", "2MiB", "--memory-after-purge", "1MiB",
        "--disk-capacity", "3MiB", "--max-active", "7", "--prioritization", "lifo", "--activation-delay", "2.5",
        "--completion-delay", "0.5", "--no-indicator", "--progress-interval", "0.25", "--download-root", str(root),
        "--allow-scheme", "ftp", "--allow-insecure-redirects", "--max-bytes", "10KiB", "--timeout", "60",
        "--connect-timeout", "5", "--low-speed-limit", "2KiB", "--low-speed-time", "15", "--ca-file", "/ca.pem",
        "--proxy", "http://127.0.0.1:9", "--max-memory-body", "1MiB", "--framing", "ndjson",
        "--max-message-bytes", "1MiB", "--log-level", "error",
        "--retries", "5", "--retry-delay", "0.25", "--retry-max-delay", "10", "--retry-max-time", "20",
        "--partial-capacity", "5MiB",
        "--max-download-rate", "8MiB",
    ])
    assert config == {
        "cacheDir": str(tmp_path / "cache"), "memoryCapacity": 2 << 20, "memoryAfterPurge": 1 << 20,
        "diskCapacity": 3 << 20, "maxActive": 7, "prioritization": "lifo", "activationDelay": 2.5,
        "completionDelay": 0.5, "indicatorEnabled": False, "progressInterval": 0.25, "downloadRoot": str(root),
        "allowScheme": ["ftp"], "allowInsecureRedirects": True, "maxBytes": 10 * 1024, "timeout": 60.0,
        "connectTimeout": 5.0, "lowSpeedLimit": 2048, "lowSpeedTime": 15, "caFile": "/ca.pem",
        "proxy": "http://127.0.0.1:9", "maxMemoryBody": 1 << 20, "framing": "ndjson", "maxMessageBytes": 1 << 20,
        "logLevel": "error",
        "retries": 5, "retryDelay": 0.25, "retryMaxDelay": 10.0, "retryMaxTime": 20.0,
        "partialCapacity": 5 << 20,
        "maxDownloadRate": 8 << 20,
    }


@pytest.mark.parametrize("args, expected", [
    (["--max-active=7"], {"maxActive": 7}),
    (["--max-active", "2", "--max-active=3"], {"maxActive": 3}),
    (["--max-active", "+5"], {"maxActive": 5}),
    (["--activation-delay=0x10"], {"activationDelay": 16.0}),
    (["--timeout", "1e2"], {"timeout": 100.0}),
    (["--memory-capacity=1MiB"], {"memoryCapacity": 1 << 20, "memoryAfterPurge": 629145}),
    (["--allow-scheme", "ftp", "--allow-scheme=file"], {"allowScheme": ["ftp", "file"]}),
    (["--no-indicator", "--no-indicator"], {"indicatorEnabled": False}),
    (["--proxy=http://u:p@127.0.0.1:9/?a=b"], {"proxy": "http://u:***@127.0.0.1:9/?a=b"}),
    (["--max-active", "5", "--"], {"maxActive": 5}),
    (["--cache-dir", "get"], {}),
], ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_command_line_forms(args, expected, tmp_path):
    config = config_from(args, cwd=tmp_path)
    assert {key: config[key] for key in expected} == expected
    if args == ["--cache-dir", "get"]:
        assert config["cacheDir"] == str(tmp_path / "get")


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "Unknown option '--bogus'"),
    (["--max-active"], "Missing value for '--max-active <max-active>'"),
    (["--cache-dir="], "Missing value for '--cache-dir <cache-dir>'"),
    (["--activation-delay", "-1"], "Missing value for '--activation-delay <activation-delay>'"),
    (["--max-active", " 5"], "The value ' 5' is invalid for '--max-active <max-active>'"),
    (["--max-active=x"], "The value 'x' is invalid for '--max-active <max-active>'"),
    (["--max-active", "0"], "--max-active must be 1 to 10000"),
    (["--max-active=-3"], "--max-active must be 1 to 10000"),
    (["--memory-capacity", "1MiB", "--memory-after-purge", "2MiB"],
     "--memory-after-purge must not exceed --memory-capacity"),
    (["--disk-capacity", "lots"], "The value 'lots' is invalid for '--disk-capacity <disk-capacity>': "
                                  "'lots' is not a size (examples: 1048576, 512KiB, 100MiB, 2GiB)"),
    (["--timeout", "nan"], "time-outs must be 0.001 to 31536000 seconds"),
    (["--low-speed-time", "86401"], "--low-speed-time must be 0 to 86400 seconds"),
    (["--completion-delay", "3601"], "delays must be 0 to 3600 seconds"),
    (["--download-root", "relative"], "--download-root must be an absolute path"),
    (["--prioritization", "random"], "--prioritization must be fifo or lifo"),
    (["--framing", "xml"], "--framing must be auto, lsp or ndjson"),
    (["--log-level", "loud"], "unknown --log-level 'loud'"),
    (["--no-indicator=true"], "The option '--no-indicator' does not take any value, but 'true' was specified."),
    (["-x"], "Unknown option '-x'"),
    (["--max-active", "5", "extra"], "Unexpected argument 'extra'"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_bad_command_line_says_what_is_wrong(args, message):
    done = subprocess.run([COURIER, *args], input="", capture_output=True, text=True, timeout=10)
    assert done.returncode == EX_USAGE, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"Error: {message}\n"), done.stderr
    assert "Usage: courier [<options>]" in done.stderr
    assert done.stdout == ""


def test_request_refused_with_rpc_error(c):
    with pytest.raises(RpcError) as raised:
        c.request("no/such/method")
    assert raised.value.code == -32601


def test_a_relative_cache_dir_is_taken_from_the_working_directory(origin, tmp_path):
    with Session(COURIER, ["--cache-dir", "rel/cache"], cwd=tmp_path) as c:
        assert c.initialize()["config"]["cacheDir"] == str(tmp_path / "rel" / "cache")
        assert c.fetch(origin.url("/cache?max-age=60"))["ok"]
    assert disk_tier.usage(tmp_path / "rel" / "cache")[1] == 1
