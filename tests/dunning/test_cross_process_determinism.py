"""`recoup plan` and `recoup replay` print the same bytes in separate processes.

The in-process determinism tests cannot catch output that depends on per-process state such
as `hash()` randomisation or set iteration order. These tests run the real command twice with
different PYTHONHASHSEED values and compare the bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PLAN = [
    "plan",
    "--invoice",
    "inv_1",
    "--failed-at",
    "2026-06-23T15:00:00Z",
    "--timezone",
    "America/Chicago",
    "--country",
    "US",
    "--decline-code",
    "insufficient_funds",
    "--advice-code",
    "25",
    "--json",
]

FAILURES = """\
invoice_id,failed_at,timezone,country,decline_code,advice_code,gateway,merchant_id
inv_1,2026-06-23T15:00:00Z,America/Chicago,US,insufficient_funds,,stripe,m1
inv_2,2026-11-25T16:00:00Z,America/New_York,US,do_not_honor,,stripe,m1
inv_3,2026-12-23T23:58:00Z,Europe/London,GB,,,adyen,m2
inv_4,2026-03-07T10:00:00Z,Pacific/Kiritimati,,generic_decline,25,stripe,m1
"""


def recoup(*args: str, seed: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run(
        [sys.executable, "-m", "recoup", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_plan_prints_the_same_bytes_under_different_hash_seeds(tmp_path: Path) -> None:
    first = recoup(*PLAN, seed="1", cwd=tmp_path)
    second = recoup(*PLAN, seed="2", cwd=tmp_path)
    assert (first.returncode, first.stderr) == (0, b"")
    assert (second.returncode, second.stderr) == (0, b"")
    assert first.stdout == second.stdout
    assert b'"decision": "retry"' in first.stdout


def test_replay_writes_the_same_plan_and_summary_under_different_hash_seeds(
    tmp_path: Path,
) -> None:
    (tmp_path / "failures.csv").write_text(FAILURES, encoding="utf-8")
    runs = []
    for seed in ("1", "2"):
        out = f"planned-{seed}.csv"
        done = recoup(
            "replay", "failures.csv", "--out", out, "--compare", "nightly", "--json",
            seed=seed, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append((done.stdout, (tmp_path / out).read_bytes()))
    assert runs[0] == runs[1]
    planned = runs[0][1].decode().splitlines()
    assert planned[0] == "invoice_id,attempt,at,local,idempotency_key"
    assert len(planned) > 4
