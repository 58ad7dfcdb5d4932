from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUESS = "tests._envs:LynnTest/Guess-v0"


def run_python(code: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (nothing imported beforehand) from the repo root."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def run_lynn(
    *args: str, timeout: float = 300, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ``lynn`` command as a user would, in a subprocess."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "lynn.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def guess_id() -> str:
    import tests._envs  # noqa: F401

    return GUESS
