"""The demo's closing commands run as they are printed, from where the demo was started:
`recoup` only when the PATH finds this very program, else the path as typed."""

from __future__ import annotations

from pathlib import Path

from recoup.demo.summary import invoked_as


def test_a_program_run_by_its_path_is_named_by_that_path(tmp_path: Path) -> None:
    assert invoked_as(".venv/bin/recoup", executable="python3", on_path=None) == ".venv/bin/recoup"
    other = tmp_path / "recoup"
    other.write_text("")
    said = invoked_as(".venv/bin/recoup", executable="python3", on_path=str(other))
    assert said == ".venv/bin/recoup"  # another recoup on the PATH is not this one


def test_the_path_finding_this_program_gives_its_bare_name(tmp_path: Path) -> None:
    program = tmp_path / "recoup"
    program.write_text("")
    assert invoked_as(str(program), executable="python3", on_path=str(program)) == "recoup"


def test_python_dash_m_is_repeated_with_this_interpreter() -> None:
    said = invoked_as("/x/recoup/__main__.py", executable="/opt/py 3/python", on_path=None)
    assert said == "'/opt/py 3/python' -m recoup"
