"""examples/evmquest_*.py run as a user would run them."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, run_python


@pytest.mark.slow
def test_own_script_example_runs() -> None:
    script = REPO / "examples" / "evmquest_own_script.py"
    proc = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "reward=1.0" in proc.stdout
