"""``scripts/device_check.sh --dry-run``: the GPU machine's plan, run on CPU at toy sizes, end to end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_device_check_dry_run_runs_every_step_and_writes_the_figures(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(ROOT / "scripts" / "device_check.sh"), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    report = json.loads((tmp_path / "device_check.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert list(steps) == ["specdec", "bigtarget", "vllm", "liveweb", "grpo_model", "grpo"]
    bad = {n: s["output_tail"][-1500:] for n, s in steps.items() if s["status"] == "failed"}
    assert not bad and proc.returncode == 0, bad
    assert report["dry_run"] and report["device"] == "cpu"
    for step in steps.values():
        assert step["command"] and step["seconds"] >= 0
    methods = {(r["method"], r["batch"]) for r in steps["specdec"]["figures"]["rows"]}
    for m in ("greedy (HF generate)", "ours strict, draft", "ours MARS, draft"):
        assert (m, 1) in methods and (m, 8) in methods, methods
    assert {("HF assisted, draft (defaults)", 1), ("ours typical, draft", 1)} <= methods  # HF: batch 1 only
    big = steps["bigtarget"]["figures"]
    assert set(big["batch1"]["target_ms"]) == {str(k) for k in range(1, 7)}
    assert big["batch8"]["projected_speedup_over_greedy"]  # from the specdec rows
    assert steps["vllm"]["status"] in ("ok", "skipped")
    live = steps["liveweb"]["figures"]
    assert set(live["mix_ms"]) == {"pw", "cdp", "fast", "locator"} and live["ours_over_playwright"] > 0
    grpo = {r["config"] for r in steps["grpo"]["figures"]}
    assert grpo == {"colocated", "push_pull:2"}
