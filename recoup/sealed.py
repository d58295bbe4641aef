"""Secrets at rest: provider keys (a tenant's Stripe API key, its Stripe webhook secret)
sealed with a key that is never in the database, so that a dump of the database alone reveals
no secret.

Sealing is `cryptography`'s Fernet (AES-128-CBC with HMAC-SHA256, a random IV per value,
authenticated: a changed or foreign value fails to open rather than decrypting to garbage).
A stored value reads `sealed:v1:<Fernet token>`.

Where the key comes from (`secret_box_for`, called by the edges, which read the environment):

1. `RECOUP_SECRET_KEY`: one key, or several separated by commas, newest first. Values are
   sealed with the first and opened with any, so a key is rotated by putting the new one in
   front, running `recoup secrets rotate` (which seals every stored secret again with it),
   then dropping the old one.
2. Else, for a SQLite file, a key file beside it (`recoup.db` → `recoup.db.key`), created with
   mode 0600 on first use: the embedded default needs no setup. Back it up apart from the
   database: without it, the stored secrets cannot be read (set them again).
3. Else (PostgreSQL, or `:memory:`) there is no key, and storing or reading a secret fails
   with a message saying to set `RECOUP_SECRET_KEY` (`recoup secrets new-key` makes one).

Threat model: an attacker with the database (a dump, a backup, a read-only replica, SQL
injection that reads) learns no secret; one with the database and the key, or with the
running process, learns them all. The key is read once per process and never logged.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from recoup.errors import ConfigError, RecoupError

PREFIX = "sealed:v1:"
KEY_ENV = "RECOUP_SECRET_KEY"
KEY_FILE_SUFFIX = ".key"


class SecretKeyMissing(RecoupError):
    """A secret must be sealed or opened, and this process has no key."""

    http_status = 503  # the server cannot do it until it is given a key

    def __init__(self, why: str) -> None:
        super().__init__(
            f"no secret key: {why}; set {KEY_ENV} (make one with `recoup secrets new-key`)"
        )


class SecretUnreadable(RecoupError):
    """A stored secret does not open with the keys given (another key sealed it)."""

    http_status = 503


def new_key() -> str:
    """A fresh key, as `RECOUP_SECRET_KEY` takes it (url-safe base64 of 32 random bytes)."""
    return Fernet.generate_key().decode("ascii")


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


class SecretBox:
    """Seals and opens secrets with a list of keys, the first one current."""

    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise ConfigError(KEY_ENV, "", "expected at least one key")
        fernets = []
        for index, key in enumerate(keys):
            try:
                fernets.append(Fernet(key.strip().encode("ascii")))
            except (ValueError, UnicodeEncodeError):
                # The value itself is a secret: say which one is wrong, never what it is.
                raise ConfigError(
                    KEY_ENV,
                    f"key {index + 1} of {len(keys)}",
                    "expected url-safe base64 of 32 bytes (`recoup secrets new-key`)",
                ) from None
        self._fernet = MultiFernet(fernets)

    def __repr__(self) -> str:
        return "SecretBox(<keys hidden>)"

    def seal(self, secret: str) -> str:
        return PREFIX + self._fernet.encrypt(secret.encode("utf-8")).decode("ascii")

    def open(self, stored: str) -> str:
        """The secret of a stored value. A value stored before sealing existed (plain text)
        is returned as it is: `recoup secrets rotate` seals those too."""
        if not is_sealed(stored):
            return stored
        try:
            return self._fernet.decrypt(stored.removeprefix(PREFIX).encode("ascii")).decode()
        except (InvalidToken, UnicodeError):
            raise SecretUnreadable(
                "a stored secret does not open with the keys in use (was it sealed with"
                f" another {KEY_ENV} or key file?); set the secret again"
            ) from None

    def reseal(self, stored: str) -> str:
        """The same secret sealed with the current key (plain text sealed for the first
        time)."""
        return self.seal(self.open(stored))


class NoSecretBox:
    """The box of a process without a key: every use says how to give it one."""

    def __init__(self, why: str) -> None:
        self._why = why

    def __repr__(self) -> str:
        return "NoSecretBox()"

    def seal(self, secret: str) -> str:
        raise SecretKeyMissing(self._why)

    def open(self, stored: str) -> str:
        raise SecretKeyMissing(self._why)

    def reseal(self, stored: str) -> str:
        raise SecretKeyMissing(self._why)


Box = SecretBox | NoSecretBox


def secret_box_for(sqlite_file: str | None, env: Mapping[str, str]) -> Box:
    """The box of a process (the order of sources in the module docstring). `sqlite_file`:
    the database's file path when it is a SQLite file, else None."""
    given = env.get(KEY_ENV, "").strip()
    if given:
        return SecretBox([k for k in given.split(",") if k.strip()])
    if sqlite_file is None:
        return NoSecretBox(f"{KEY_ENV} is not set, and this database is not a SQLite file")
    return SecretBox([_key_file(Path(sqlite_file + KEY_FILE_SUFFIX))])


def _key_file(path: Path) -> str:
    """The key in `path`, made (mode 0600) if there is none. Written whole under another name
    and linked into place, so that two processes starting together keep one key and neither
    reads a half-written file."""
    try:
        return path.read_text("ascii").strip()
    except FileNotFoundError:
        pass
    key = new_key()
    draft = path.with_name(f"{path.name}.{uuid.uuid4().hex}.new")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(key + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:  # another process made it first: use theirs
            return path.read_text("ascii").strip()
        return key
    finally:
        draft.unlink(missing_ok=True)


__all__ = [
    "KEY_ENV",
    "PREFIX",
    "Box",
    "NoSecretBox",
    "SecretBox",
    "SecretKeyMissing",
    "SecretUnreadable",
    "is_sealed",
    "new_key",
    "secret_box_for",
]
