from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lynn.eval.runner import RESULT_FILE, EvalConfig, EvalError, evaluate, read_records, run_dir
from tests.conftest import GUESS, REPO


def _cfg(tmp_path: Path, **kw) -> EvalConfig:
    base = dict(env_id=GUESS, episodes=12, seed=5, out=str(tmp_path), progress=False)
    base.update(kw)
    return EvalConfig(**base)


def _strip(records: list[dict]) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k != "timings"} for r in sorted(records, key=lambda r: r["episode"])
    ]


def _records(cfg: EvalConfig) -> list[dict]:
    return read_records(run_dir(cfg) / RESULT_FILE)


def test_same_seed_same_results_and_workers_do_not_change_them(tmp_path: Path, guess_id: str) -> None:
    a = _cfg(tmp_path / "a")
    b = _cfg(tmp_path / "b", workers=2)
    sa, sb = evaluate(a), evaluate(b)
    assert _strip(_records(a)) == _strip(_records(b))
    assert sa["success_rate"] == sb["success_rate"] and sa["episodes"] == 12
    c = _cfg(tmp_path / "c", seed=6)
    evaluate(c)
    assert _strip(_records(a)) != _strip(_records(c)), "a different seed must give a different run"


def test_record_schema(tmp_path: Path, guess_id: str) -> None:
    cfg = _cfg(tmp_path, episodes=3)
    evaluate(cfg)
    rec = _records(cfg)[0]
    for key in ("env_id", "task_id", "seed", "agent", "reward", "success", "steps", "timings", "error"):
        assert key in rec
    assert rec["env_id"] == "LynnTest/Guess-v0" and rec["seed"] == 5 and rec["agent"] == "random"
    assert set(rec["timings"]) >= {"reset_s", "act_s", "step_s", "total_s"}
    summary = json.loads((run_dir(cfg) / "summary.json").read_text())
    assert summary["episodes"] == 3


def test_random_agent_success_matches_chance(tmp_path: Path, guess_id: str) -> None:
    # 3 guesses out of 10 digits: P(success) = 1 - 0.9^3 ≈ 0.27 (not 1.0: agent and env streams differ).
    s = evaluate(_cfg(tmp_path, episodes=200))
    assert 0.15 < s["success_rate"] < 0.40


def test_task_list_by_split_and_by_ids(tmp_path: Path, guess_id: str) -> None:
    cfg = _cfg(tmp_path, split="train", episodes=None)
    s = evaluate(cfg)
    assert s["episodes"] == 3
    assert [r["task_id"] for r in _records(cfg)] == ["guess-0", "guess-1", "guess-2"]
    cfg = _cfg(tmp_path, tasks=["guess-4"], episodes=2)
    evaluate(cfg)
    assert [r["task_id"] for r in _records(cfg)] == ["guess-4", "guess-4"]
    with pytest.raises(EvalError, match="unknown task"):
        evaluate(_cfg(tmp_path, tasks=["guess-9"]))
    with pytest.raises(EvalError, match="unknown split"):
        evaluate(_cfg(tmp_path, split="dev"))


def test_resume_after_torn_line_runs_only_missing_episodes(tmp_path: Path, guess_id: str) -> None:
    cfg = _cfg(tmp_path, episodes=6)
    evaluate(cfg)
    path = run_dir(cfg) / RESULT_FILE
    full = path.read_text().splitlines()
    # Keep 3 episodes and a half-written 4th, as a killed run leaves it.
    path.write_text("\n".join(full[:3]) + "\n" + full[3][: len(full[3]) // 2])
    evaluate(cfg)
    lines = path.read_text().splitlines()
    assert len(lines) == 6
    assert lines[:3] == full[:3], "finished episodes are kept, not re-run"
    assert _strip([json.loads(x) for x in lines]) == _strip([json.loads(x) for x in full])


def test_interrupted_cli_run_resumes(tmp_path: Path, guess_id: str) -> None:
    args = [sys.executable, "-m", "lynn.cli", "eval", GUESS, "--episodes", "8", "--out", str(tmp_path),
            "--env-arg", "delay=0.15", "--no-progress"]  # fmt: skip
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    path = tmp_path / "LynnTest_Guess-v0" / "random" / RESULT_FILE
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 2):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    done_before = len(read_records(path))
    assert 2 <= done_before < 8
    first = path.read_text().splitlines()[:done_before]
    out = subprocess.run(args + ["--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["episodes"] == 8
    lines = path.read_text().splitlines()
    assert lines[:done_before] == first
    assert sorted(json.loads(x)["episode"] for x in lines) == list(range(8))


def test_env_crash_is_recorded_and_the_run_goes_on(tmp_path: Path, guess_id: str) -> None:
    cfg = _cfg(tmp_path, episodes=4, seed=0, env_kwargs={"crash_on_seed": 1})
    s = evaluate(cfg)
    recs = _records(cfg)
    assert s["episodes"] == 4 and s["crashed_episodes"] == 1
    crashed = [r for r in recs if r.get("traceback")]
    assert crashed[0]["seed"] == 1 and "simulated env crash" in crashed[0]["error"]
    assert all(r["steps"] > 0 for r in recs if r["seed"] != 1)


def test_changed_config_in_same_folder_is_refused(tmp_path: Path, guess_id: str) -> None:
    evaluate(_cfg(tmp_path, episodes=2))
    with pytest.raises(EvalError, match="different configuration"):
        evaluate(_cfg(tmp_path, episodes=2, seed=99))


def test_bad_requests_are_eval_errors(tmp_path: Path, guess_id: str) -> None:
    with pytest.raises(EvalError, match="unknown env id"):
        evaluate(_cfg(tmp_path, env_id="Lynn/Nope-v0"))
    with pytest.raises(EvalError, match="unknown agent"):
        evaluate(_cfg(tmp_path, agent="nope"))
    with pytest.raises(EvalError, match="workers"):
        evaluate(_cfg(tmp_path, workers=0))
    with pytest.raises(EvalError, match="no task list"):
        evaluate(_cfg(tmp_path, env_id="CartPole-v1", split="train"))


def test_dead_worker_process_is_a_clear_error_and_finished_episodes_stay(
    tmp_path: Path, guess_id: str
) -> None:
    cfg = _cfg(tmp_path, episodes=6, seed=0, workers=2, env_kwargs={"die_on_seed": 5})
    with pytest.raises(EvalError, match="worker process died"):
        evaluate(cfg)
    kept = _records(cfg)
    assert all(r["seed"] != 5 for r in kept) and len({r["episode"] for r in kept}) == len(kept)
    # Resuming re-runs only the missing episodes (and meets the same crash, reported the same way).
    with pytest.raises(EvalError, match="worker process died"):
        evaluate(cfg)
    assert {r["episode"] for r in kept} <= {r["episode"] for r in _records(cfg)}


def test_scoring_profile_is_part_of_the_split(tmp_path: Path) -> None:
    """EVMQuest's reference profile lands in its own leaderboard row, never mixed with the default one."""
    from lynn.eval.leaderboard import collect

    for scoring in ("default", "reference"):
        evaluate(
            EvalConfig(
                "Lynn/EVMQuest-v0",
                agent="oracle",
                tasks=["wbnb_deposit"],
                env_kwargs={"scoring": scoring},
                out=str(tmp_path / scoring),
                progress=False,
            )
        )
    splits = {r.split for r in collect(tmp_path)}
    assert splits == {"atomic", "atomic/reference"}
