"""Every ```python block of the README runs as written (in a fresh interpreter)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO, run_python

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


def test_readme_has_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code: str) -> None:
    proc = run_python(code, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
