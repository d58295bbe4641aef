"""The SMTP channel against a real SMTP server (aiosmtpd on 127.0.0.1): accepted, refused at
RCPT (permanent: a bounce), deferred (transient) and unreachable (transient); and the SMTP
URLs it reads, the password never shown in an error."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from typing import Any

import pytest

from recoup.errors import InvalidInput
from recoup.messages.channel import (
    RecipientRefused,
    SendFailed,
    SmtpChannel,
    parse_smtp_url,
    redact_smtp_url,
)
from recoup.messages.mime import Composed
from tests.support_smtp import SmtpSink, free_port, smtp_sink  # noqa: F401  (the fixture)


def message(to: str = "ada@example.com") -> Composed:
    msg = EmailMessage()
    msg["From"] = "Acme Billing <billing@acme.example>"
    msg["To"] = to
    msg["Subject"] = "Your payment failed"
    msg["Message-ID"] = "<k1@acme.example>"
    msg.set_content("Please update your card.")
    return Composed.of(msg)


def send(url: str, msg: Composed) -> str:
    return asyncio.run(SmtpChannel(parse_smtp_url(url), timeout=5).send(msg)).reply


def test_an_accepted_message_reaches_the_server_whole(smtp_sink: SmtpSink) -> None:  # noqa: F811
    reply = send(smtp_sink.url, message())
    assert "queued" in reply
    (got,) = smtp_sink.received
    assert got.recipients == ["ada@example.com"] and got.sender == "billing@acme.example"
    assert got.message_id == "<k1@acme.example>"
    assert got.part("plain").strip() == "Please update your card."


def test_a_recipient_refused_at_rcpt_is_a_bounce(smtp_sink: SmtpSink) -> None:  # noqa: F811
    smtp_sink.refuse.add("gone@example.com")
    with pytest.raises(RecipientRefused) as caught:
        send(smtp_sink.url, message("gone@example.com"))
    assert caught.value.reply.startswith("550") and smtp_sink.received == []


def test_a_deferral_and_an_unreachable_server_are_transient(smtp_sink: SmtpSink) -> None:  # noqa: F811
    smtp_sink.tempfail = 1
    with pytest.raises(SendFailed, match="451"):
        send(smtp_sink.url, message())
    send(smtp_sink.url, message())  # the next try is accepted
    assert len(smtp_sink.received) == 1
    with pytest.raises(SendFailed):
        send(f"smtp://u:pw@127.0.0.1:{free_port()}?starttls=never", message())


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("smtp://mail.example", "smtp://mail.example:587"),
        ("smtps://u:p%40ss@mail.example", "smtps://u:…@mail.example:465"),
        (
            "smtp://u:pw@mail.example:2525?starttls=require",
            "smtp://u:…@mail.example:2525?starttls=require",
        ),
    ],
)
def test_smtp_urls_are_read_with_their_defaults(url: str, shown: str) -> None:
    server = parse_smtp_url(url)
    assert server.redacted() == shown
    assert "pw" not in repr(server)


def test_the_password_is_percent_decoded() -> None:
    assert parse_smtp_url("smtps://u:p%40ss@mail.example").password == "p@ss"


@pytest.mark.parametrize(
    "url",
    [
        "http://u:Secr3tPw@mail.example",
        "smtp://u:Secr3tPw@",
        "smtp://u:Secr3tPw@mail.example:99999",
        "smtp://u:Secr3tPw@mail.example/path",
        "smtp://u:Secr3tPw@mail.example?starttls=sometimes",
        "smtp://u:Secr3tPw@mail.example?tls=1",
        "smtps://u:Secr3tPw@mail.example?starttls=require",
    ],
)
def test_a_bad_smtp_url_names_the_field_without_the_password(url: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_smtp_url(url)
    assert caught.value.field == "smtp_url"
    assert "Secr3tPw" not in str(caught.value) and "Secr3tPw" not in str(caught.value.value)
    assert "Secr3tPw" not in redact_smtp_url(url)


class CountingSink(SmtpSink):
    """The test server, counting NOOPs and the connections that MAIL came on."""

    def __init__(self, port: int) -> None:
        super().__init__(port=port)
        self.noops = 0
        self.peers: list[object] = []

    async def handle_NOOP(self, server: Any, session: Any, envelope: Any, arg: str) -> str:
        self.noops += 1
        return "250 OK"

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        self.peers.append(session.peer)
        envelope.mail_from = address
        return "250 OK"


@pytest.mark.parametrize(("check_after", "noops"), [(60.0, 0), (0.0, 2)])
def test_a_connection_given_back_a_moment_ago_is_reused_without_a_noop(
    check_after: float, noops: int
) -> None:
    from aiosmtpd.controller import Controller

    sink = CountingSink(free_port())
    controller = Controller(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        channel = SmtpChannel(parse_smtp_url(sink.url), timeout=5, check_after=check_after)

        async def three() -> None:
            for _ in range(3):
                await channel.send(message())

        asyncio.run(three())
    finally:
        controller.stop()
    assert len(sink.received) == 3
    assert len(set(sink.peers)) == 1  # one connection for the three
    assert sink.noops == noops  # checked only after waiting longer than check_after
