"""End-to-end tests of `courier get` through pipes: the files it makes and
their names, what it does with files already there, -o, -d, -i, the result
lines on stdout, the failures and the summary on stderr, and its exit
status. The terminal's side (the live display, Ctrl-C) is in
test_get_terminal.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import COURIER
from origin import pattern

USAGE = "Usage: courier get [<options>] <url> ..."
SUMMARY = re.compile(r"(?P<files>\d+) files?: (?P<counts>[^;]+); (?P<bytes>[\d.]+ (B|KiB|MiB)) downloaded in "
                     r"(?P<seconds>[\d.]+) s(?: \((?P<rate>[\d.]+ (B|KiB|MiB)/s)\))?(?:, (?P<cached>[\d.]+ (B|KiB|MiB)) from cache)?$")


def get(*args: str, cache: Path, cwd: Path | None = None, input: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([COURIER, "get", "--cache-dir", str(cache), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, input=input,
                          stdin=subprocess.DEVNULL if input is None else None)


def summary(done: subprocess.CompletedProcess) -> re.Match:
    """The closing summary: the last line of stderr."""
    last = done.stderr.splitlines()[-1] if done.stderr else ""
    match = SUMMARY.match(last)
    assert match, f"no summary at the end of stderr: {done.stderr!r}"
    return match


def failures(done: subprocess.CompletedProcess) -> list[str]:
    """stderr without its summary."""
    return done.stderr.splitlines()[:-1]


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "out"


# -- results, failures and the summary ------------------------------------------


def test_files_and_one_result_line_each_then_a_summary(origin, cache, out):
    sizes = [0, 1000, 70_000]
    urls = [origin.url(f"/bytes/{n}") for n in sizes]
    done = get("-d", str(out), *urls, cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(urls)
    for url, n in zip(urls, sizes):
        assert (out / str(n)).read_bytes() == pattern(n)
        [line] = [line for line in lines if line.startswith(url + " ")]
        assert f" -> {out}/{n} (" in line
    assert "\x1b" not in done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(str(n) for n in sizes)
    assert failures(done) == []
    total = summary(done)
    assert total["files"] == "3" and total["counts"] == "3 ok"
    assert total["bytes"] == "69.3 KiB" and total["rate"] and total["cached"] is None


def test_default_directory_is_the_current_one(origin, cache, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    url = origin.url("/bytes/300")
    done = get(url, cache=cache, cwd=work)
    assert done.returncode == 0, done.stderr
    assert (work / "300").read_bytes() == pattern(300)
    assert re.fullmatch(re.escape(f"{url} -> 300 (300 B, ") + r"\d+\.\d s\)\n", done.stdout), done.stdout


def test_a_404_fails_and_counts_as_failed(origin, cache, out):
    good, bad = origin.url("/bytes/10"), origin.url("/status/404")
    done = get("-d", str(out), good, bad, "ftp://example.org/x", cache=cache)
    assert done.returncode == 1
    assert done.stdout.startswith(good + " -> ")
    errors = failures(done)
    assert f"{bad}: http_status: the origin answered HTTP 404" in errors
    assert any(line.startswith("ftp://example.org/x: scheme_not_allowed: ") for line in errors)
    assert summary(done)["counts"] == "1 ok, 2 failed"
    assert sorted(p.name for p in out.iterdir()) == ["10"]


def test_cache_hits_are_shown_as_such_and_left_out_of_the_rate(origin, cache, tmp_path):
    url = origin.url("/cache?max-age=600&body=cached")
    first = get("-d", str(tmp_path / "a"), url, cache=cache)
    assert first.returncode == 0, first.stderr
    again = get("-d", str(tmp_path / "b"), url, cache=cache)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{url} -> {tmp_path}/b/cache (6 B, from cache)\n"
    total = summary(again)
    assert total["counts"] == "1 ok (1 from cache)"
    assert total["bytes"] == "0 B" and total["rate"] is None and total["cached"] == "6 B"
    assert (tmp_path / "b" / "cache").read_bytes() == b"cached"
    assert origin.hits("/cache") == 1


def test_a_revalidated_body_counts_as_the_caches_not_the_networks(origin, cache, tmp_path):
    url = origin.url("/cache?max-age=0&etag=v1&body=" + "r" * 5000)
    assert get("-d", str(tmp_path / "a"), url, cache=cache).returncode == 0
    again = get("-d", str(tmp_path / "b"), url, cache=cache)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{url} -> {tmp_path}/b/cache (4.9 KiB, revalidated)\n"
    total = summary(again)
    assert total["bytes"] == "0 B" and total["rate"] is None and total["cached"] == "4.9 KiB"
    assert origin.hits("/cache") == 2


def test_json_lines(origin, cache, out):
    urls = [origin.url("/bytes/123"), origin.url("/status/404")]
    done = get("--json", "-d", str(out), *urls, cache=cache)
    assert done.returncode == 1
    outcomes = {o["url"]: o for o in map(json.loads, done.stdout.splitlines())}
    assert set(outcomes) == set(urls)
    ok = outcomes[urls[0]]
    assert ok["ok"] is True and ok["size"] == 123 and ok["status"] == 200
    assert ok["path"] == str(out / "123") and ok["source"] == "network"
    failed = outcomes[urls[1]]
    assert failed["ok"] is False
    assert failed["error"]["code"] == "http_status" and failed["error"]["httpStatus"] == 404
    assert f"{urls[1]}: http_status: the origin answered HTTP 404" in failures(done)


def test_quiet_prints_results_and_failures_only(origin, cache, out):
    done = get("-q", "-d", str(out), "--retry-delay", "0.01", origin.url("/bytes/5"), origin.url("/status/500"),
               cache=cache)
    assert done.returncode == 1
    assert done.stdout.startswith(origin.url("/bytes/5") + " -> ")
    assert done.stderr == f"{origin.url('/status/500')}: http_status: the origin answered HTTP 500 (after 4 attempts)\n"


# -- names ------------------------------------------------------------------------


@pytest.mark.parametrize("path, name", [
    ("/files/my%20file.txt", "my file.txt"),
    ("/files/caf%C3%A9.txt", "café.txt"),
    ("/files/日本語.txt", "日本語.txt"),
    ("/files/caf%E9.txt", "caf%E9.txt"),
    ("/files/half%C3.bin", "half%C3.bin"),
    ("/files/100%25%20sure", "100% sure"),
    ("/files/a%2Fb", "a_b"),
    ("/files/a%5Cb", "a\\b"),
    ("/files/nul%00byte", "nul_byte"),
    ("/files/ctl%01%1b%7f%C2%85.bin", "ctl____.bin"),
    ("/files/%E2%80%AEfdp.exe", "_fdp.exe"),
    ("/files/dir/%2e%2e", "index.html"),
    ("/files/dir/%2e", "index.html"),
    ("/files/..data", "..data"),
    ("/files/dir/", "index.html"),
    ("/files/q?x=1&y=../2", "q"),
    ("/?only=query", "index.html"),
    ("/files/" + "n" * 300 + ".tar.gz", "n" * 193 + ".tar.gz"),
    ("/files/" + "é" * 150, "é" * 100),
], ids=lambda value: value[:40])
def test_names_come_from_the_url_made_safe(origin, cache, out, path, name):
    url = origin.url(path)
    done = get("-d", str(out), url, cache=cache)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.iterdir()] == [name]
    assert done.stdout.startswith(f"{url} -> {out}/{name} (")


def test_a_url_without_a_scheme_is_taken_as_http(origin, cache, out):
    bare = origin.url("/files/logo.png").removeprefix("http://")
    done = get("-d", str(out), bare, cache=cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"http://{bare} -> {out}/logo.png (")
    assert (out / "logo.png").read_bytes() == pattern(100, "/files/logo.png")


@pytest.mark.parametrize("disposition, name", [
    ('attachment; filename="report 2024.pdf"', "report 2024.pdf"),
    ("attachment; filename*=UTF-8''caf%C3%A9.txt; filename=\"cafe.txt\"", "café.txt"),
    ("attachment; filename=plain.bin", "plain.bin"),
    ('attachment; filename="../../etc/passwd"', "passwd"),
    ('attachment; filename="C:\\\\temp\\\\evil.bat"', "evil.bat"),
    ('attachment; filename="a\\"b.txt"', 'a"b.txt'),
    ('attachment; filename=".."', "served"),
    ("inline", "served"),
])
def test_remote_header_name_takes_content_disposition_made_safe(origin, cache, out, disposition, name):
    from urllib.parse import quote
    url = origin.url("/files/served?disposition=" + quote(disposition, safe=""))
    done = get("-J", "-d", str(out), url, cache=cache)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.iterdir()] == [name]


def test_remote_header_name_rerun_over_the_same_file_is_already_complete(origin, cache, out):
    # Given a file saved under the name its response gave
    url = origin.url("/files/served?disposition=" + "attachment%3B%20filename%3Dreport.pdf")
    assert get("-J", "-d", str(out), url, cache=cache).returncode == 0

    # When the same command runs again
    again = get("-J", "-d", str(out), url, cache=cache)

    # Then the file holds that body already: nothing is replaced, no copy is
    # made, and the download counts as already complete, not as a failure
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{url} -> {out}/report.pdf (already complete)\n"
    assert failures(again) == [] and summary(again)["counts"] == "0 ok, 1 already complete"
    assert [p.name for p in out.iterdir()] == ["report.pdf"]


def test_remote_header_name_over_a_different_file_fails_and_leaves_it(origin, cache, out):
    out.mkdir()
    (out / "report.pdf").write_bytes(b"mine")
    url = origin.url("/files/served?disposition=" + "attachment%3B%20filename%3Dreport.pdf")
    done = get("-J", "-d", str(out), url, cache=cache)
    assert done.returncode == 1
    assert failures(done) == [
        f"{url}: file_exists: {out}/report.pdf exists (--no-clobber skips it, --overwrite replaces it)"]
    assert [p.name for p in out.iterdir()] == ["report.pdf"]
    assert (out / "report.pdf").read_bytes() == b"mine"


def test_content_disposition_is_not_used_without_remote_header_name(origin, cache, out):
    url = origin.url("/files/served?disposition=attachment%3B%20filename%3Dother.txt")
    done = get("-d", str(out), url, cache=cache)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.iterdir()] == ["served"]


# -- -o and -d ----------------------------------------------------------------------


def test_o_saves_the_one_url_as_that_file(origin, cache, tmp_path):
    url = origin.url("/files/logo.png")
    done = get("-o", "mylogo.png", url, cache=cache, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mylogo.png").read_bytes() == pattern(100, "/files/logo.png")
    assert done.stdout.startswith(f"{url} -> mylogo.png (")

    deep = get("-o", "a/b/deep.png", url, cache=cache, cwd=tmp_path)
    assert deep.returncode == 0, deep.stderr
    assert (tmp_path / "a" / "b" / "deep.png").is_file()
    assert deep.stdout.startswith(f"{url} -> a/b/deep.png (")

    inside = get("-d", "out", "-o", "in.png", url, cache=cache, cwd=tmp_path)
    assert inside.returncode == 0, inside.stderr
    assert (tmp_path / "out" / "in.png").is_file()
    assert inside.stdout.startswith(f"{url} -> out/in.png (")


@pytest.mark.parametrize("args, message", [
    (["-o", "afile"], "give a URL, or -i FILE with URLs"),
    (["-o", "afile", "http://a/1", "http://a/2"], "-o names one file: give one URL (-d DIR saves several)"),
    (["-o", "afile", "-i", "-"], "-o names one file: give one URL (-d DIR saves several)"),
    (["-o", "dir/", "http://a/1"], "-o 'dir/' names a directory, not a file (-d DIR saves into a directory)"),
    (["-o", "-", "http://a/1"], "-o - (stdout) is not supported: give a file name"),
    (["-o", "x", "-J", "http://a/1"], "-o names the file: --remote-header-name does not apply"),
    (["--no-clobber", "--overwrite", "http://a/1"], "--no-clobber and --overwrite exclude each other"),
    (["-j", "0", "http://a/1"], "--jobs must be 1 to 10000"),
    (["-i", "/nonexistent/urls"], "cannot read /nonexistent/urls: No such file or directory"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_bad_command_lines_print_gets_usage(cache, tmp_path, args, message):
    done = get(*args, cache=cache, cwd=tmp_path)
    assert done.returncode == 64
    assert done.stderr.startswith(f"Error: {message}\n{USAGE}\n"), done.stderr
    assert "See 'courier get --help'" in done.stderr
    assert "courier [<options>]" not in done.stderr
    assert done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_output_directory_is_made_with_its_parents_or_the_reason_it_cannot_be_is_given(origin, cache, tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    done = get("-d", f"{deep}//", origin.url("/bytes/10"), cache=cache)
    assert done.returncode == 0, done.stderr
    assert (deep / "10").read_bytes() == pattern(10)
    assert f" -> {deep}/10 (" in done.stdout

    (tmp_path / "file").write_bytes(b"x")
    for directory in (tmp_path / "file" / "d", tmp_path / "file"):
        refused = get("-d", str(directory), origin.url("/bytes/10"), cache=cache)
        assert refused.returncode == 64
        assert refused.stderr.startswith(
            f"Error: cannot create the output directory {directory}: Not a directory\n{USAGE}\n"), refused.stderr


# -- -i ------------------------------------------------------------------------------


def test_i_reads_urls_from_stdin_and_from_a_file_after_the_command_lines(origin, cache, out, tmp_path):
    listed = [origin.url(f"/files/list-{n}.bin") for n in range(3)]
    text = f"# downloads\n\n  {listed[0]}  \r\n{listed[1].removeprefix('http://')}\n\t\n#{listed[2]}\n"
    first = origin.url("/files/first.bin")
    done = get("-d", str(out), first, "-i", "-", cache=cache, input=text)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["first.bin", "list-0.bin", "list-1.bin"]
    assert summary(done)["files"] == "3"

    file = tmp_path / "urls.txt"
    file.write_text(listed[2] + "\n")
    from_file = get("-d", str(out), "-i", str(file), cache=cache)
    assert from_file.returncode == 0, from_file.stderr
    assert (out / "list-2.bin").is_file()

    empty = get("-i", "-", cache=cache, input="# nothing\n\n")
    assert empty.returncode == 64
    assert empty.stderr.startswith(f"Error: no URL in stdin\n{USAGE}")


# -- files already there -----------------------------------------------------------


def start_get(*args: str, cache: Path) -> subprocess.Popen:
    return subprocess.Popen([COURIER, "get", "--cache-dir", str(cache), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)



def test_a_rerun_leaves_existing_files_alone_and_says_how_to_skip_or_replace_them(origin, cache, out):
    # Given files saved by a first run, one of them since edited by the user
    urls = [origin.url("/files/a.bin"), origin.url("/files/b.bin")]
    assert get("-d", str(out), *urls, cache=cache).returncode == 0
    (out / "a.bin").write_bytes(b"edited")
    asked = origin.total_hits()

    # When the same command runs again
    again = get("-d", str(out), *urls, cache=cache)

    # Then no copy is made, nothing is replaced, nothing is fetched; the
    # edited file fails saying what to do, the other is already complete
    assert again.returncode == 1
    assert sorted(p.name for p in out.iterdir()) == ["a.bin", "b.bin"]
    assert (out / "a.bin").read_bytes() == b"edited"
    assert (out / "b.bin").read_bytes() == pattern(100, "/files/b.bin")
    assert origin.total_hits() == asked
    assert failures(again) == [
        f"{urls[0]}: file_exists: {out}/a.bin exists (--no-clobber skips it, --overwrite replaces it)"]
    assert summary(again)["counts"] == "0 ok, 1 already complete, 1 failed"
    assert again.stdout == f"{urls[1]} -> {out}/b.bin (already complete)\n"


def test_no_clobber_skips_existing_files(origin, cache, out):
    out.mkdir()
    (out / "a.bin").write_bytes(b"mine")
    urls = [origin.url("/files/a.bin"), origin.url("/files/new.bin")]
    done = get("--no-clobber", "-d", str(out), *urls, cache=cache)
    assert done.returncode == 0, done.stderr
    assert (out / "a.bin").read_bytes() == b"mine"
    assert (out / "new.bin").read_bytes() == pattern(100, "/files/new.bin")
    assert f"{urls[0]} -> {out}/a.bin (exists, skipped)" in done.stdout.splitlines()
    assert origin.hits("/files/a.bin") == 0
    assert summary(done)["counts"] == "1 ok, 1 skipped"


def test_overwrite_replaces_existing_files(origin, cache, out):
    out.mkdir()
    (out / "a.bin").write_bytes(b"old")
    url = origin.url("/files/a.bin")
    done = get("--overwrite", "-d", str(out), url, cache=cache)
    assert done.returncode == 0, done.stderr
    assert (out / "a.bin").read_bytes() == pattern(100, "/files/a.bin")
    assert sorted(p.name for p in out.iterdir()) == ["a.bin"]


def test_two_urls_of_one_run_never_share_a_name(origin, cache, tmp_path):
    # Given two URLs that come to one name, the first held mid-way
    for flag in ("--no-clobber", "--overwrite", "--jobs=4"):
        held = f"{flag.strip('-')}/same.bin"
        urls = [origin.url(f"/hold/{held}?v=1"), origin.url(f"/hold/{held}?v=2")]
        out = tmp_path / flag.strip("-")
        run = start_get(flag, "-d", str(out), *urls, cache=cache)
        origin.wait_held(held)
        origin.release(held)
        stdout, stderr = run.communicate(timeout=60)
        # Then, whatever the flag, the second fails and the first is saved
        assert run.returncode == 1, stderr
        assert stderr.splitlines()[:-1] == [f"{urls[1]}: file_exists: another URL of this run is saved as {out}/same.bin"]
        assert stdout.startswith(f"{urls[0]} -> {out}/same.bin (")
        assert sorted(p.name for p in out.iterdir()) == ["same.bin"]


@pytest.mark.parametrize("flag, kept, line", [
    ([], b"the user's own file", "file_exists: {out}/report.bin exists (--no-clobber skips it, --overwrite replaces it)"),
    (["--no-clobber"], b"the user's own file", "{url} -> {out}/report.bin (exists, skipped)"),
    (["--overwrite"], None, "{url} -> {out}/report.bin ("),
])
def test_a_file_that_appears_during_the_download_is_replaced_only_with_overwrite(origin, cache, out, flag, kept, line):
    # Given a download under way into an empty directory
    out.mkdir()
    url = origin.url("/hold/report.bin?size=300000")
    run = start_get(*flag, "-d", str(out), url, cache=cache)
    origin.wait_held("report.bin")
    # When a file appears at its name before the body is complete
    (out / "report.bin").write_bytes(b"the user's own file")
    origin.release("report.bin")
    stdout, stderr = run.communicate(timeout=60)
    # Then only --overwrite replaces it, and no other file is made
    assert run.returncode == (1 if not flag else 0), stderr
    assert (out / "report.bin").read_bytes() == (kept or pattern(300000, "report.bin"))
    assert sorted(p.name for p in out.iterdir()) == ["report.bin"]
    assert line.format(out=out, url=url) in stdout + stderr


def test_two_runs_of_one_url_into_one_directory_leave_one_file(origin, tmp_path, out):
    # Given two runs fetching the same URL into one directory, both under way
    url = origin.url("/hold/data.bin?size=200000")
    runs = [start_get("-d", str(out), url, cache=tmp_path / f"cache-{n}") for n in range(2)]
    origin.wait_held("data.bin", count=2)
    # When both finish
    origin.release("data.bin")
    results = [run.communicate(timeout=60) for run in runs]
    # Then one saved the file and the other left it alone: it holds the
    # bytes the other fetched, so that one is already complete
    assert [run.returncode for run in runs] == [0, 0], [stderr for _, stderr in results]
    assert sorted(p.name for p in out.iterdir()) == ["data.bin"]
    assert (out / "data.bin").read_bytes() == pattern(200000, "data.bin")
    assert sorted(stdout.endswith(" (already complete)\n") for stdout, _ in results) == [False, True], results


def test_a_refused_url_leaves_the_urls_after_it_alone(origin, cache, out):
    # Given a URL the downloader refuses between two it fetches
    first, second = origin.url("/bytes/10"), origin.url("/bytes/20")
    # When they are fetched in one run
    done = get("-d", str(out), first, "http://[nonsense", second, cache=cache)
    # Then each line (in the order the downloads finished) names its own URL's file
    assert done.returncode == 1
    named = {line.split(" (")[0] for line in done.stdout.splitlines()}
    assert named == {f"{first} -> {out}/10", f"{second} -> {out}/20"}, done.stdout
    assert failures(done) == ["http://[nonsense: invalid_request: param 'url' is not a valid absolute URL"]
    assert sorted(p.name for p in out.iterdir()) == ["10", "20"]


def test_help_has_examples_and_names_the_flags():
    done = subprocess.run([COURIER, "get", "--help"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0
    assert "Examples:\n  courier get https://example.org/logo.png\n" in done.stdout
    for flag in ("-o, --output", "-d, --output-dir", "-i, --input-file", "-J, --remote-header-name",
                 "--no-clobber", "--overwrite", "-j, --jobs", "-q, --quiet", "--json"):
        assert flag in done.stdout, flag


def test_no_subcommand_still_serves_json_rpc(tmp_path):
    done = subprocess.run([COURIER, "--max-active", "8", "--cache-dir", str(tmp_path / "c")],
                          input='{"jsonrpc":"2.0","id":1,"method":"initialize"}\n', capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout.splitlines()[0])
    assert response["result"]["config"]["maxActive"] == 8
    assert done.stderr == ""


def test_help_mentions_get():
    done = subprocess.run([COURIER, "--help"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0
    assert "courier get" in done.stdout and "--max-active" in done.stdout
