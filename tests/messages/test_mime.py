"""The bytes `compose` writes read back, through the standard library's own parser, as what
was given: subject, names, addresses, both parts, whatever the script; lines within RFC 5322's
limits; 7bit, quoted-printable or base64 as the standard library would choose."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from recoup.messages.composing import compose
from recoup.messages.mime import Composed
from recoup.messages.rendering import RenderedMessage

DATE = datetime(2026, 6, 23, 15, tzinfo=UTC)
# Words as templates write them: any script, no control characters (a subject is one line).
WORDS = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=120
).filter(lambda s: s.strip() == s and "  " not in s and s.strip())
BODY = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=600)
NAMES = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Zs"), blacklist_characters='<>"(),:;@[]\\'
    ),
    min_size=1,
    max_size=40,
)


def composed(subject: str, name: str, text: str, html: str, *, unsubscribe: bool) -> Composed:
    return compose(
        RenderedMessage(subject=subject, text=text, html=html),
        to=f"{name} <alex@customer.example>",
        sender="Acme Billing <billing@acme.example>",
        reply_to="support@acme.example",
        message_id="email-abc@acme.example",
        list_unsubscribe=(
            "https://acme.example/update-card?token=" + "t" * 180 + "&unsubscribe=1"
            if unsubscribe
            else None
        ),
        date=DATE,
        extra_headers=[("X-Recoup-Kind", "payment_failed")],
    )


def lines_of(data: bytes) -> list[bytes]:
    assert b"\n" not in data.replace(b"\r\n", b""), "every line ends in CRLF"
    return data.split(b"\r\n")


@settings(max_examples=150, deadline=None)
@given(WORDS, NAMES, BODY, BODY, st.booleans())
def test_what_is_composed_reads_back_as_given(
    subject: str, name: str, text: str, html: str, unsubscribe: bool
) -> None:
    message = composed(subject, name, text, html, unsubscribe=unsubscribe)
    assert message.data.isascii()
    assert all(len(line) <= 998 for line in lines_of(message.data))
    parsed = message.parsed()
    assert not parsed.defects
    assert parsed["Subject"] == subject
    assert parsed["To"].addresses[0].display_name == name
    assert parsed["To"].addresses[0].addr_spec == "alex@customer.example"
    assert (message.sender, message.recipient) == ("billing@acme.example", "alex@customer.example")
    assert parsed["Message-ID"] == message.message_id == "<email-abc@acme.example>"
    assert parsed["X-Recoup-Kind"] == "payment_failed"
    assert parsed.get_content_type() == "multipart/alternative"
    plain, rich = parsed.iter_parts()  # type: ignore[attr-defined]
    assert (plain.get_content_type(), rich.get_content_type()) == ("text/plain", "text/html")

    def ended(s: str) -> str:
        s = s.replace("\r\n", "\n").replace("\r", "\n")
        return s if s.endswith("\n") else s + "\n"

    assert plain.get_content().replace("\r\n", "\n") == ended(text)
    assert rich.get_content().replace("\r\n", "\n") == ended(html)
    if unsubscribe:  # one URL, never cut into encoded words (mail clients read it as is)
        assert parsed["List-Unsubscribe"].startswith("<https://acme.example/update-card?token=")
        assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_the_encoding_of_a_part_is_the_standard_librarys_choice() -> None:
    english = composed("Your payment", "Alex", "Short lines.\n", "<p>x</p>\n", unsubscribe=False)
    assert english.data.count(b"Content-Transfer-Encoding: 7bit") == 2
    french = composed(
        "Paiement", "Zoë", "Votre paiement de 19,99 € a échoué.\n", "<p>é</p>", unsubscribe=False
    )
    assert french.data.count(b"Content-Transfer-Encoding: quoted-printable") == 2
    assert b"=?utf-8?" in french.data  # the name, in RFC 2047 words
    japanese = composed(
        "お支払い",
        "アレックス",
        "お支払いができませんでした。" * 5,
        "<p>日本</p>",
        unsubscribe=False,
    )
    assert b"Content-Transfer-Encoding: base64" in japanese.data  # shorter than QP for CJK
    assert japanese.parsed()["Subject"] == "お支払い"


def test_a_long_subject_is_folded_at_spaces_and_reads_back_whole() -> None:
    subject = " ".join(["payment"] * 30)
    message = composed(subject, "Alex", "x\n", "y\n", unsubscribe=False)
    head = message.data.split(b"\r\n\r\n", 1)[0]
    assert all(len(line) <= 78 for line in head.split(b"\r\n") if b"token" not in line)
    assert message.parsed()["Subject"] == subject


def test_two_messages_never_share_a_boundary() -> None:
    one = composed("a", "b", "c\n", "d\n", unsubscribe=False).parsed().get_boundary()
    two = composed("a", "b", "c\n", "d\n", unsubscribe=False).parsed().get_boundary()
    assert one and two and one != two
