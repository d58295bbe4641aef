"""uvicorn's HTTP protocols with their own 400 in problem+json: a request the HTTP parser
refuses before the app sees it (a control byte in a header value such as `Idempotency-Key`,
a malformed request line) gets the API's one error shape, not uvicorn's plain text.

`protocol_class()` is what `uvicorn.Config(http=...)` takes: the httptools protocol when
httptools is installed (uvicorn's own choice, `http="auto"`), else h11's."""

from __future__ import annotations

import json
from typing import Any

from recoup.api.problems import PROBLEM_MEDIA_TYPE, TYPE_BASE

MALFORMED_DETAIL = (
    "the request is not valid HTTP/1.1 (a header name or value with a control character, "
    "such as a control byte in Idempotency-Key, or a malformed request line)"
)


def malformed_request_bytes(default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """The whole 400 response, written before the connection is closed."""
    body = json.dumps(
        {
            "type": TYPE_BASE + "malformed-request",
            "title": "Bad Request",
            "status": 400,
            "detail": MALFORMED_DETAIL,
            "errors": [],
        }
    ).encode("ascii")
    lines = [b"HTTP/1.1 400 Bad Request\r\n"]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines += [
        b"content-type: " + PROBLEM_MEDIA_TYPE.encode("ascii") + b"\r\n",
        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
        b"connection: close\r\n\r\n",
        body,
    ]
    return b"".join(lines)


def protocol_class() -> type[Any]:
    """The HTTP protocol class uvicorn would pick, answering its parser's 400 in problem+json."""
    base: type[Any]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = HttpToolsProtocol
    except ImportError:  # httptools is optional (uvicorn[standard])
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol

    class ProblemHttpProtocol(base):  # type: ignore[misc]
        def send_400_response(self, msg: str) -> None:
            self.transport.write(malformed_request_bytes(self.server_state.default_headers))
            self.transport.close()

    return ProblemHttpProtocol


__all__ = ["MALFORMED_DETAIL", "malformed_request_bytes", "protocol_class"]
