"""examples/train_sb3_coordination.py: PPO learns to route better than random within a tiny budget."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, run_python


@pytest.mark.slow
def test_ppo_example_beats_random_on_stationary() -> None:
    script = REPO / "examples" / "train_sb3_coordination.py"
    code = (
        "import runpy, sys; "
        f"sys.argv = [{str(script)!r}, '--timesteps', '2048', '--eval-episodes', '2', '--eval-steps', '300', '--json']; "
        f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    proc = run_python(code, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["random"] < 0.6
    assert result["ppo"] > result["random"] + 0.15, result
