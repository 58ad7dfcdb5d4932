"""EVMQuest's compact script form (``abi("Contract", "fn")`` for inline ABI JSON) and the oracle demos drawn
without a chain: what the model trains on must be what the env runs, on every oracle task."""

from __future__ import annotations

from pathlib import Path

import pytest

from lynn.envs.evmquest.compact import compact_reply, compact_script, expand_script


def _atomic_tasks() -> list[str]:
    from lynn.envs.evmquest.spec import load_specs

    return sorted(t for t, s in load_specs().items() if s.split == "atomic")


def test_compact_form_round_trips_on_every_atomic_oracle_script() -> None:
    """Every atomic task's oracle script (3 seeds each) loses its ABI JSON in the compact form and the
    env's expansion gives back the very script the oracle sends."""
    from lynn.agents.llm.parse import parse_evm_reply
    from lynn.envs.evmquest.demos import synth_evm_demos

    tasks = _atomic_tasks()
    assert len(tasks) >= 60
    shrunk, chars = 0, [0, 0]
    for d in synth_evm_demos(tasks, range(100_000, 100_003)):
        plain = parse_evm_reply(d.messages[-1]["content"])
        small = compact_reply(d.messages[-1])["content"]
        assert "json.loads" not in small, d.task_id
        if "json.loads" in plain:
            shrunk += 1
            chars[0] += len(plain)
            chars[1] += len(small)
            assert len(small) < len(plain), d.task_id
        else:
            assert small == d.messages[-1]["content"]
        assert expand_script(parse_evm_reply(small)) == plain, d.task_id
    assert shrunk >= 0.7 * 3 * len(tasks) and chars[1] < 0.5 * chars[0]  # the ABI was most of it


def test_compact_scripts_run_and_pass_in_the_env() -> None:
    """Executed: compact replies, parsed as the LM agent parses them and expanded by the env, solve atomic
    and composite tasks."""
    import gymnasium as gym

    import lynn  # noqa: F401
    from lynn.agents import make_agent
    from lynn.agents.llm.parse import parse_evm_reply
    from lynn.lm.prompts import evm_reply

    tasks = ("erc20_approve", "swap_exact_tokens_for_tokens", "composite_approve_add_liquidity")
    env = gym.make("Lynn/EVMQuest-v0", task=list(tasks))  # one chain for all three (a reset reverts it)
    try:
        agent = make_agent("oracle", env)
        for task in tasks:
            obs, info = env.reset(seed=100_004, options={"task_id": task})
            agent.reset(seed=100_004)
            done = False
            while not done:
                script = agent.act(obs, info)
                small = compact_script(script)
                if not script.startswith("{"):
                    assert "abi(" in small and "json.loads" not in small
                obs, _, term, trunc, info = env.step(parse_evm_reply(evm_reply(small)))
                assert not info.get("error"), (task, info["error"])
                done = term or trunc
            assert info["task_id"] == task and info["success"], task
    finally:
        env.close()


def test_expansion_leaves_what_it_cannot_resolve() -> None:
    assert expand_script("x = 1") == "x = 1"
    bad = 'ABI = abi("NoSuchContract", "transfer")'
    assert expand_script(bad) == bad  # the sandbox then reports the NameError
    assert expand_script('ABI = abi("LynnToken", "noSuchFunction")').startswith("ABI = abi(")
    good = expand_script('ABI = abi("LynnToken", "transfer")')
    assert good.startswith("import json\n") and '"name":"transfer"' in good
    assert compact_script("x = json.loads('[1, 2')") == "x = json.loads('[1, 2')"
    assert compact_script("x = json.loads('[{\"a\": 1}]')") == "x = json.loads('[{\"a\": 1}]')"


def test_synthetic_demos_equal_the_collected_ones(evm_demos: Path) -> None:
    """A demonstration drawn without a chain equals ``lynn collect``'s for the same task and seed, byte
    for byte (prompt and reply), and held-out seeds are refused."""
    from lynn.envs.evmquest.demos import synth_evm_demos
    from lynn.lm.data import read_demos

    real = [d for d in read_demos(evm_demos) if d.step == 0]
    assert len(real) >= 30
    for d in real:
        syn = next(synth_evm_demos([d.task_id], [d.seed]))
        assert syn.messages == d.messages, (d.task_id, d.seed)
        assert syn.split == "train" and syn.source == "oracle-synth"
    with pytest.raises(ValueError, match="held-out"):
        next(synth_evm_demos(["wbnb_deposit"], [5]))
    with pytest.raises(ValueError, match="composite"):
        next(synth_evm_demos(["composite_approve_add_liquidity"], [100_000]))
