"""``lynn bench coordination``: runs ours against MABWiser and Vowpal Wabbit and writes the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from lynn.envs.coordination.bench import ROUTERS, abandon_time, run_router
from tests.conftest import run_lynn


def test_bench_cli_writes_table_plot_and_goal_lines(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    proc = run_lynn(
        "bench", "coordination", "--seeds", "1", "--steps", "600", "--scenarios", "symphony-shock",
        "--routers", "linucb (ours),mabwiser LinUCB α=1,vw cb_explore_adf ε=0.05,random", "--out", str(out),
        "--speed-steps", "200", "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = (out / "coordination.md").read_text()
    for label in ("linucb (ours)", "mabwiser LinUCB α=1", "vw cb_explore_adf ε=0.05", "random"):
        assert f"| {label} |" in table
    assert "success pre → post shock" in table
    assert "decisions/s ours" in proc.stdout and "best library" in proc.stdout
    assert (out / "coordination_regret.png").stat().st_size > 10_000
    rows = json.loads((out / "coordination.json").read_text())
    assert {r["router"] for r in rows} == {
        "linucb (ours)",
        "mabwiser LinUCB α=1",
        "vw cb_explore_adf ε=0.05",
        "random",
    }


def test_bench_usage_error_is_one_line() -> None:
    # The installed console script (``python -m lynn.cli`` loads lynn.cli twice, so an extension's
    # UsageError is not the one main() catches there).
    lynn_script = Path(sys.executable).parent / "lynn"
    proc = subprocess.run(
        [str(lynn_script), "bench", "coordination", "--scenarios", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.strip().startswith("lynn: error: unknown scenario")


def test_library_adapters_learn_on_delayed_feedback() -> None:
    for label in ("mabwiser LinUCB α=1", "vw cb_explore_adf ε=0.05"):
        ours = run_router(ROUTERS[label], "stationary", 600, seed=0)
        rand = run_router(ROUTERS["random"], "stationary", 600, seed=0)
        assert ours.reward[300:].mean() > rand.reward[300:].mean() + 0.1, label


def test_abandon_time() -> None:
    chosen = np.array(["A"] * 100 + ["A", "B"] * 10 + ["B"] * 100)
    # From step 100 on, A gets every other one of 20 decisions, then none: a 20-window from offset 15
    # holds two of them (10%).
    assert abandon_time(chosen, 100, window=20, share=0.1) == 15
    assert abandon_time(np.array(["A"] * 300), 100) is None
