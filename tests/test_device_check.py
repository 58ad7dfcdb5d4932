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


def test_a_forked_step_reports_what_a_fresh_interpreter_would(tmp_path: Path) -> None:
    """The dry run's runner (``run_forked``): a script's and a module's argv, ``sys.path[0]``, environment and
    working directory as ``python script`` / ``python -m`` give them, and its exit status: ``sys.exit``'s code,
    1 with the traceback on an exception, 124 past the time limit. Run from a fresh interpreter: the fork must not
    run this pytest process's exit handlers."""
    from tests.conftest import run_python

    script = tmp_path / "step.py"
    script.write_text(
        "import os, sys\n"
        "print('argv', sys.argv[1:], 'path0', sys.path[0], 'cwd', os.getcwd(), 'env', os.environ.get('STEP_ENV'))\n"
        "if sys.argv[1] == 'raise': raise ValueError('step failed')\n"
        "if sys.argv[1] == 'sleep': import time; time.sleep(30)\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    code = f"""
import json, os, sys
from lynn.bench.device import run_forked
env = {{**os.environ, "STEP_ENV": "x"}}
out = [run_forked([sys.executable, {str(script)!r}, arg], env, 5 if arg != "sleep" else 0.5) for arg in ("0", "3", "raise", "sleep")]
out.append(run_forked([sys.executable, "-m", "lynn.bench.device", "--bogus"], env, 30))
print(json.dumps(out))
"""
    proc = run_python(code, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (ok, ok_text), (three, _), (raised, raised_text), (slept, slept_text), (module, module_text) = json.loads(
        proc.stdout.strip().splitlines()[-1]
    )
    assert ok == 0 and f"argv ['0'] path0 {tmp_path} cwd {ROOT} env x" in ok_text, ok_text
    assert three == 3
    assert raised == 1 and "ValueError: step failed" in raised_text and "Traceback" in raised_text
    assert slept == 124 and "timed out" in slept_text
    assert module == 2 and "unrecognized arguments: --bogus" in module_text  # argparse's exit, in the module
