"""The `--policy` option, read alike by every command: a preset or a TOML file → its text and
the validated dunning policy, with errors that name the option."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from recoup.dunning.policy import PRESETS, DunningPolicy, resolve_policy_text
from recoup.errors import ConfigError, InvalidInput

PolicyOption = Annotated[
    str, typer.Option("--policy", help=f"{' | '.join(PRESETS)} | PATH to a policy TOML.")
]


@dataclass(frozen=True, kw_only=True)
class LoadedPolicy:
    """What a `--policy` option names: the TOML text as given (a preset's shipped file or the
    user's file, unchanged, for storing) and the policy it validates to."""

    text: str
    policy: DunningPolicy


def load_policy(source: str, option: str = "--policy") -> LoadedPolicy:
    """The policy a `--policy` option (or another `option` that takes a policy) names: a
    preset or a TOML file. Errors name the option (and, for a file, the dotted field inside
    it)."""

    def read(path: str) -> str:
        try:
            return Path(path).read_text("utf-8")
        except OSError as exc:
            raise InvalidInput(
                option,
                path,
                f"expected {' or '.join(PRESETS)} or a readable TOML file ({exc.strerror})",
            ) from None
        except UnicodeDecodeError as exc:  # TOML is UTF-8
            raise InvalidInput(
                option, path, f"expected a TOML file in UTF-8 (byte {exc.start} is not)"
            ) from None

    try:
        text, policy = resolve_policy_text(source, read)
    except ConfigError as exc:
        raise ConfigError(f"{option} {source}: {exc.field}", exc.value, exc.allowed) from None
    return LoadedPolicy(text=text, policy=policy)
