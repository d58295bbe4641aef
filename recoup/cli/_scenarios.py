"""`--scenarios FILE`, shared by `recoup gateway` and `recoup demo`: read and validate a
scenario file (`recoup.payments.wire.parse_scenario_file`), or one line naming what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from recoup.errors import ConfigError, InvalidInput

if TYPE_CHECKING:
    from recoup.payments.wire import ScenarioFile


def read_scenario_file(path: Path) -> tuple[str, ScenarioFile]:
    """The file's text and content; `InvalidInput` naming `--scenarios` (and the field)."""
    from recoup.payments.wire import parse_scenario_file

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(
            "--scenarios", str(path), f"expected a readable UTF-8 file ({reason})"
        ) from None
    try:
        return text, parse_scenario_file(text)
    except ConfigError as exc:
        raise InvalidInput(f"--scenarios {path}: {exc.field}", exc.value, exc.allowed) from None


__all__ = ["read_scenario_file"]
