"""The demo's SMTP sink: a real SMTP server (aiosmtpd) on 127.0.0.1, in a process of its own,
that takes every email the demo's customers are sent and counts them by kind (their
`X-Recoup-Kind` header); nothing leaves the machine, nothing is stored.

A process of its own because aiosmtpd is pure Python and a month of emails keeps it busy: in
the demo's process it would take the interpreter from the worker (measured at 500 customers:
the run 10 s → 36 s in process). It prints its port on its first line, counts until its
stdin closes, then prints the counts as one JSON line.

aiosmtpd (with the rest of the `email` extra) is imported where it is used: without it the
demo runs as before and says that no email was sent.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from collections import Counter
from types import TracebackType
from typing import IO, Any

_KIND = re.compile(rb"^X-Recoup-Kind:\s*([a-z_]+)", re.MULTILINE | re.IGNORECASE)
HOST = "127.0.0.1"
START_TIMEOUT = 30.0  # seconds for the sink to say its port
STOP_TIMEOUT = 10.0


def email_extra_missing() -> str | None:
    """The module of the `email` extra (or aiosmtpd) this install lacks, or None."""
    import importlib.util

    for module in ("aiosmtpd", "aiosmtplib", "jinja2", "babel"):
        if importlib.util.find_spec(module) is None:
            return module
    return None


class _Counting:
    """aiosmtpd's handler: counts each message by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        found = _KIND.search(envelope.original_content or envelope.content or b"")
        kind = found.group(1).decode("ascii").lower() if found else "other"
        with self.lock:
            self.counts[kind] += 1
        return "250 2.0.0 taken by the demo's sink"


def serve(stdin: IO[str], stdout: IO[str]) -> None:
    """The sink's process: port out, counts until stdin closes, counts out."""
    from aiosmtpd.controller import Controller

    with socket.socket() as probe:  # a free port on the loopback
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    handler = _Counting()
    controller = Controller(handler, hostname=HOST, port=port)
    controller.start()
    try:
        stdout.write(f"{port}\n")
        stdout.flush()
        stdin.read()  # until the demo closes it
    finally:
        controller.stop()
    with handler.lock:
        stdout.write(json.dumps(dict(handler.counts)) + "\n")
    stdout.flush()


class MailSink:
    """`with MailSink() as sink:` serves SMTP at `sink.url` until the block ends; `counts`
    then holds the messages received by kind."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.port = 0
        self._process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"smtp://{HOST}:{self.port}?starttls=never"

    def __enter__(self) -> MailSink:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "recoup.demo.mail_sink"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.strip().isdigit():
            self._process.kill()
            raise RuntimeError(f"the demo's SMTP sink did not start: {line!r}")
        self.port = int(line)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> Counter[str]:
        """Stop the sink (once) and read its counts."""
        process, self._process = self._process, None
        if process is None:
            return self.counts
        try:
            out, _ = process.communicate(timeout=STOP_TIMEOUT)  # closes its stdin
            self.counts = Counter(json.loads(out.strip().splitlines()[-1]))
        except (subprocess.TimeoutExpired, ValueError, IndexError):
            process.kill()
            process.wait()
        return self.counts


if __name__ == "__main__":  # pragma: no cover (run as the sink's process)
    serve(sys.stdin, sys.stdout)


__all__ = ["MailSink", "email_extra_missing", "serve"]
