"""What the /v1 models share: strict bodies (no NUL, no lone surrogate), targets, retry
policies, health."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ModelWrapValidatorHandler,
    NaiveDatetime,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType
from typing_extensions import TypeAliasType

from recoup.errors import InvalidInput
from recoup.jobs.model import (
    BODILESS_METHODS,
    CONTROL_CHARACTER,
    HTTP_METHODS,
    BackoffPolicy,
    HttpMethod,
    HttpTarget,
    Target,
    control_character_message,
)
from recoup.jobs.target_checks import MAX_HEADER_NAME, MAX_HEADER_VALUE
from recoup.wire import SURROGATE_MESSAGE
from recoup.wire.schemas.patterns import (
    CRON_FORMAT,
    HEADER_NAME,
    HEADER_VALUE,
    HTTP_URL,
    INSTANT,
    LOCAL_DATE_TIME,
    NO_NUL,
    POLICY_FORMAT,
    PRINTABLE,
    PRINTABLE_NO_AT,
    RESERVED_HEADER,
)
from recoup.wire.schemas.stated import Stated, StatedAs


class ExactlyOne(InvalidInput):
    """Fields of which exactly one must be given: the problem names each."""

    def __init__(self, *fields: str) -> None:
        self.fields = fields
        names = " and ".join(fields) if len(fields) == 2 else ", ".join(fields)
        super().__init__(fields[0], None, f"expected exactly one of {names}")


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # JSON can carry them; UTF-8 cannot


def _storable(value: str) -> str:
    """Refuse what no store can hold, by field, on every backend alike: NUL (PostgreSQL text
    cannot hold it) and lone UTF-16 surrogates (a JSON body may carry `\\ud800`, which Python
    decodes into a str that no UTF-8 encoder, SQLite's, PostgreSQL's or ours, can encode)."""
    if "\x00" in value:
        raise ValueError("expected no NUL (\\x00) characters")
    if _LONE_SURROGATE.search(value):
        raise ValueError(SURROGATE_MESSAGE)
    return value


NON_FINITE_MESSAGE = (
    "expected finite numbers only: JSON has no NaN or Infinity (and 1e400 overflows to "
    "Infinity); send such a value as a string"
)


def _storable_inside(value: JsonValue) -> JsonValue:
    """`_storable` through a JSON value (strings, keys, nested arrays and objects), and no
    non-finite number: Python's JSON reader takes `NaN`, `Infinity` and `1e400`, which RFC 8259
    excludes and neither backend's JSON type can hold, so they are refused here, naming the
    field, rather than failing in the database (a 503 on SQLite, the driver's text on
    PostgreSQL)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(NON_FINITE_MESSAGE)
    if isinstance(value, str):
        _storable(value)
    elif isinstance(value, list):
        for item in value:
            _storable_inside(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key)
            _storable_inside(item)
    return value


_HTTP_URL = re.compile(HTTP_URL)
_URL_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")  # as `recoup.jobs.target_checks` says


def _http_url(value: str) -> str:
    """The URL of something Recoup calls (a target, a charge endpoint, an event receiver),
    refused unless it matches `HTTP_URL`, with the reason where one character is it."""
    _storable(value)
    if _HTTP_URL.fullmatch(value):
        return value
    found = _URL_FORBIDDEN.search(value)
    if found is not None:
        raise ValueError(
            f"expected a URL without spaces or control characters (found {found.group()!r} "
            f"at {found.start()}; percent-encode it)"
        )
    raise ValueError(
        "expected an http:// or https:// URL: a host name in ASCII (punycode for international "
        "names), an IPv4 address or a bracketed IPv6 address, then an optional port 0–65535"
    )


_INSTANT = re.compile(INSTANT)
_LOCAL_DATE_TIME = re.compile(LOCAL_DATE_TIME)


def _instant_text(value: object) -> object:
    """An instant's JSON text before pydantic parses it: RFC 3339 in the years it may take (no
    Unix timestamps, which pydantic would take too and the document does not allow)."""
    if not isinstance(value, str) or not _INSTANT.match(value):
        raise ValueError(
            "expected an RFC 3339 date-time with seconds and an offset, written in the years "
            "1971–8999 (instants fall in 1970–9000 UTC), such as 2026-01-31T09:00:00Z"
        )
    return value


def _local_text(value: object) -> object:
    if not isinstance(value, str) or not _LOCAL_DATE_TIME.fullmatch(value):
        raise ValueError(
            "expected a wall-clock date-time without an offset, such as 2026-01-31T09:00"
        )
    return value


# An instant from a client (`run_at`, `failed_at`, a test clock's `to`).
Instant = Annotated[AwareDatetime, BeforeValidator(_instant_text), Stated(pattern=INSTANT)]
# A wall-clock reading (an anchor's `local`): not RFC 3339's `date-time`, which has an offset.
LocalDateTime = Annotated[
    NaiveDatetime, BeforeValidator(_local_text), Stated(format=None, pattern=LOCAL_DATE_TIME)
]


def _integral(value: object) -> object:
    """JSON Schema's `integer` is any number with no fractional part, `1999.0` too; strings and
    fractions stay refused (StrictInt)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Numbers and flags as JSON types them, never from a string: `"60"` for 60 is a 422 naming the
# field, not a guess (pydantic's lax mode would take it). A number may be written as an integer.
Number = StrictFloat
Integer = Annotated[StrictInt, BeforeValidator(_integral)]
Flag = StrictBool

# Every string an API body carries.
Text = Annotated[str, AfterValidator(_storable), Stated(pattern=NO_NUL)]


def _printable_name(value: str) -> str:
    """A name is shown by terminals and logs (`recoup jobs list`): no control character
    (`recoup.jobs.model.check_printable`, which the scheduler runs too)."""
    _storable(value)
    found = CONTROL_CHARACTER.search(value)
    if found is not None:
        raise ValueError(control_character_message(found.group(), found.start()))
    return value


# A job's or a schedule's name: no '@' either (the scheduler refuses it, naming `name`), since
# `{schedule}@{instant}` names the occurrences of schedules; no control character.
Name = Annotated[str, AfterValidator(_printable_name), Stated(pattern=PRINTABLE_NO_AT)]
# A job's group: printed as a name is (the scheduler refuses a control character in it).
Group = Annotated[str, AfterValidator(_storable), Stated(pattern=PRINTABLE)]
# Text a parser of its own checks, stated by a format that names the language.
Cron = Annotated[Text, Stated(format=CRON_FORMAT)]
PolicyToml = Annotated[Text, Stated(format=POLICY_FORMAT)]
# Where Recoup sends requests.
OutboundUrl = Annotated[str, AfterValidator(_http_url), Stated(pattern=HTTP_URL)]
# A target's header fields, as `recoup.jobs.target_checks.check_headers` (which the scheduler
# runs on every target) refuses any other: an RFC 9110 token not reserved by Recoup, and a
# value of visible ASCII.
Headers = Annotated[
    dict[
        Annotated[Text, Field(max_length=MAX_HEADER_NAME)],
        Annotated[
            str,
            AfterValidator(_storable),
            Stated(pattern=HEADER_VALUE),
            Field(max_length=MAX_HEADER_VALUE),
        ],
    ],
    Stated(propertyNames={"pattern": HEADER_NAME, "not": {"pattern": RESERVED_HEADER}}),
]
# What `_storable_inside` accepts, as the document states it: any JSON value whose strings and
# object keys are `Text`. Only stated (`StatedAs`), never checked against by the code; mypy
# cannot resolve this recursive alias (it takes it as a cycle), hence the ignores.
_NO_NUL_KEYS = Stated(propertyNames={"pattern": NO_NUL})
StorableJson = TypeAliasType(  # type: ignore[misc]
    "StorableJson",
    list["StorableJson"]  # type: ignore[misc]
    | Annotated[dict[Text, "StorableJson"], _NO_NUL_KEYS]  # type: ignore[misc]
    | Text
    | bool
    | int
    | float
    | None,
)


# A timeout's floor: a millisecond. Below a microsecond a duration rounds to zero, which no
# store takes (CHECK timeout_s > 0); anything shorter than a millisecond is a typo anyway.
MIN_TIMEOUT_SECONDS = 0.001


# The pydantic error type of a rule between fields (`StrictModel.rules_between_fields`).
BETWEEN_FIELDS = "between_fields"
_BUILT_IN_ERRORS = frozenset(get_args(ErrorType))


def _again(error: ErrorDetails) -> InitErrorDetails:
    """A reported error as one to raise again: pydantic rebuilds its own types by name, a
    custom type (a nested model's rule between fields) needs its message given back."""
    kind = error["type"]
    if kind not in _BUILT_IN_ERRORS:
        custom = PydanticCustomError(kind, error["msg"])
        return InitErrorDetails(type=custom, loc=error["loc"], input=error["input"])
    again = InitErrorDetails(type=kind, loc=error["loc"], input=error["input"])
    if "ctx" in error:
        again["ctx"] = error["ctx"]
    return again


class StrictModel(BaseModel):
    """A request body: an unknown or misspelt field is an error naming it.

    Rules between fields (exactly one of two, a field that needs another) are checked on the
    body as sent, beside pydantic's checks of each field, and reported with them: a body with a
    bad `timeout_seconds` and neither `run_at` nor `delay_seconds` hears of both at once."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # Groups of fields of which exactly one must be given (present and not null).
    exactly_one: ClassVar[tuple[tuple[str, ...], ...]] = ()

    @classmethod
    def rules_between_fields(cls, data: dict[str, Any]) -> list[tuple[str, str]]:
        """(field, what is expected) for each rule between fields that `data` breaks."""
        broken: list[tuple[str, str]] = []
        for group in cls.exactly_one:
            if sum(data.get(name) is not None for name in group) != 1:
                message = ExactlyOne(*group).allowed
                broken += [(name, message) for name in group]
        return broken

    @model_validator(mode="wrap")
    @classmethod
    def _with_rules_between_fields(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        broken = [
            InitErrorDetails(
                type=PydanticCustomError(BETWEEN_FIELDS, message),
                loc=(name,),
                input=data.get(name),
            )
            for name, message in (cls.rules_between_fields(data) if isinstance(data, dict) else [])
        ]
        try:
            model = handler(data)
        except ValidationError as exc:
            if not broken:
                raise
            errors = [_again(error) for error in exc.errors()]
            raise ValidationError.from_exception_data(exc.title, [*errors, *broken]) from None
        if broken:
            raise ValidationError.from_exception_data(cls.__name__, broken)
        return model


class TargetIn(StrictModel):
    """An HTTP request to make; HEAD and OPTIONS carry no body (`recoup.jobs.model`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {
                    "properties": {
                        "method": {"enum": [m for m in HTTP_METHODS if m not in BODILESS_METHODS]}
                    }
                },
                {"properties": {"body": {"type": "null"}}},
            ]
        }
    )

    url: OutboundUrl = Field(min_length=1, max_length=2048, description="http:// or https:// URL.")
    method: HttpMethod = "POST"  # the jobs layer's set, so both APIs accept the same methods
    headers: Headers = Field(
        default_factory=dict,
        max_length=50,
        description=(
            "Names are RFC 9110 tokens, except those Recoup sets itself (Host, Content-Length, "
            "Transfer-Encoding, Connection, Idempotency-Key, webhook-*, recoup-*); values are "
            "visible ASCII with inner spaces or tabs."
        ),
    )
    body: Annotated[JsonValue, AfterValidator(_storable_inside), StatedAs(StorableJson)] = Field(
        default=None, description="A JSON value, or a string sent as is."
    )

    def to_target(self) -> HttpTarget:
        return HttpTarget(
            url=self.url, method=self.method, headers=dict(self.headers), body=self.body
        )


class RetryIn(StrictModel):
    """How a job is retried. `max_backoff_seconds` must be at least `min_backoff_seconds`
    (defaults included), a rule between two fields that JSON Schema cannot state."""

    max_attempts: Integer = Field(
        default=5, ge=1, le=100, description="Every attempt, the first too."
    )
    # At least 0.1 s: a zero backoff retries at once, which is no backoff at all.
    min_backoff_seconds: Number = Field(default=1.0, ge=0.1, le=7 * 86_400)
    max_backoff_seconds: Number = Field(default=3600.0, ge=0.1, le=7 * 86_400)

    def to_policy(self) -> BackoffPolicy:
        return BackoffPolicy(
            max_attempts=self.max_attempts,
            min_backoff=timedelta(seconds=self.min_backoff_seconds),
            max_backoff=timedelta(seconds=self.max_backoff_seconds),
        )


class TargetOut(BaseModel):
    kind: Literal["http", "python"]
    url: str | None = None
    method: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    body: JsonValue = None
    handler: str | None = None

    @classmethod
    def of(cls, target: Target) -> TargetOut:
        if isinstance(target, HttpTarget):
            return cls(
                kind="http",
                url=target.url,
                method=target.method,
                headers=dict(target.headers),
                body=target.body,
            )
        return cls(kind="python", handler=target.handler)


class RetryOut(BaseModel):
    max_attempts: int
    min_backoff_seconds: float
    max_backoff_seconds: float

    @classmethod
    def of(cls, policy: BackoffPolicy) -> RetryOut:
        return cls(
            max_attempts=policy.max_attempts,
            min_backoff_seconds=policy.min_backoff.total_seconds(),
            max_backoff_seconds=policy.max_backoff.total_seconds(),
        )


class Health(BaseModel):
    status: Literal["ok"]


class TenantOut(BaseModel):
    """Whose the bearer token is: what `recoup --url` prints and checks `--tenant` against."""

    id: str = Field(description="The tenant the token acts for (its name).")


__all__ = [
    "MIN_TIMEOUT_SECONDS",
    "Cron",
    "ExactlyOne",
    "Flag",
    "Group",
    "Health",
    "Instant",
    "Integer",
    "LocalDateTime",
    "Name",
    "Number",
    "OutboundUrl",
    "PolicyToml",
    "RetryIn",
    "RetryOut",
    "StrictModel",
    "TargetIn",
    "TargetOut",
    "TenantOut",
    "Text",
]
