"""The real pool's default workers on a fresh clone (issue 16's Done-when): the suite LM, not a
model the repository does not ship.

No process starts here: workers boot on their first call.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lynn.agents.workers import NEEDS_DRAFT, SUITE_LM, evmquest_pool
from lynn.bench.coordination_real import SUITE_MAX_NEW_TOKENS
from lynn.envs.coordination import CoordinationEnv


def test_the_default_target_is_the_folder_the_suite_trains() -> None:
    from lynn.eval.suite_model import DEFAULT_DIR

    assert Path(SUITE_LM) == DEFAULT_DIR


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory like a fresh clone's: no models/, no LYNN_LM_* variables."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LYNN_LM_TARGET", raising=False)
    monkeypatch.delenv("LYNN_LM_DRAFT", raising=False)
    return tmp_path


def test_without_the_suite_lm_the_factory_says_which_command_makes_it(clone: Path) -> None:
    with pytest.raises(ValueError, match=r"models/suite-lm.*`lynn suite` \(or `make run`\) trains it"):
        evmquest_pool()
    with pytest.raises(ValueError, match=r"train one with `lynn train lm`"):
        evmquest_pool(target="no/such/model")
    # The oracle alone needs no model at all.
    assert [w.name for w in evmquest_pool(include=["oracle"])] == ["oracle-f30"]


def test_the_default_real_pool_uses_the_cached_suite_lm(clone: Path, tiny_lm: Path) -> None:
    shutil.copytree(tiny_lm, clone / SUITE_LM)  # as `lynn suite` leaves it after its first run
    env = CoordinationEnv(scenario="real-pool", scenario_kwargs={"cache": None})
    try:
        workers = env.scenario.all_workers()
        assert [w.name for w in workers] == ["lm-target", "lm-sampler", "oracle-f30"]
        # The suite LM's pool caps a reply at 128 tokens (its first run's calibration stays affordable).
        assert workers[0].spec.lm == {"model": SUITE_LM, "max_new_tokens": SUITE_MAX_NEW_TOKENS}
        assert SUITE_MAX_NEW_TOKENS == 128
        assert workers[1].spec.lm["model"] == SUITE_LM and not workers[1].deterministic
        assert workers[1].spec.lm["max_new_tokens"] == 128
        assert env.action_space.n == 3 and not any(w.started for w in workers)
    finally:
        env.close()


def test_draft_workers_join_when_a_draft_is_given_and_refuse_without(clone: Path, tiny_lm: Path) -> None:
    with pytest.raises(ValueError, match=r"need a draft model.*--role draft"):
        evmquest_pool(target=str(tiny_lm), include=["lm-target", "lm-draft"])
    names = [w.name for w in evmquest_pool(target=str(tiny_lm), draft=str(tiny_lm))]
    assert names == ["lm-target", *NEEDS_DRAFT, "lm-sampler", "oracle-f30"]


def test_the_environment_variables_choose_the_models(
    clone: Path, tiny_lm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lynn.bench.coordination_real import suite_pool

    monkeypatch.setenv("LYNN_LM_TARGET", str(tiny_lm))
    monkeypatch.setenv("LYNN_LM_DRAFT", str(tiny_lm))
    workers = suite_pool()  # no suite LM in this folder, and none is trained: the variable wins
    assert not (clone / SUITE_LM).exists()
    draft = next(w for w in workers if w.name == "lm-draft")
    assert draft.spec.lm == {"model": str(tiny_lm)}
    assert next(w for w in workers if w.name == "lm-mars").spec.lm["draft"] == str(tiny_lm)


def test_the_reply_budget_is_an_option_of_the_pool_and_part_of_the_cache_key(
    clone: Path, tiny_lm: Path
) -> None:
    plain = evmquest_pool(target=str(tiny_lm), include=["lm-target"])[0]
    capped = evmquest_pool(target=str(tiny_lm), include=["lm-target"], max_new_tokens=64)[0]
    assert "max_new_tokens" not in plain.spec.lm and capped.spec.lm["max_new_tokens"] == 64
    assert plain.spec.key() != capped.spec.key()  # a cached run at another budget is not reused
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        evmquest_pool(target=str(tiny_lm), max_new_tokens=0)
