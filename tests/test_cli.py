"""The ``lynn`` command, driven through subprocess as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lynn
from tests.conftest import GUESS, REPO, run_lynn


def test_envs_lists_every_registered_id() -> None:
    proc = run_lynn("envs", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [e["id"] for e in json.loads(proc.stdout)] == lynn.ENV_IDS


def test_eval_json_summary_then_leaderboard(tmp_path: Path) -> None:
    proc = run_lynn("eval", GUESS, "--episodes", "5", "--seed", "3", "--out", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert {"env_id", "agent", "episodes", "success_rate", "mean_reward"} <= set(summary)
    assert summary["episodes"] == 5 and summary["agent"] == "random"
    html = tmp_path / "board.html"
    proc = run_lynn("leaderboard", str(tmp_path), "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    assert "LynnTest/Guess-v0" in proc.stdout and html.exists() and (tmp_path / "leaderboard.png").exists()


def test_tasks_lists_split_as_json() -> None:
    proc = run_lynn("tasks", GUESS, "--split", "test", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [t["task_id"] for t in json.loads(proc.stdout)] == ["guess-3", "guess-4"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "Lynn/Nope-v0"], "unknown env id"),
        (["eval", GUESS, "--agent", "nope"], "unknown agent"),
        (["eval", GUESS, "--env-arg", "novalue"], "KEY=VALUE"),
        (["eval", GUESS, "--tasks", "guess-77"], "unknown task"),
        (["tasks", "CartPole-v1"], "no task list"),
        (["leaderboard", "/no/such/dir"], "no results folder"),
        (["bench", "coordination", "--scenarios", "nope"], "unknown scenario"),  # raised inside an extension
    ],
)
def test_user_mistakes_give_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    proc = run_lynn(*args, "--out", str(tmp_path)) if args[0] == "eval" else run_lynn(*args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lynn: error:") and message in lines[0]


def test_doctor_names_what_is_missing_and_the_fix() -> None:
    proc = run_lynn("doctor", extra_env={"LYNN_CHROMIUM": "/no/such/chromium", "LYNN_ANVIL": "/no/anvil"})
    assert proc.returncode == 1
    out = proc.stdout
    assert "ok       python: gymnasium" in out
    assert "MISSING  chromium\n         fix: apt-get install -y chromium" in out
    assert "why: LYNN_CHROMIUM=/no/such/chromium is not an executable file" in out
    assert "MISSING  anvil\n         fix:" in out and "npm ci" in out
    assert "why: LYNN_ANVIL=/no/anvil is not an executable file" in out


def test_bench_lists_the_table_and_each_benchmark_parses_its_own_flags() -> None:
    from lynn.bench import BENCHES

    proc = run_lynn("bench", "--help")
    assert proc.returncode == 0
    for name in BENCHES:
        assert name in proc.stdout
    proc = run_lynn("bench", "coordination", "--help")
    assert proc.returncode == 0 and "usage: lynn bench coordination" in proc.stdout
    assert "--speed-steps" in proc.stdout
    proc = run_lynn("bench", "liveweb", "--steps", "x")
    assert proc.returncode == 2 and "lynn bench liveweb: error: argument --steps" in proc.stderr
    proc = run_lynn("bench", "nope")
    assert proc.returncode == 2 and "invalid choice: 'nope'" in proc.stderr


def test_every_bench_module_in_the_table_is_a_benchmark() -> None:
    from lynn.bench import BENCHES, load
    from lynn.errors import UsageError

    for module_name, help_text in BENCHES.values():
        module = load(module_name)
        assert module.__doc__ and help_text
    with pytest.raises(UsageError, match="no benchmark module lynn.bench.nope"):
        load("lynn.bench.nope")
    with pytest.raises(UsageError, match="not a benchmark module"):
        load("lynn.errors")


def test_other_commands_still_reject_unknown_flags() -> None:
    proc = run_lynn("envs", "--bogus")
    assert proc.returncode == 2 and "unrecognized arguments: --bogus" in proc.stderr


@pytest.mark.parametrize("args", [["tasks", GUESS, "--json"], ["envs"], ["doctor"]])
def test_closed_pipe_ends_quietly(args: list[str]) -> None:
    # The reader is gone before the command writes (what `lynn tasks ... --json | head` leads to).
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lynn.cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_closed_pipe_through_a_shell_head() -> None:
    shell = f"{sys.executable} -m lynn.cli tasks {GUESS} --json | head -c 5; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(
        ["bash", "-c", shell],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert proc.stdout == '[{"ta' and "Traceback" not in proc.stderr and proc.returncode in (0, 141)
