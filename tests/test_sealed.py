"""Secrets at rest: sealing round-trips, rotation, a foreign key refused, and where the key
comes from (the environment, or a 0600 key file beside a SQLite database)."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recoup.errors import ConfigError
from recoup.sealed import (
    KEY_ENV,
    NoSecretBox,
    SecretBox,
    SecretKeyMissing,
    SecretUnreadable,
    is_sealed,
    new_key,
    secret_box_for,
)

KEY_A, KEY_B = new_key(), new_key()


@given(st.text(max_size=300))
def test_a_sealed_secret_opens_to_itself_and_does_not_contain_it(secret: str) -> None:
    box = SecretBox([KEY_A])
    stored = box.seal(secret)
    assert is_sealed(stored)
    assert box.open(stored) == secret
    if len(secret) >= 4:
        assert secret not in stored


def test_the_same_secret_seals_differently_each_time() -> None:
    box = SecretBox([KEY_A])
    assert box.seal("sk_test_123") != box.seal("sk_test_123")


def test_rotation_opens_old_values_and_reseals_them_with_the_new_key() -> None:
    old = SecretBox([KEY_A]).seal("sk_test_rotate")
    both = SecretBox([KEY_B, KEY_A])
    assert both.open(old) == "sk_test_rotate"
    resealed = both.reseal(old)
    assert SecretBox([KEY_B]).open(resealed) == "sk_test_rotate"
    with pytest.raises(SecretUnreadable):
        SecretBox([KEY_A]).open(resealed)


def test_a_value_sealed_with_another_key_is_refused_without_showing_it() -> None:
    stored = SecretBox([KEY_A]).seal("sk_live_secret")
    with pytest.raises(SecretUnreadable) as caught:
        SecretBox([KEY_B]).open(stored)
    assert "sk_live_secret" not in str(caught.value)


def test_plain_text_stored_before_sealing_is_read_and_sealed_on_reseal() -> None:
    box = SecretBox([KEY_A])
    assert box.open("whsec_legacy") == "whsec_legacy"
    assert is_sealed(box.reseal("whsec_legacy"))


def test_a_malformed_key_names_its_position_not_its_value() -> None:
    with pytest.raises(ConfigError, match=r"key 2 of 2") as caught:
        SecretBox([KEY_A, "not-a-key"])
    assert "not-a-key" not in str(caught.value)
    assert KEY_A not in repr(SecretBox([KEY_A]))


def test_the_environment_key_wins_and_lists_keys_newest_first(tmp_path: Path) -> None:
    db = str(tmp_path / "recoup.db")
    box = secret_box_for(db, {KEY_ENV: f"{KEY_B}, {KEY_A}"})
    assert SecretBox([KEY_B]).open(box.seal("x")) == "x"
    assert box.open(SecretBox([KEY_A]).seal("y")) == "y"
    assert not (tmp_path / "recoup.db.key").exists()


def test_a_sqlite_file_gets_a_key_file_of_mode_0600_made_once(tmp_path: Path) -> None:
    db = str(tmp_path / "recoup.db")
    first = secret_box_for(db, {})
    path = tmp_path / "recoup.db.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = secret_box_for(db, {})
    assert again.open(first.seal("sk_test_kept")) == "sk_test_kept"
    assert list(tmp_path.iterdir()) == [path]  # no draft left behind


def test_processes_starting_together_keep_one_key_file(tmp_path: Path) -> None:
    db = str(tmp_path / "recoup.db")
    boxes: list[object] = []
    start = threading.Barrier(8)

    def make() -> None:
        start.wait()
        boxes.append(secret_box_for(db, {}))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sealed = SecretBox([(tmp_path / "recoup.db.key").read_text().strip()]).seal("one")
    assert all(b.open(sealed) == "one" for b in boxes)  # type: ignore[attr-defined]


def test_postgresql_without_a_key_says_how_to_give_one() -> None:
    box = secret_box_for(None, {})
    assert isinstance(box, NoSecretBox)
    with pytest.raises(SecretKeyMissing, match=KEY_ENV):
        box.seal("sk_test_1")
    with pytest.raises(SecretKeyMissing, match="new-key"):
        box.open("sealed:v1:abc")
