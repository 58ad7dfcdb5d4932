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

# Wall seconds of the slowest test files in a full `make test` (2026-12-06, two xdist workers; refresh from a run
# with --junitxml). `make test` hands whole files to its two workers in collection order
# (--no-loadscope-reorder): these go first, longest first, so that no long file starts last while the other
# worker has nothing left to do. test_liveweb_env (its expert test moved to test_fast_snapshot) and
# test_device_check (steps forked) are estimates from their files' own runs since.
SLOW_FILES = {
    "tests/envs/evmquest/test_soundness.py": 251,
    "tests/envs/liveweb/test_fast_snapshot.py": 205,
    "tests/wrappers/echo/test_echo_lm_broadcast.py": 103,
    "tests/envs/coordination/test_coordination_real_pool.py": 98,
    "tests/wrappers/echo/test_echo_lm.py": 94,
    "tests/envs/coordination/test_coordination_real_liveweb.py": 62,
    "tests/envs/evmquest/test_tasks.py": 60,
    "tests/envs/liveweb/test_soundness.py": 60,
    "tests/test_device_check.py": 55,
    "tests/test_readme.py": 55,
    "tests/envs/evmquest/test_skills.py": 41,
    "tests/envs/liveweb/test_context_reuse.py": 37,
    "tests/envs/evmquest/test_reference.py": 34,
    "tests/wrappers/echo/test_echo_ray.py": 31,
    "tests/agents/dynaweb/test_train.py": 30,
    "tests/suite/test_worldmodel.py": 28,
    "tests/agents/llm/test_lm_policy.py": 28,
    "tests/envs/liveweb/test_liveweb_env.py": 27,
    "tests/wrappers/echo/test_echo_lm_hetero.py": 27,
    "tests/envs/liveweb/test_robustness.py": 26,
    "tests/lm/test_history.py": 26,
    "tests/envs/evmquest/test_env.py": 25,
    "tests/lm/test_speculative.py": 24,
    "tests/envs/liveweb/test_webarena_eval.py": 22,
    "tests/envs/evmquest/test_gas_search.py": 21,
    "tests/envs/worldmodel/test_delta.py": 19,
    "tests/envs/test_envs.py": 19,
    "tests/envs/evmquest/test_typescript.py": 18,
    "tests/test_registry.py": 16,
    "tests/wrappers/echo/test_echo_text_envs.py": 15,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slowest files first (``SLOW_FILES``); a stable sort, so each file's tests stay together and in order."""
    items.sort(key=lambda item: -SLOW_FILES.get(item.nodeid.split("::", 1)[0], 0))


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
    # LiveWeb sessions collected inside Playwright's loop finish their shutdown at the next safe moment; the
    # Playwright driver is kept between sessions until the exit (stopped here only if no session uses it).
    if "lynn.envs.liveweb.browser" in sys.modules:
        sys.modules["lynn.envs.liveweb.browser"].close_collected_sessions()
        sys.modules["lynn.envs.liveweb.browser"].shutdown_driver()
    deadline = time.time() + 10
    left = _descendants(os.getpid())
    while left and time.time() < deadline:
        time.sleep(0.5)
        left = _descendants(os.getpid())
    if left:
        listing = "\n".join(f"  {pid}: {cmd[:160]}" for pid, cmd in left)
        print(f"\nERROR: processes left behind by the test suite:\n{listing}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
