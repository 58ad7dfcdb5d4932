from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "echo_actor_learner.py"


@pytest.mark.slow
def test_actor_learner_example_runs_both_modes(capsys) -> None:
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("echo_actor_learner_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(
        ["--updates", "3", "--rollouts", "2", "--step-latency", "0", "--target", "1", "--context", "fork"]
    )
    out = capsys.readouterr().out
    assert "pull" in out and "push_pull" in out
    for r in results:
        assert r["updates"] == 3
        assert r["stats"].rollouts_consumed == 6
        assert r["seconds_to_target"] is not None  # every CartPole episode returns >= 1
    assert results[0]["stats"].staleness_hist == {0: 6}  # pull: on-policy
