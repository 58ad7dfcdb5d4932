"""The ``lynn`` command, driven through subprocess as a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lynn
from tests.conftest import GUESS, run_lynn


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
