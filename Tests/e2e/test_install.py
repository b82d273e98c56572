"""scripts/install: the binary, the shell completions, the manual page and
the documentation it puts under a prefix, and what it tells the user about
PATH and MANPATH. The test installs the binary under test (--binary), which
spares a release build.

The completions are loaded in bash, zsh and fish and asked, as each shell
asks when Tab is pressed, for flags, paths and values; the manual page is
rendered by man and checked against every flag the binary has."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import COURIER

REPO = Path(__file__).resolve().parents[2]
LOG_LEVELS = sorted(["trace", "debug", "info", "notice", "warning", "error", "critical"])


def install(prefix: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(REPO / "scripts" / "install"), "--prefix", str(prefix), "--binary", COURIER],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    prefix = tmp_path_factory.mktemp("prefix")
    path = ":".join(p for p in os.environ["PATH"].split(":") if p != str(prefix / "bin"))
    env = {name: value for name, value in os.environ.items() if name != "MANPATH"}
    return prefix, install(prefix, env={**env, "PATH": path})


@pytest.fixture(scope="module")
def prefix(installed) -> Path:
    return installed[0]


@pytest.fixture
def files(tmp_path) -> Path:
    """A directory to complete paths in: two files and a directory."""
    files = tmp_path / "files"
    (files / "downloads").mkdir(parents=True)
    (files / "notes.txt").write_text("x")
    (files / "urls.list").write_text("x")
    return files


def test_installs_the_binary(prefix):
    installed = prefix / "bin" / "courier"
    assert os.access(installed, os.X_OK)
    assert installed.read_bytes() == Path(COURIER).read_bytes()
    done = subprocess.run([str(installed), "--version"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0 and done.stdout.strip()


def test_installs_the_documentation_the_manual_page_names(prefix):
    docs = prefix / "share" / "doc" / "courier"
    assert (docs / "protocol.md").read_text() == (REPO / "protocol" / "README.md").read_text()
    for name in ("openrpc.json", "security.md", "scaling.md"):
        assert (docs / name).read_bytes() == (REPO / "protocol" / name).read_bytes()
    page = (prefix / "share/man/man1/courier.1").read_text()
    assert "@DOCDIR@" not in page
    assert f".Pa {docs}/protocol.md" in page


def test_says_what_to_add_to_path_when_its_bin_is_not_there(installed):
    prefix, done = installed
    assert f'install: {prefix}/bin is not on PATH; add it: export PATH="{prefix}/bin:$PATH"' in done.stderr
    # man looks beside each bin directory on PATH, so once that is done it
    # finds the page without MANPATH
    assert "MANPATH" not in done.stderr


def test_says_nothing_about_path_when_its_bin_is_there_and_names_manpath_when_man_would_not_look(tmp_path):
    prefix = tmp_path / "prefix"
    env = {**os.environ, "PATH": f"{prefix}/bin:{os.environ['PATH']}", "MANPATH": "/usr/share/man"}
    done = install(prefix, env=env)
    assert "PATH; add it" not in done.stderr
    assert (f'install: man does not look in {prefix}/share/man; add it: '
            f'export MANPATH="{prefix}/share/man:$MANPATH"') in done.stderr


# -- the manual page ----------------------------------------------------------------


def dump_help(*command: str) -> dict:
    done = subprocess.run([COURIER, *command, "--experimental-dump-help"], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["command"]


def options(command: dict) -> list[dict]:
    """The options (not flags, not positionals) of a command from its dumped help."""
    return [a for a in command["arguments"] if a["kind"] == "option"]


def default_of(argument: dict) -> str | None:
    """The default the binary's help gives: ArgumentParser's, or the one the
    help text names."""
    if argument.get("defaultValue") is not None:
        return argument["defaultValue"]
    named = re.search(r"\(default: ([^;)]+)", argument.get("abstract") or "")
    return named.group(1) if named else None


@pytest.fixture(scope="module")
def page(prefix) -> str:
    """The manual page as man renders it, one paragraph a line."""
    if shutil.which("man") is None or shutil.which("groff") is None:
        pytest.skip("man and groff are not installed")
    done = subprocess.run(["man", "-l", str(prefix / "share/man/man1/courier.1")], capture_output=True, text=True,
                          timeout=20, env={**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "1000",
                                           "LC_ALL": "C.UTF-8"})
    assert done.returncode == 0, done.stderr
    return re.sub("[\u2010\u2212]", "-", done.stdout)


def paragraph(page: str, flag: str) -> str:
    """The rendered entry of `--flag`: its heading line and the line after."""
    lines = page.splitlines()
    for index, line in enumerate(lines):
        if re.match(r"\s+(-\w, )?" + re.escape(flag) + r"\b", line):
            return " ".join(lines[index:index + 2])
    raise AssertionError(f"{flag} is not in the manual page")


def test_manual_page_renders_without_warnings(prefix):
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    # Every warning but a long path that cannot be broken across lines.
    done = subprocess.run(["groff", "-mandoc", "-ww", "-Wbreak", "-z", str(prefix / "share/man/man1/courier.1")],
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_manual_page_synopsis_names_the_server_and_get(page):
    synopsis = page[page.index("SYNOPSIS"):page.index("DESCRIPTION")]
    assert [line.strip() for line in synopsis.splitlines()[1:] if line.strip()] == [
        "courier [options]",
        "courier get [options] url ...",
        "courier get [options] -i file",
        "courier get [options] -o file url",
        "courier --help | --version",
    ]
    assert "subcommand" not in page


@pytest.mark.parametrize("command", [[], ["get"]], ids=["courier", "courier get"])
def test_manual_page_gives_every_option_with_its_default(page, command):
    for argument in options(dump_help(*command)):
        if argument["kind"] != "option" or not argument.get("names"):
            continue
        flag = "--" + [n["name"] for n in argument["names"] if n["kind"] == "long"][0]
        entry = paragraph(page, flag)
        assert "Default:" in entry, f"{flag} has no default in the manual page: {entry}"
        expected = default_of(argument)
        if expected is None:
            continue
        given = entry.split("Default:", 1)[1].strip().rstrip(".")
        if re.fullmatch(r"[\d.]+", expected):
            assert float(re.match(r"[\d.]+", given).group(0).rstrip(".")) == float(expected), (flag, given)
        else:
            assert given.startswith(expected), (flag, given, expected)


def test_manual_page_has_examples_and_names_no_page_that_is_not_installed(page):
    examples = page[page.index("EXAMPLES"):]
    assert "courier get -o logo.png https://example.org/logo.png" in examples
    assert '"method":"download"' in examples and "| courier" in examples
    assert re.findall(r"\b[\w.-]+\(\d\)", page.replace("COURIER(1)", "")) == []
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "GET", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES"):
        assert re.search(rf"^{heading}$", page, re.M), heading


# -- completions ----------------------------------------------------------------------


def bash_complete(prefix: Path, line: str, cwd: Path) -> list[str]:
    """What bash offers for `line` (ending where Tab is pressed), as
    bash-completion calls the function `complete -p` names."""
    script = prefix / "share/bash-completion/completions/courier"
    probe = ('source "$1"; spec=$(complete -p courier); function=${spec##*-F }; function=${function%% *}; '
             'COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$COMP_LINE"; '
             '[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=(""); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
             '"$function" courier "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"; '
             'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", probe, "_", str(script), line], capture_output=True, text=True,
                          timeout=10, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return sorted(set(filter(None, done.stdout.splitlines())))


ZSH_CAPTURE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=''"
zpty -w z "fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -d ${(q)4}"
zpty -w z "cd ${(q)2}"
zpty -w z 'compadd() { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi; local -a hits; builtin compadd -A hits "$@"; (( $#hits )) && print -rl -- $hits >> '${(q)3}'; builtin compadd "$@" }'
zpty -w z "comppostfuncs=(exit)"
zpty -w z "bindkey '^I' complete-word"
zpty -w z "$5"$'\t'
while zpty -r z line; do :; done
"""


@pytest.fixture(scope="module")
def zsh_dump(prefix, tmp_path_factory) -> Path:
    """compinit's dump of the completion functions, made once: later shells
    start from it at once."""
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed (scripts/setup installs it)")
    dump = tmp_path_factory.mktemp("zsh") / "zcompdump"
    done = subprocess.run(["zsh", "-f", "-c", 'fpath=($1 $fpath); autoload -Uz compinit; compinit -u -d $2', "dump",
                           str(prefix / "share/zsh/site-functions"), str(dump)], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and dump.exists(), done.stderr
    return dump


def zsh_complete(prefix: Path, line: str, cwd: Path, tmp_path: Path, dump: Path) -> list[str]:
    """What zsh's completion system offers for `line` when Tab is pressed,
    in an interactive zsh on a pseudo-terminal (every match `compadd` adds
    is written to a file)."""
    out = tmp_path / "zsh.out"
    out.unlink(missing_ok=True)
    done = subprocess.run(["zsh", "-f", "-c", ZSH_CAPTURE, "capture", str(prefix / "share/zsh/site-functions"),
                           str(cwd), str(out), str(dump), line], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return sorted(set(out.read_text().split("\n")) - {""}) if out.exists() else []


def fish_complete(prefix: Path, line: str, cwd: Path) -> list[str]:
    """What fish offers for `line` (`complete -C`), descriptions left out."""
    script = prefix / "share/fish/vendor_completions.d/courier.fish"
    done = subprocess.run(["fish", "--no-config", "-c", f"source {script}; complete -C {_fish_quote(line)}"],
                          capture_output=True, text=True, timeout=10, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return sorted({entry.split("\t")[0].rstrip("/") for entry in done.stdout.splitlines() if entry})


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


CASES = [
    ("courier get -o ", ["downloads", "notes.txt", "urls.list"]),
    ("courier get -i u", ["urls.list"]),
    ("courier get -d ", ["downloads"]),
    ("courier get --output-dir d", ["downloads"]),
    ("courier --cache-dir ", ["downloads"]),
    ("courier --download-root ", ["downloads"]),
    ("courier --ca-file n", ["notes.txt"]),
    ("courier get --ca-file ", ["downloads", "notes.txt", "urls.list"]),
    ("courier --log-level ", LOG_LEVELS),
    ("courier get --log-level w", ["warning"]),
    ("courier --prioritization ", ["fifo", "lifo"]),
    ("courier --framing ", ["auto", "lsp", "ndjson"]),
]


@pytest.mark.parametrize("line, expected", CASES, ids=[case[0] for case in CASES])
def test_bash_completes_paths_and_values(prefix, files, line, expected):
    assert bash_complete(prefix, line, files) == expected


@pytest.mark.parametrize("line, expected", CASES, ids=[case[0] for case in CASES])
def test_zsh_completes_paths_and_values(prefix, files, tmp_path, zsh_dump, line, expected):
    assert zsh_complete(prefix, line, files, tmp_path, zsh_dump) == expected


@pytest.mark.parametrize("line, expected", CASES, ids=[case[0] for case in CASES])
def test_fish_completes_paths_and_values(prefix, files, line, expected):
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (scripts/setup installs it)")
    assert fish_complete(prefix, line, files) == expected


def test_bash_loads_the_completion_and_completes_flags(prefix, files):
    script = prefix / "share/bash-completion/completions/courier"
    done = subprocess.run(["bash", "-c", f"source {script}; complete -p courier"], capture_output=True, text=True,
                          timeout=10)
    assert done.stdout.strip() == "complete -o filenames -F _courier courier"
    assert "--output-dir" in bash_complete(prefix, "courier get --out", files)
    assert bash_complete(prefix, "courier get --limit", files) == ["--limit-rate"]
    assert {"--max-active", "--framing"} <= set(bash_complete(prefix, "courier --", files))


def test_fish_completes_flags_of_both_commands(prefix, files):
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (scripts/setup installs it)")
    assert {"--output-dir", "--no-clobber", "--overwrite", "--limit-rate"} <= set(
        fish_complete(prefix, "courier get --", files))
    assert "--max-active" in fish_complete(prefix, "courier --", files)
