"""``lynn suite`` (:mod:`lynn.suite.run`): flags from the config dataclass, the Coordination rows ranked by
reward, and agent ``lm`` from the zoo (left out, said so, when the zoo has no LM for the env)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lynn.suite.plan import PLAN
from lynn.suite.run import SuiteConfig, _lm_model, run_suite


def test_the_flags_are_the_config_fields() -> None:
    import dataclasses

    from lynn.cli import build_parser, config_from_args

    args = build_parser().parse_args(
        [
            "suite",
            "--env",
            "Lynn/EVMQuest-v0",
            "--env",
            "Lynn/LiveWeb-v0",
            "--no-progress",
            "--train",
            "--episodes",
            "3",
        ]
    )
    cfg = config_from_args(SuiteConfig, args)
    assert cfg == SuiteConfig(
        env=["Lynn/EVMQuest-v0", "Lynn/LiveWeb-v0"], progress=False, train=True, episodes=3
    )
    defaults = config_from_args(SuiteConfig, build_parser().parse_args(["suite"]))
    assert defaults == SuiteConfig()
    help_text = build_parser()._subparsers._group_actions[0].choices["suite"].format_help()  # type: ignore[union-attr]
    for f in dataclasses.fields(SuiteConfig):
        assert f.metadata["help"].split(" (")[0][:30] in " ".join(help_text.split()), f.name


def test_every_env_of_the_plan_is_registered() -> None:
    import lynn

    assert [e.env_id for e in PLAN] and {e.env_id for e in PLAN} <= set(lynn.ENV_IDS)


def test_lm_rows_come_from_the_zoo_or_are_left_out_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LYNN_ZOO", str(tmp_path))  # an empty zoo
    assert _lm_model(SuiteConfig(), "Lynn/EVMQuest-v0", {}) is None
    assert "no 'lm' row on Lynn/EVMQuest-v0" in capsys.readouterr().out
    assert _lm_model(SuiteConfig(lm_model="zoo:x"), "Lynn/EVMQuest-v0", {}) == "zoo:x"


def test_the_coordination_rows_rank_by_reward(tmp_path: Path) -> None:
    out = run_suite(SuiteConfig(out=str(tmp_path), env=["Lynn/Coordination-v0"], episodes=1, progress=False))
    rows = out["rows"]
    assert len(rows) == 7 and out["imagined_vs_real"] is None
    assert [r.reward for r in rows] == sorted((r.reward for r in rows), reverse=True)
    assert rows[0].agent == "oracle" and "of oracle" in (tmp_path / "leaderboard.md").read_text()
    from lynn.errors import UsageError

    with pytest.raises(UsageError, match="not a registered id"):
        run_suite(SuiteConfig(out=str(tmp_path), env=["Lynn/Nope-v0"]))
