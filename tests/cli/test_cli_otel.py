"""`--otel` of `recoup serve` and `recoup worker`: off, no tracing at all; on without the
`[otel]` extra, one line naming the extra and exit 2 (never a traceback)."""

from __future__ import annotations

import sys

import pytest
import typer

from recoup.cli._tracing import otel_tracing


def test_off_is_no_tracing() -> None:
    assert otel_tracing(False) is None


def test_on_without_the_extra_names_it_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "opentelemetry"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails as if absent
    with pytest.raises(typer.Exit) as stopped:
        otel_tracing(True)
    assert stopped.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "recoup[otel]" in err
