"""A real SMTP server for the tests (aiosmtpd's `Controller` on 127.0.0.1, in a thread of its
own), keeping every message it accepts, parsed, with its envelope; addresses in `refuse` are
answered 550 at RCPT (a bounce), `tempfail` answers the next N DATA commands 451, and
`on_accept` runs between taking a message and answering 250."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest


@dataclass(frozen=True)
class Received:
    sender: str
    recipients: list[str]
    message: EmailMessage

    @property
    def message_id(self) -> str:
        return str(self.message["Message-ID"])

    def part(self, subtype: str) -> str:
        """The text of the `text/<subtype>` part."""
        for part in self.message.walk():
            if part.get_content_type() == f"text/{subtype}":
                return str(part.get_content())
        raise AssertionError(f"no text/{subtype} part")


@dataclass
class SmtpSink:
    host: str = "127.0.0.1"
    port: int = 0
    received: list[Received] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    tempfail: int = 0
    # Called with each message taken, before the server answers 250 (a test kills the sender
    # there: the message is accepted, the sender never hears it).
    on_accept: Callable[[Received], None] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"smtp://{self.host}:{self.port}?starttls=never"

    # aiosmtpd's handler hooks

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: Any
    ) -> str:
        if address.lower() in self.refuse:
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            if self.tempfail > 0:
                self.tempfail -= 1
                return "451 4.3.0 try again later"
            parsed = message_from_bytes(envelope.content, policy=policy.default)
            assert isinstance(parsed, EmailMessage)
            received = Received(envelope.mail_from, list(envelope.rcpt_tos), parsed)
            self.received.append(received)
        if self.on_accept is not None:
            self.on_accept(received)
        return "250 2.0.0 queued as sink"

    def kinds(self) -> list[str]:
        """The `X-Recoup-Kind` of each message received, in order."""
        return [str(r.message["X-Recoup-Kind"]) for r in self.received]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    from aiosmtpd.controller import Controller

    sink = SmtpSink(port=free_port())
    controller = Controller(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()
