"""The LiveWeb examples run as a user would run them."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, run_python


def _run(name: str, *args: str) -> str:
    script = REPO / "examples" / name
    code = f"import runpy, sys; sys.argv = [{str(script)!r}, *{list(args)!r}]; runpy.run_path({str(script)!r}, run_name='__main__')"
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_quickstart_expert_solves_its_episode() -> None:
    assert "expert: 1/1 tasks solved" in _run("liveweb_quickstart.py", "--episodes", "1")


@pytest.mark.slow
def test_own_tasks_example_scores_both_tasks() -> None:
    out = _run("liveweb_own_tasks.py")
    assert out.count("reward 1.0") == 2, out
