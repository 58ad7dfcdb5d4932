from __future__ import annotations

from pathlib import Path

import pytest

from lynn.eval.leaderboard import collect, to_markdown, write_leaderboard
from lynn.eval.runner import EvalConfig, evaluate
from lynn.eval.stats import mean_ci95, wilson_interval
from tests.conftest import GUESS


def test_mean_ci95_known_values() -> None:
    mean, ci = mean_ci95([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert ci == pytest.approx(3.182 * (1.6666666 / 4) ** 0.5, rel=1e-4)
    assert mean_ci95([0.3]) == (0.3, 0.0)


def test_wilson_interval_matches_the_published_values() -> None:
    # Wilson (1927) score intervals at z = 1.96, as statsmodels' proportion_confint(method="wilson")
    # and R's prop.test(correct=FALSE) give them.
    assert wilson_interval(8, 10) == pytest.approx((0.4901568, 0.9433191), abs=1e-6)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775402), abs=1e-6)
    assert wilson_interval(10, 10) == pytest.approx((0.7224598, 1.0), abs=1e-6)
    assert wilson_interval(29, 120) == pytest.approx((0.1738573, 0.3255031), abs=1e-6)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high > 0.2  # 0/10 is not "± 0.0%"
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_coordination_rows_rank_by_reward_with_oracle_share_and_regret(tmp_path: Path) -> None:
    from lynn.eval.leaderboard import table_cells

    for agent in ("random", "linucb"):
        evaluate(
            EvalConfig("Lynn/Coordination-v0", agent=agent, episodes=2, out=str(tmp_path), progress=False)
        )
    rows = collect(tmp_path)
    assert [r.agent for r in rows] == ["linucb", "random"]  # by reward, not by a tied success rate
    assert rows[0].reward > rows[1].reward and rows[0].regret < rows[1].regret
    assert 0 < rows[1].score < rows[0].score <= 1.05
    cells = table_cells(rows)[0]
    assert "reward" in cells[4] and "of oracle" in cells[4] and "regret" in cells[4] and cells[5] == "—"


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
    assert md == to_markdown(rows) and "10/10 = 100.0% (72.2%–100.0%)" in md and "± 0.0%" not in md
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


def test_printed_table_keeps_every_rate_with_its_interval_on_one_line(
    tmp_path: Path, guess_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from lynn.cli import main

    evaluate(
        EvalConfig(
            GUESS, agent="tests.eval.test_leaderboard:_Oracle", episodes=12, out=str(tmp_path), progress=False
        )
    )
    assert main(["leaderboard", str(tmp_path)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "12/12 = 100.0%" in ln]
    # Both the headline and the Wilson column; a 100% rate is not shown without its interval (75.7%–100%).
    assert lines and all(ln.count("12/12 = 100.0% (75.7%–100.0%)") == 2 for ln in lines), lines
    assert "tests.eval.test_leaderboard:_Oracle" in lines[0]  # nor a row name cut short
