"""The runner writes episode records of the declared shape (:class:`lynn.records.EpisodeRecord`)."""

from __future__ import annotations

import typing
from pathlib import Path

from lynn.eval.runner import EvalConfig, evaluate, read_records, run_dir
from lynn.records import EpisodeRecord
from tests.conftest import GUESS

CHEAT = "tests.eval.test_leaderboard:_Oracle"


class _Crash:
    """Raises on its second step of every episode: a crash is a record too."""

    def __init__(self, env, **kw) -> None:
        self.steps = 0

    def reset(self, seed=None) -> None:
        self.steps = 0

    def act(self, obs, info):
        self.steps += 1
        if self.steps > 1:
            raise RuntimeError("boom")
        return 0

    def observe(self, *a) -> None:
        pass


def _records(cfg: EvalConfig) -> list[EpisodeRecord]:
    evaluate(cfg)
    return read_records(run_dir(cfg) / "episodes.jsonl")


def test_every_record_has_the_declared_keys_and_types(tmp_path: Path) -> None:
    required, optional = EpisodeRecord.__required_keys__, EpisodeRecord.__optional_keys__
    hints = typing.get_type_hints(EpisodeRecord)
    ok = _records(
        EvalConfig(GUESS, agent=CHEAT, episodes=3, out=str(tmp_path), label="cheat", progress=False)
    )
    crashed = _records(
        EvalConfig(
            GUESS, agent="tests.eval.test_records:_Crash", episodes=2, out=str(tmp_path), progress=False
        )
    )
    assert ok and crashed and all(r.get("traceback") for r in crashed)
    for rec in ok + crashed:
        assert required <= set(rec) <= required | optional, set(rec) ^ (required | optional)
        for key in ("episode", "seed", "steps", "step_errors"):
            assert isinstance(rec[key], int), (key, rec[key])
        assert isinstance(rec["reward"], float) and isinstance(rec["success"], bool)
        assert set(rec["timings"]) >= {"total_s"}
    assert all(r["label"] == "cheat" for r in ok) and all("label" not in r for r in crashed)
    assert set(hints) == required | optional
