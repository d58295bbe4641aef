"""QStash's `Upstash-Signature`: the claims QStash sets, checked with PyJWT (which the `qstash`
SDK's `Receiver` uses); the keys derived from a tenant's secrets through a rotation; and the
delivery mode stored with the target without changing the rows of ordinary jobs."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime

import jwt
import pytest

from recoup.jobs.model import HttpTarget
from recoup.jobs.qstash_signing import derived_key, qstash_keys, upstash_signature
from recoup.storage.job_rows import target_to_dict
from recoup.storage.row_decoding import target_from_dict

SENT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OLD = "whsec_" + base64.b64encode(b"o" * 24).decode()
NEW = "whsec_" + base64.b64encode(b"n" * 24).decode()


def test_the_jwt_carries_qstash_claims_for_the_exact_body_and_url() -> None:
    key = derived_key(OLD)
    token = upstash_signature(key=key, url="https://x.io/hook", body="héllo", sent_at=SENT)
    claims = jwt.decode(
        token,
        key,
        algorithms=["HS256"],
        issuer="Upstash",
        options={"verify_exp": False, "verify_nbf": False},
    )
    issued = int(SENT.timestamp())
    assert claims["sub"] == "https://x.io/hook"
    assert (claims["iat"], claims["nbf"], claims["exp"]) == (issued, issued, issued + 300)
    assert claims["jti"].startswith("jwt_")
    digest = base64.urlsafe_b64encode(hashlib.sha256("héllo".encode()).digest()).decode()
    assert claims["body"] == digest
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, derived_key(NEW), algorithms=["HS256"], options={"verify_exp": False})


def test_keys_are_derived_and_a_rotation_keeps_signing_with_the_replaced_key() -> None:
    assert derived_key(OLD) != derived_key(NEW)
    assert derived_key(OLD).startswith("sig_") and OLD.removeprefix("whsec_") not in derived_key(
        OLD
    )
    settled = qstash_keys((OLD,))
    assert settled.current == settled.next == derived_key(OLD)
    overlap = qstash_keys((NEW, OLD))  # the current secret first, then the replaced one
    assert (overlap.current, overlap.next) == (derived_key(OLD), derived_key(NEW))


def test_ordinary_targets_are_stored_as_before_and_qstash_ones_keep_their_mode() -> None:
    plain = HttpTarget(url="https://x.io/hook")
    assert "delivery" not in target_to_dict(plain)
    assert target_from_dict(target_to_dict(plain)) == plain
    qstash = HttpTarget(url="https://x.io/hook", body="b", delivery="qstash")
    assert target_from_dict(target_to_dict(qstash)) == qstash
