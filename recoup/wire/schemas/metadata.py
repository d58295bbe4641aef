"""`metadata` in request bodies (`recoup.jobs.metadata` holds the rules): a flat object of
string keys to string values, stated in the document as it is checked."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from recoup.errors import InvalidInput
from recoup.jobs.metadata import KEY_PATTERN, MAX_KEYS, MAX_VALUE_LENGTH, check_key
from recoup.wire.schemas.common import Text
from recoup.wire.schemas.stated import Stated


def _key(value: str) -> str:
    try:
        return check_key(value)
    except InvalidInput as exc:
        raise ValueError(exc.allowed) from None


def _at_most_keys(value: dict[str, object]) -> dict[str, object]:
    if len(value) > MAX_KEYS:
        raise ValueError(f"expected at most {MAX_KEYS} keys, got {len(value)}")
    return value


_KEY = Annotated[str, AfterValidator(_key)]
_VALUE = Annotated[Text, StringConstraints(max_length=MAX_VALUE_LENGTH)]
_NAMES = Stated(propertyNames={"pattern": KEY_PATTERN}, maxProperties=MAX_KEYS)

# A new job's or schedule's metadata.
MetadataIn = Annotated[dict[_KEY, _VALUE], AfterValidator(_at_most_keys), _NAMES]
# A PATCH's: a key set to null is removed (the merged object is checked against the limits).
MetadataPatch = Annotated[dict[_KEY, _VALUE | None], AfterValidator(_at_most_keys), _NAMES]

METADATA_DESCRIPTION = (
    f"Your own references: up to {MAX_KEYS} keys of 1–40 characters (A–Z a–z 0–9 _ - . :), "
    f"string values of up to {MAX_VALUE_LENGTH} characters. Returned as given; filter lists "
    "with `metadata[key]=value`."
)
PATCH_METADATA_DESCRIPTION = (
    "Merged into the stored metadata: a key set to a string is set, a key set to null removed, "
    "keys not named kept."
)

__all__ = ["METADATA_DESCRIPTION", "PATCH_METADATA_DESCRIPTION", "MetadataIn", "MetadataPatch"]
