"""``lynn bench coordination``: runs ours against MABWiser and Vowpal Wabbit and writes the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lynn.bench.coordination import ROUTERS, abandon_time, run_router
from tests.conftest import REPO, run_lynn


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


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scenarios", "nope"], "lynn: error: unknown scenario(s) nope"),
        (["--seeds", "0"], "lynn: error: --seeds, --steps and --speed-steps must be at least 1"),
    ],
)
def test_bench_usage_error_is_one_line(argv: list[str], message: str) -> None:
    # Both ways in: `python -m lynn.cli` and the installed console script share lynn.errors.UsageError.
    proc = run_lynn("bench", "coordination", *argv)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(message)
    lynn_script = Path(sys.executable).parent / "lynn"
    proc = subprocess.run(
        [str(lynn_script), "bench", "coordination", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stderr.strip().startswith(message)


def test_bench_script_takes_the_same_flags(tmp_path: Path) -> None:
    script = REPO / "benchmarks" / "bench_coordination.py"
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--speed-steps" in proc.stdout and "MABWiser" in proc.stdout
    proc = subprocess.run(
        [sys.executable, str(script), "--scenarios", "nope"], capture_output=True, text=True, timeout=60
    )
    assert (
        proc.returncode == 2
        and "error: unknown scenario(s) nope" in proc.stderr
        and "Traceback" not in proc.stderr
    )


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
