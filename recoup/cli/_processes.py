"""`--processes N` of `recoup serve` and `recoup worker`: N copies of the command in processes
forked from this one (before it opens a store, so no connection or thread is shared), which
share the store and, for `serve`, the port (`SO_REUSEPORT`: the kernel spreads the connections
over the processes' own listening sockets), and stop together.

SIGTERM or SIGINT to this process is passed to every copy as SIGTERM, and each stops as the
command alone does (the server finishes its requests, the worker its attempts and
completions); this process exits once all have, with the first failing copy's exit code. A copy
that exits on its own (a crash, a lost database) stops the others too: a process manager then
restarts the whole, rather than the host running on fewer processes than it was given. Invalid
input in a copy is the command's one line on stderr and exit 2, as without `--processes`.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType

from recoup.errors import InvalidInput, RecoupError

log = logging.getLogger("recoup.processes")

EXIT_USAGE = 2  # as `recoup.cli.main` answers invalid input
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def run_processes(
    count: int, run: Callable[[int], None], *, name: str, each_until_done: bool = False
) -> int:
    """Run `run(0)` … `run(count - 1)`, each in a forked process, until all have exited; the
    first non-zero exit code, else 0. A process that exits stops the others, unless
    `each_until_done` and it exited 0 (each ends on its own: `recoup worker --stop-when-idle`)."""
    fork = multiprocessing.get_context("fork")
    children = [
        fork.Process(target=_child, args=(run, number), name=f"{name}-{number}")
        for number in range(count)
    ]
    stopping = False

    def stop_all(signum: int | None = None, frame: FrameType | None = None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.pid is not None and child.exitcode is None:
                os.kill(child.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop_all) for sig in STOP_SIGNALS}
    try:
        # Blocked while forking: a copy would otherwise take a SIGTERM sent before it reset
        # the handlers this process's `stop_all` came with, and run that instead of stopping.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            for child in children:
                child.start()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        log.info("%s: %d processes (%s)", name, count, ", ".join(str(c.pid) for c in children))
        running = list(children)
        while running:
            multiprocessing.connection.wait([child.sentinel for child in running])
            ended = [child for child in running if child.exitcode is not None]
            for child in ended:
                running.remove(child)
                if each_until_done and child.exitcode == 0:
                    continue
                if not stopping:
                    log.warning(
                        "%s exited (code %s): stopping the others", child.name, child.exitcode
                    )
                    stop_all()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # A copy told to stop before its command installed its own handlers dies of SIGTERM's
    # default effect; it had started nothing (both commands install them before any work),
    # so it stopped as asked.
    codes = [
        0 if child.exitcode == -signal.SIGTERM and stopping else child.exitcode or 0
        for child in children
    ]
    return next((code for code in codes if code != 0), 0)


def _child(run: Callable[[int], None], number: int) -> None:
    # The parent's handlers came with the fork, and its mask with SIGTERM and SIGINT blocked:
    # the command installs its own handlers (uvicorn's, the worker's) before it starts any
    # work; until then a signal has its default effect.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # one sent meanwhile stops it now
    try:
        run(number)
    except InvalidInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except RecoupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound (not listening) to `host:port` with `SO_REUSEPORT`, held by the parent
    so that the port (a free one, for port 0) is the copies' own: each binds its listening
    socket to the same address (`shared_listener`)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InvalidInput("--port", port, f"a port this host can listen on ({exc})") from None
    return sock


def shared_listener(host: str, port: int) -> socket.socket:
    """A listening socket of one copy on the port the parent reserved (`reserve_port`)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


__all__ = ["reserve_port", "run_processes", "shared_listener"]
