"""The real pool's default workers on a fresh clone: the zoo's EVMQuest LM (``zoo:evm-lm``), nothing trained.

A temporary zoo (``$LYNN_ZOO``) holds a tiny LM as ``evm-lm`` (and ``evm-draft``). No process starts
here: workers boot on their first call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lynn import zoo
from lynn.agents.workers import NEEDS_DRAFT, ZOO_MAX_NEW_TOKENS, evmquest_pool
from lynn.envs.coordination import CoordinationEnv

EVM = "Lynn/EVMQuest-v0"


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's situation with an empty zoo and no LYNN_LM_* variables."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LYNN_ZOO", str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    monkeypatch.delenv("LYNN_LM_TARGET", raising=False)
    monkeypatch.delenv("LYNN_LM_DRAFT", raising=False)
    return tmp_path


def _ship(name: str, folder: Path, role: str) -> str:
    zoo.add(name, folder, {"kind": "lm-" + role, "description": "test", "default_for": {EVM: role}})
    return str(zoo.zoo_dir() / name)


def test_without_a_zoo_lm_the_factory_says_what_to_pass(clone: Path) -> None:
    with pytest.raises(ValueError, match=r"no lm for Lynn/EVMQuest-v0: pass model=PATH"):
        evmquest_pool()
    with pytest.raises(ValueError, match=r"train one with `lynn train lm`"):
        evmquest_pool(target="no/such/model")
    # The oracle alone needs no model at all.
    assert [w.name for w in evmquest_pool(include=["oracle"])] == ["oracle-f30"]


def test_the_default_real_pool_uses_the_zoo_lm(clone: Path, tiny_lm: Path) -> None:
    shipped = _ship("evm-lm", tiny_lm, "lm")
    env = CoordinationEnv(scenario="real-pool", scenario_kwargs={"cache": None})
    try:
        workers = env.scenario.all_workers()
        assert [w.name for w in workers] == ["lm-target", "lm-sampler", "oracle-f30"]
        # The zoo LM's pool caps a reply at 128 tokens (a failing small LM runs to its budget 3 times).
        assert workers[0].spec.lm == {"model": shipped, "max_new_tokens": ZOO_MAX_NEW_TOKENS}
        assert ZOO_MAX_NEW_TOKENS == 128
        assert workers[1].spec.lm["model"] == shipped and not workers[1].deterministic
        assert workers[1].spec.lm["max_new_tokens"] == 128
        assert env.action_space.n == 3 and not any(w.started for w in workers)
    finally:
        env.close()


def test_the_zoo_draft_joins_the_default_pool(clone: Path, tiny_lm: Path) -> None:
    _ship("evm-lm", tiny_lm, "lm")
    draft = _ship("evm-draft", tiny_lm, "draft")
    names = [w.name for w in evmquest_pool()]
    assert names == ["lm-target", *NEEDS_DRAFT, "lm-sampler", "oracle-f30"]
    assert next(w for w in evmquest_pool() if w.name == "lm-draft").spec.lm["model"] == draft


def test_a_changed_zoo_file_is_refused_with_its_name(clone: Path, tiny_lm: Path) -> None:
    shipped = Path(_ship("evm-lm", tiny_lm, "lm"))
    (shipped / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"config.json changed.*lynn zoo build evm-lm"):
        evmquest_pool()


def test_draft_workers_join_when_a_draft_is_given_and_refuse_without(clone: Path, tiny_lm: Path) -> None:
    with pytest.raises(ValueError, match=r"need a draft model.*--role draft"):
        evmquest_pool(target=str(tiny_lm), include=["lm-target", "lm-draft"])
    names = [w.name for w in evmquest_pool(target=str(tiny_lm), draft=str(tiny_lm))]
    assert names == ["lm-target", *NEEDS_DRAFT, "lm-sampler", "oracle-f30"]


def test_the_environment_variables_choose_the_models(
    clone: Path, tiny_lm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LYNN_LM_TARGET", str(tiny_lm))
    monkeypatch.setenv("LYNN_LM_DRAFT", str(tiny_lm))
    workers = evmquest_pool()  # an empty zoo: the variables win
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
