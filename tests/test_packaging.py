"""A non-editable install ships every data file the package reads (templates, artifacts, task files)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_wheel_contains_every_tracked_data_file(tmp_path: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    data = {f for f in tracked if f.startswith("lynn/") and not f.endswith(".py")}
    assert data, "the package has data files (site templates, contract artifacts, tasks)"
    # Build from a copy of the tracked files: a stale build/ folder must not hide a missing pattern.
    src = tmp_path / "src"
    for name in tracked:
        if name.startswith(("lynn/", "pyproject.toml", "README.md")) and (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)],
        cwd=src, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("lynn_gym-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert sorted(data - shipped) == []
