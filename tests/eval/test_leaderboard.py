from __future__ import annotations

from pathlib import Path

import pytest

from lynn.eval.leaderboard import collect, to_markdown, write_leaderboard
from lynn.eval.runner import EvalConfig, evaluate
from lynn.eval.stats import mean_ci95
from tests.conftest import GUESS


def test_mean_ci95_known_values() -> None:
    mean, ci = mean_ci95([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert ci == pytest.approx(3.182 * (1.6666666 / 4) ** 0.5, rel=1e-4)
    assert mean_ci95([0.3]) == (0.3, 0.0)


class _Oracle:
    """Reads the hidden digit (privileged), so it always wins: the leaderboard must rank it first."""

    name = "cheat"

    def __init__(self, env, **kw) -> None:
        self.env = env

    def reset(self, seed=None) -> None:
        pass

    def act(self, obs, info):
        return self.env.unwrapped.target

    def observe(self, *a) -> None:
        pass


def test_leaderboard_aggregates_ranks_and_renders(tmp_path: Path, guess_id: str) -> None:
    for agent in ("random", "tests.eval.test_leaderboard:_Oracle"):
        evaluate(EvalConfig(GUESS, agent=agent, episodes=10, out=str(tmp_path), progress=False))
    evaluate(EvalConfig(GUESS, agent="random", split="test", out=str(tmp_path), progress=False))
    rows, paths = write_leaderboard(tmp_path)
    assert [(r.agent, r.split) for r in rows] == [
        ("tests.eval.test_leaderboard:_Oracle", "all"),
        ("random", "all"),
        ("random", "test"),
    ]
    assert rows[0].success == 1.0 and rows[0].episodes == 10
    md = paths["markdown"].read_text()
    assert md == to_markdown(rows) and "100.0% ± 0.0%" in md
    html = paths["html"].read_text()
    assert "<table>" in html and "data:image/png;base64," in html
    assert "http://" not in html and "https://" not in html, "the page must be self-contained"
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_episode_copied_twice_counts_once(tmp_path: Path, guess_id: str) -> None:
    import shutil

    evaluate(EvalConfig(GUESS, episodes=4, out=str(tmp_path / "run"), progress=False))
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    assert [r.episodes for r in collect(tmp_path)] == [4]


def test_split_given_as_env_kwarg_labels_the_row(tmp_path: Path, guess_id: str) -> None:
    evaluate(EvalConfig(GUESS, episodes=3, env_kwargs={"split": "test"}, out=str(tmp_path), progress=False))
    assert [(r.split, r.episodes) for r in collect(tmp_path)] == [("test", 3)]
