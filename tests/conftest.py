from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = [
    "tests._lm_fixtures",  # evm_demos, tiny_lm
    "tests._worldmodel_fixtures",  # web_data, memory_model, tiny_world_model
]

REPO = Path(__file__).resolve().parents[1]
# Under pytest-xdist (make test runs two workers on two cores) each worker's torch would start one thread
# per core, and the two workers' threads would contend for the same cores; one each (subprocesses inherit it).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
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


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live descendant of ``pid`` (from /proc; zombies excluded)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, stack = [], list(children.get(pid, []))
    while stack:
        child = stack.pop()
        try:
            cmd = (
                (Path("/proc") / str(child) / "cmdline")
                .read_bytes()
                .replace(b"\0", b" ")
                .decode(errors="replace")
            )
        except OSError:
            continue
        out.append((child, cmd.strip()))
        stack.extend(children.get(child, []))
    return out


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process the suite started (browser, node, server, worker) outlived it.

    Under pytest-xdist every worker is a session of its own and checks its own children; the controller's
    children are the workers themselves, so it does not look."""
    if session.config.pluginmanager.hasplugin("dsession"):
        return
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker
    import time

    # multiprocessing's own helpers (resource tracker, fork server) live as long as the interpreter
    # by design; they are not leaks, so stop them before looking.
    multiprocessing.resource_tracker._resource_tracker._stop()
    multiprocessing.forkserver._forkserver._stop()
    # LiveWeb sessions collected inside Playwright's loop finish their shutdown at the next safe moment.
    if "lynn.envs.liveweb.browser" in sys.modules:
        sys.modules["lynn.envs.liveweb.browser"].close_collected_sessions()
    deadline = time.time() + 10
    left = _descendants(os.getpid())
    while left and time.time() < deadline:
        time.sleep(0.5)
        left = _descendants(os.getpid())
    if left:
        listing = "\n".join(f"  {pid}: {cmd[:160]}" for pid, cmd in left)
        print(f"\nERROR: processes left behind by the test suite:\n{listing}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
