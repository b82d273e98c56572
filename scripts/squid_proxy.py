#!/usr/bin/env python3
"""A Squid forward proxy on 127.0.0.1 with a cache of its own: the shared
caching proxy that several courier processes (on one machine or many) are
pointed at with ``--proxy``.

Importable::

    from squid_proxy import SquidProxy
    with SquidProxy() as squid:
        squid.url                 # "http://127.0.0.1:PORT", for courier --proxy
        squid.entries()           # the access log: [LogEntry(tag, status, method, url, ...)]
        squid.wait_entries(n)     # until n client requests are logged

or runnable: ``python3 scripts/squid_proxy.py [--user NAME --password PW]``
prints ``PORT <n>`` and serves until killed (or until its stdin, when it is a
pipe, is closed).

Squid gets a directory of its own (configuration, ``ufs`` cache, logs, pid
file), listens on a free port of 127.0.0.1, runs in the foreground (``-N``)
under a service name of its own (so its shared-memory segments never meet
another Squid's) and is stopped by its pid. Started as root, Squid switches
to an unprivileged user (``proxy``), which must be able to reach its
directory: that directory is then made under the system's temporary folder
and handed to that user, since pytest's temporary folders are private to root.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SquidProxy", "LogEntry", "binary", "version"]

CONF = """\
http_port 127.0.0.1:{port}
visible_hostname {name}
pid_filename {root}/squid.pid
{user}
cache_dir ufs {root}/cache 16 4 16
cache_mem 16 MB
maximum_object_size 64 MB
maximum_object_size_in_memory 4 MB
# Concurrent misses for one URL wait for a single fetch from the origin.
collapsed_forwarding on
logformat courier %ts.%03tu %Ss %>Hs %rm %ru %Sh %<a %{{Authorization}}>h
access_log stdio:{root}/access.log courier
strip_query_terms off
cache_log {root}/cache.log
cache_store_log none
logfile_rotate 0
coredump_dir {root}
netdb_filename none
pinger_enable off
icp_port 0
htcp_port 0
shutdown_lifetime 0 seconds
connect_timeout 5 seconds
refresh_pattern . 0 20% 4320
{auth}
# Only this machine may use the proxy; loopback origins are allowed (the
# stock configuration's "deny to_localhost" is left out on purpose).
acl loopback src 127.0.0.1/32
{access}
http_access deny all
"""

AUTH = """\
auth_param basic program {helper} {root}/passwd
auth_param basic children 2 startup=1 idle=1
auth_param basic realm courier-test-squid
acl authenticated proxy_auth REQUIRED
"""

_LOG_LINE = re.compile(r"^(\S+) (\S+) (\S+) (\S+) (\S+) (\S+) (\S+) ?(.*)$")


@dataclass(frozen=True)
class LogEntry:
    """One line of Squid's access log."""
    time: float
    tag: str            # TCP_MISS, TCP_MEM_HIT, TCP_REFRESH_UNMODIFIED, TCP_TUNNEL, TCP_DENIED, ...
    status: int         # the status Squid sent to the client (0: none)
    method: str
    url: str            # as Squid saw it (for CONNECT: host:port)
    hierarchy: str      # HIER_DIRECT (went to the origin), HIER_NONE (did not)
    server: str
    authorization: str  # the client's Authorization header, "-" when none

    @property
    def hit(self) -> bool:
        """Answered from Squid's cache (including a 304 it made itself)."""
        return "HIT" in self.tag

    @property
    def to_origin(self) -> bool:
        return self.hierarchy.startswith("HIER_DIRECT")


def binary() -> str | None:
    """The squid executable, if it is installed."""
    found = shutil.which("squid") or "/usr/sbin/squid"
    return found if os.path.exists(found) else None


def version() -> str | None:
    """Squid's version ("5.7"), if it is installed."""
    executable = binary()
    if executable is None:
        return None
    out = subprocess.run([executable, "-v"], capture_output=True, text=True, timeout=10).stdout
    match = re.search(r"Version (\S+)", out)
    return match.group(1) if match else None


def _auth_helper() -> str | None:
    for candidate in ("/usr/lib/squid/basic_ncsa_auth", "/usr/lib/squid3/basic_ncsa_auth",
                      "/usr/libexec/squid/basic_ncsa_auth"):
        if os.path.exists(candidate):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SquidProxy:
    """Squid on a free port of 127.0.0.1 with its own cache directory.

    ``credentials=(user, password)`` makes it a proxy that requires Basic
    proxy authentication (407 without it)."""

    def __init__(self, root: str | os.PathLike | None = None,
                 credentials: tuple[str, str] | None = None, start_timeout: float = 20):
        self._given_root = Path(root) if root is not None else None
        self.credentials = credentials
        self.start_timeout = start_timeout
        self.root: Path | None = None
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._owned_root = False
        self.name = ""

    # -- addresses -------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_with_credentials(self, user: str, password: str) -> str:
        return f"http://{user}:{password}@127.0.0.1:{self.port}"

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> "SquidProxy":
        executable = binary()
        if executable is None:
            raise RuntimeError("squid is not installed (scripts/setup installs it)")
        as_root = os.geteuid() == 0
        account = None
        if as_root:
            for name in ("proxy", "squid", "nobody"):
                try:
                    account = pwd.getpwnam(name)
                    break
                except KeyError:
                    continue
            if account is None:
                raise RuntimeError("no unprivileged account (proxy, squid, nobody) for Squid to run as")
        if self._given_root is not None and not as_root:
            self.root = self._given_root
            self.root.mkdir(parents=True, exist_ok=True)
        else:
            self.root = Path(tempfile.mkdtemp(prefix="courier-squid-"))
            self._owned_root = True
        self.port = free_port()
        self.name = f"courier{os.getpid()}x{self.port}"

        auth, access = "", "http_access allow loopback"
        if self.credentials is not None:
            helper = _auth_helper()
            if helper is None:
                raise RuntimeError("squid's basic_ncsa_auth helper is not installed")
            user, password = self.credentials
            hashed = subprocess.run(["openssl", "passwd", "-apr1", "-stdin"], input=password,
                                    capture_output=True, text=True, check=True, timeout=10).stdout.strip()
            (self.root / "passwd").write_text(f"{user}:{hashed}\n")
            auth = AUTH.format(helper=helper, root=self.root)
            access = "http_access allow loopback authenticated"
        (self.root / "squid.conf").write_text(CONF.format(
            port=self.port, name="courier-test-squid", root=self.root,
            user=f"cache_effective_user {account.pw_name}" if account else "",
            auth=auth, access=access))
        if account is not None:
            for path in [self.root, *self.root.rglob("*")]:
                os.chown(path, account.pw_uid, account.pw_gid)

        config = str(self.root / "squid.conf")
        # Creates the cache directory's swap folders, then exits.
        made = subprocess.run([executable, "-N", "-z", "-n", self.name, "-f", config],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        if made.returncode != 0:
            self._remove_files()
            raise RuntimeError(f"squid -z failed: {made.stderr.decode(errors='replace')[-2000:]}")
        self.process = subprocess.Popen([executable, "-N", "-n", self.name, "-f", config],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        self._stderr = bytearray()
        self._stderr_thread = threading.Thread(target=self._drain, daemon=True)
        self._stderr_thread.start()
        self._wait_listening()
        return self

    def _drain(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for chunk in iter(lambda: self.process.stderr.read1(65536), b""):
            self._stderr += chunk

    def _wait_listening(self) -> None:
        """Until Squid accepts a connection on its port (bounded). Its "Accepting
        HTTP Socket connections" line is logged a moment before it listens, so
        the port itself is asked; the probe sends no request and is left out of
        ``entries()``."""
        assert self.process is not None and self.root is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                pass
            if self.process.poll() is not None:
                tail = self.cache_log()[-3000:] or self._stderr.decode(errors="replace")[-3000:]
                self._remove_files()
                raise RuntimeError(f"squid exited with {self.process.returncode}: {tail}")
            if time.monotonic() > deadline:
                tail = self.cache_log()[-3000:]
                self.stop()
                raise RuntimeError(f"squid did not listen within {self.start_timeout} s: {tail}")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stops Squid by its pid (it exits at once: shutdown_lifetime 0) and
        removes its directory and shared-memory segments."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.process is not None and self.process.stderr is not None:
            self._stderr_thread.join(timeout=2)
            self.process.stderr.close()
        self._remove_files()

    def _remove_files(self) -> None:
        if self.name:
            shm = Path("/dev/shm")
            if shm.is_dir():
                for segment in shm.glob(f"{self.name}-*"):
                    try:
                        segment.unlink()
                    except OSError:
                        pass
        if self._owned_root and self.root is not None and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "SquidProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # -- the access log ----------------------------------------------------------

    def entries(self) -> list[LogEntry]:
        """Client requests logged so far (lines of connections that sent no
        request, e.g. a probe of the port, are left out)."""
        assert self.root is not None
        path = self.root / "access.log"
        if not path.exists():
            return []
        found = []
        for line in path.read_text(errors="replace").splitlines():
            match = _LOG_LINE.match(line)
            if not match or match.group(2).startswith("NONE"):
                continue
            when, tag, status, method, url, hierarchy, server, authorization = match.groups()
            found.append(LogEntry(float(when), tag, int(status), method, url,
                                  hierarchy.split("/", 1)[0], server, authorization))
        return found

    def wait_entries(self, count: int, prefix: str = "", timeout: float = 10) -> list[LogEntry]:
        """The entries whose URL starts with ``prefix``, once there are at least
        ``count`` (Squid logs a transaction as it ends, which can be just after
        the client has its response)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.entries() if e.url.startswith(prefix)]
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} access-log entries for {prefix!r} not logged within "
                                   f"{timeout} s: {found}")
            time.sleep(0.01)

    def cache_log(self) -> str:
        assert self.root is not None
        path = self.root / "cache.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _watch_stdin(stop) -> None:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):
        return
    if not stat.S_ISFIFO(mode):
        return

    def watch():
        while sys.stdin.buffer.read(65536):
            pass
        stop()

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--user", help="require Basic proxy authentication as this user")
    parser.add_argument("--password", help="the password of --user")
    args = parser.parse_args(argv)
    credentials = (args.user, args.password or "") if args.user else None
    done = threading.Event()
    with SquidProxy(credentials=credentials) as squid:
        print(f"PORT {squid.port}", flush=True)
        print(f"squid {version()} at {squid.url}, files in {squid.root}", file=sys.stderr, flush=True)
        _watch_stdin(done.set)
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        try:
            done.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
