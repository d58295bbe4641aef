"""A PostgreSQL server of the run's own, so the chaos may restart it: a throwaway cluster
(`initdb` in a temporary directory, trust on loopback, a free port), started with `pg_ctl`,
restarted in immediate mode (the server stops without a checkpoint, as in a crash, and
replays its WAL on the way up) and removed at the end.

The machine's shared server is never restarted: other runs and tests use it. The binaries are
found under `RECOUP_PG_BINDIR`, else by `pg_config --bindir`, else in Debian's
`/usr/lib/postgresql/<version>/bin`. PostgreSQL refuses to run as root: as root, every
command runs as the `postgres` user (`runuser`), which owns the directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BINDIR_ENV = "RECOUP_PG_BINDIR"
START_TIMEOUT = 60  # seconds pg_ctl waits for the server to accept connections


class NoServerBinaries(RuntimeError):
    """PostgreSQL's server binaries (initdb, pg_ctl) are not on this machine."""


def find_bindir() -> Path:
    """Where initdb and pg_ctl are (see the module docstring), or NoServerBinaries."""
    candidates: list[Path] = []
    if os.environ.get(BINDIR_ENV):
        candidates.append(Path(os.environ[BINDIR_ENV]))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    raise NoServerBinaries(
        f"no initdb and pg_ctl found (set {BINDIR_ENV}, or install PostgreSQL's server)"
    )


@dataclass(frozen=True, kw_only=True)
class OwnServer:
    """A running server of the run's own: `url` reaches its `postgres` database."""

    bindir: Path
    data: Path
    port: int
    as_postgres: bool  # commands run as the postgres user (the harness is root)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def restart(self, down_for: float) -> float:
        """Stop the server as a crash would (immediate mode), leave it down `down_for`
        seconds (every connection refused meanwhile) and start it again; → the seconds it
        was away."""
        began = time.monotonic()
        self._pg_ctl("stop", "-m", "immediate")
        time.sleep(down_for)
        self._pg_ctl("start")
        return time.monotonic() - began

    def _pg_ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        command = [str(self.bindir / "pg_ctl"), "-D", str(self.data / "pgdata"), "-w"]
        command += ["-t", str(START_TIMEOUT), "-l", str(self.data / "server.log")]
        command += ["-o", options, *args]
        _run(command, self.as_postgres)


@contextmanager
def own_server() -> Iterator[OwnServer]:
    """A fresh cluster, started; stopped and removed afterwards."""
    bindir = find_bindir()
    as_postgres = os.geteuid() == 0
    data = Path(tempfile.mkdtemp(prefix="recoup-chaos-pg-"))
    try:
        if as_postgres:
            shutil.chown(data, user="postgres", group="postgres")
        initdb = [str(bindir / "initdb"), "-D", str(data / "pgdata"), "-U", "postgres"]
        _run([*initdb, "-A", "trust", "--no-sync", "-E", "UTF8"], as_postgres)
        server = OwnServer(bindir=bindir, data=data, port=_free_port(), as_postgres=as_postgres)
        server._pg_ctl("start")
        try:
            yield server
        finally:
            # A restart that failed halfway leaves nothing to stop; the data goes regardless.
            with contextlib.suppress(RuntimeError):
                server._pg_ctl("stop", "-m", "fast")
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _run(command: list[str], as_postgres: bool) -> None:
    program = Path(command[0]).name
    if as_postgres:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-500:]
        raise RuntimeError(f"{program} failed ({done.returncode}): {output}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


__all__ = ["BINDIR_ENV", "NoServerBinaries", "OwnServer", "find_bindir", "own_server"]
