"""The README's examples run as written, against this machine only: no code block calls a
public host, and the embedding example prints what its comments say it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
FENCED = re.compile(r"```(\w*)\n(.*?)```", re.S)
URL = re.compile(r"https?://[^\s\"'`)]+")
LOOPBACK = re.compile(r"https?://(127\.0\.0\.1|localhost|\[::1\])([:/]|$)")


def _blocks(language: str | None = None) -> list[str]:
    return [
        body
        for lang, body in FENCED.findall(README.read_text(encoding="utf-8"))
        if language is None or lang == language
    ]


def test_every_url_in_a_code_block_is_on_loopback() -> None:
    found = [url for block in _blocks() for url in URL.findall(block)]
    assert found, "the README's examples call nothing: the pattern is wrong"
    assert [url for url in found if not LOOPBACK.match(url)] == []


def test_the_embedding_example_prints_what_its_comments_say(tmp_path: Path) -> None:
    (example,) = [b for b in _blocks("python") if "running_worker" in b]
    # The output a reader is promised: the comment lines right after a call that prints.
    promised = [line.removeprefix("# ") for line in example.splitlines() if line.startswith("# ")]
    assert len(promised) == 2
    ran = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == promised
