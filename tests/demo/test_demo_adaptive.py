"""`recoup demo --policy adaptive`: the month with learning on, in the packaged calibrated
world (learning needs time in the world), prints what it learned beside the holdout's static
schedule; the JSON gains `learning` and `world` only (the default demo's contract is
`tests/demo/test_demo_cli.py`'s)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.demo.test_demo_cli import TOP_KEYS, run_cli

pytestmark = pytest.mark.slow


def test_the_adaptive_demo_learns_and_says_what_it_learned(tmp_path: Path) -> None:
    db = tmp_path / "recoup.db"
    code, out = run_cli("--size", "150", "--seed", "5", "--policy", "adaptive", "--db", str(db),
                        "--json")  # fmt: skip
    assert code == 0, out
    demo = json.loads(out)
    assert set(demo) == TOP_KEYS | {"world", "learning"}
    assert demo["world"] == "calibrated" and demo["policy"] == "adaptive"
    assert demo["double_charges"]["total"] == 0
    learning = demo["learning"]
    assert learning["decisions"] == sum(learning["by_arm"].values())
    assert learning["by_arm"]["adaptive"] == learning["adaptive"] > 0
    assert learning["by_arm"].get("holdout", 0) > 0  # the sticky holdout, on the static plan
    assert 0 <= learning["moved"] <= learning["adaptive"]
    assert learning["moved"] > 0, learning  # the log grew past the cold start
    assert learning["cold_start"] > 0  # the first failures came before any answer
    judged = learning["treated"]["judged"] + learning["holdout"]["judged"]
    assert 0 < judged <= demo["report"]["invoices"]
    for slot in learning["top_slots"]:
        assert slot["decisions"] > 0 and slot["slot"]
    # The terminal says it too. Its wording, not the learning, is checked here (the JSON run
    # above showed the learning at 150), so a smaller month serves, at a fraction of the cost.
    code, text = run_cli("--size", "40", "--seed", "5", "--policy", "adaptive", "--db",
                         str(tmp_path / "again.db"))  # fmt: skip
    assert code == 0
    flat = " ".join(text.split())
    assert "What the adaptive policy learned" in flat
    # (The counts differ from the first run's: the learner reads the answers in the order
    # the worker's concurrent batches give them.)
    assert re.search(r"moved off the static slot: [\d,]+ of [\d,]+ adaptive decisions", flat)
