"""Variants of one agent on one env (``lynn eval --label``) keep their own leaderboard rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lynn.cli import main
from lynn.eval.leaderboard import collect, write_leaderboard
from lynn.eval.runner import EvalConfig, EvalError, evaluate, read_records, run_dir
from tests.conftest import GUESS


class _Fixed:
    """Always guesses ``guess``: two values of the kwarg are two variants of one agent."""

    name = "fixed"

    def __init__(self, env, guess: int = 0, **kw) -> None:
        self.guess = guess

    def reset(self, seed=None) -> None:
        pass

    def act(self, obs, info):
        return self.guess

    def observe(self, *a) -> None:
        pass


FIXED = "tests.eval.test_leaderboard_variants:_Fixed"
CHEAT = "tests.eval.test_leaderboard:_Oracle"  # reads the hidden digit, so it always wins


def _eval(
    out: Path,
    agent: str,
    label: str | None = None,
    seed: int = 0,
    env_kwargs: dict | None = None,
    **agent_kwargs,
) -> dict:
    cfg = EvalConfig(
        GUESS,
        agent=agent,
        episodes=6,
        seed=seed,
        out=str(out),
        label=label,
        env_kwargs=env_kwargs or {},
        agent_kwargs=agent_kwargs,
        progress=False,
    )
    return evaluate(cfg)


def test_labelled_variants_keep_two_rows_in_table_and_chart(tmp_path: Path, guess_id: str) -> None:
    _eval(tmp_path, FIXED)  # the unlabeled base row
    _eval(tmp_path, FIXED, label="fixed-3", guess=3)
    rows, paths = write_leaderboard(tmp_path)
    by_name = {r.agent: r for r in rows}
    assert set(by_name) == {FIXED, "fixed-3"}
    assert by_name[FIXED].episodes == 6 and by_name["fixed-3"].episodes == 6
    # The two variants guess differently, so their episodes (same seeds) differ: nothing was merged.
    base = read_records(run_dir(EvalConfig(GUESS, agent=FIXED, out=str(tmp_path))) / "episodes.jsonl")
    labelled = read_records(tmp_path / "LynnTest_Guess-v0" / "fixed-3" / "episodes.jsonl")
    assert [r["label"] for r in labelled] == ["fixed-3"] * 6 and not any("label" in r for r in base)
    assert "| fixed-3 |" in paths["markdown"].read_text()
    assert "fixed-3" in paths["html"].read_text()


def test_label_names_the_folder_and_a_resumed_run_must_keep_it(tmp_path: Path, guess_id: str) -> None:
    summary = _eval(tmp_path, FIXED, label="lm-grpo", guess=2)
    assert summary["label"] == "lm-grpo" and summary["agent"] == FIXED
    assert Path(summary["results"]).parent.name == "lm-grpo"
    config = json.loads((Path(summary["results"]).parent / "config.json").read_text())
    assert config["label"] == "lm-grpo"
    # Same label, different kwargs: refused, not merged into the labelled folder.
    with pytest.raises(EvalError, match="different configuration"):
        _eval(tmp_path, FIXED, label="lm-grpo", guess=5)
    with pytest.raises(EvalError, match="--label"):
        _eval(tmp_path, FIXED, label=" / ")


def test_unlabeled_variants_under_one_root_are_split_by_the_kwarg_that_differs(
    tmp_path: Path, guess_id: str
) -> None:
    # Two unlabeled runs of one agent with different kwargs, in two roots, copied under one tree: before
    # labels they merged into one row (and the second's episodes overwrote the first's).
    _eval(tmp_path / "a", FIXED, guess=1)
    _eval(tmp_path / "b", FIXED, guess=7)
    rows = collect(tmp_path)
    assert sorted(r.agent for r in rows) == [f"{FIXED} [guess=1]", f"{FIXED} [guess=7]"]
    assert [r.episodes for r in rows] == [6, 6]
    # Paths are named by their last component; two equal last components get a digest.
    _eval(tmp_path / "c", FIXED, model="/m/x/final")
    _eval(tmp_path / "d", FIXED, model="/m/y/final")
    names = sorted(r.agent for r in collect(tmp_path / "c") + collect(tmp_path / "d"))
    assert names == [FIXED, FIXED]  # alone in their roots: the plain name
    shutil.rmtree(tmp_path / "a")
    shutil.rmtree(tmp_path / "b")
    names = sorted(r.agent for r in collect(tmp_path))
    assert len(names) == 2 and len(set(names)) == 2
    assert all(n.startswith(f"{FIXED} [model=final] #") for n in names)


def test_runs_on_differently_configured_envs_never_merge(tmp_path: Path, guess_id: str) -> None:
    # Same agent, same kwargs, same seeds; one env configured otherwise (EVMQuest's profile, say):
    # the episodes share their (episode, seed, task) keys, so one merged row would keep only half.
    _eval(tmp_path / "a", CHEAT)
    _eval(tmp_path / "b", CHEAT, env_kwargs={"delay": 0.001})
    rows = sorted(collect(tmp_path), key=lambda r: r.agent)
    assert [r.agent for r in rows] == [f"{CHEAT} [env.delay=0.001]", f"{CHEAT} [env.delay=null]"]
    assert [r.episodes for r in rows] == [6, 6]
    # Alone in its root, a configured env's row keeps the plain name.
    assert [r.agent for r in collect(tmp_path / "b")] == [CHEAT]


def test_one_variant_over_two_seed_ranges_is_one_row(tmp_path: Path, guess_id: str) -> None:
    _eval(tmp_path / "s0", CHEAT, label="cheat")
    _eval(tmp_path / "s6", CHEAT, label="cheat", seed=6)
    [row] = collect(tmp_path)
    assert (row.agent, row.episodes, row.success) == ("cheat", 12, 1.0)


def test_a_label_equal_to_another_agents_name_does_not_merge(tmp_path: Path, guess_id: str) -> None:
    _eval(tmp_path, "random")
    _eval(tmp_path / "x", CHEAT, label="random")
    rows = collect(tmp_path)
    assert len(rows) == 2 and rows[0].success == 1.0
    assert sorted(r.agent for r in rows) == ["random [agent=random]", f"random [agent={CHEAT}]"]


def test_results_written_before_labels_still_load(tmp_path: Path, guess_id: str) -> None:
    summary = _eval(tmp_path, CHEAT)
    path = Path(summary["results"])
    # An old results folder: records and config.json without any label.
    old = [{k: v for k, v in r.items() if k != "label"} for r in read_records(path)]
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    cfg_path = path.parent / "config.json"
    cfg = json.loads(cfg_path.read_text())
    assert "label" not in cfg  # an unlabeled run writes the old identity, so old runs resume
    [row] = collect(tmp_path)
    assert (row.agent, row.episodes) == (CHEAT, 6)
    # Resuming the old run with more episodes appends to the same folder and the same row.
    evaluate(EvalConfig(GUESS, agent=CHEAT, episodes=9, out=str(tmp_path), progress=False))
    [row] = collect(tmp_path)
    assert (row.agent, row.episodes) == (CHEAT, 9)


def test_cli_eval_label_and_leaderboard(
    tmp_path: Path, guess_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path)
    assert main(["eval", GUESS, "--agent", FIXED, "--episodes", "3", "--out", out, "--no-progress"]) == 0
    args = ["eval", GUESS, "--agent", FIXED, "--agent-arg", "guess=4", "--label", "fixed-4"]
    assert main([*args, "--episodes", "3", "--out", out, "--no-progress"]) == 0
    assert "fixed-4: 3 episodes" in capsys.readouterr().out
    assert main(["leaderboard", out]) == 0
    printed = capsys.readouterr().out
    assert "fixed-4" in printed
    assert sorted(r.agent for r in collect(tmp_path)) == sorted([FIXED, "fixed-4"])
