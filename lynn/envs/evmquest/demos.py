"""EVMQuest demonstrations drawn without a chain: the oracle's first step of atomic tasks.

It lives with the env because it replays the env's own instance draw (``lynn.lm`` imports no env module).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lynn.lm.data import EVM_TEST_SEEDS, Demo, evm_instance_split
from lynn.lm.prompts import EVMQUEST, evm_reply, render


def synth_evm_demos(tasks: Iterable[str], seeds: Iterable[int], profile: str = "bsc") -> Iterator[Demo]:
    """The oracle's first-step demonstrations of EVMQuest tasks, drawn without starting a chain.

    An EVMQuest reset draws the instance (parameters, then the instruction's template) from the env's
    ``np_random`` seeded with the reset seed, before it touches the chain; an atomic task's oracle script
    is a function of those parameters and the profile's contract names alone
    (:func:`lynn.envs.evmquest.spec.oracle_steps` with the reset's state unused). This replays exactly that
    draw, so a record equals the one ``lynn collect --agent oracle`` writes for the same task and seed
    (``tests/lm/test_data.py`` compares them byte for byte) at a few milliseconds instead of seconds: a
    cheap way to many seeds per task. Only step 0 of atomic tasks: a composite task's later steps read
    the chain, so they are collected. ``success`` is None: the script was not run.

    Args:
        tasks: atomic task ids.
        seeds: reset seeds (train instances only: ``>= EVM_TEST_SEEDS``).
        profile: the env's ``profile``.
    """
    from gymnasium.utils import seeding

    from lynn.envs.evmquest import noise
    from lynn.envs.evmquest.spec import instantiate, load_specs, oracle_steps
    from lynn.envs.evmquest.world import AGENT, FRIEND, PROFILES, role_names

    specs = load_specs()
    prof = PROFILES[profile]
    names = role_names(prof)
    globals_ = {"native": prof.native, "wrapped": prof.wrapped, "dex": prof.dex}
    accounts = {"agent": AGENT.address, "friend": FRIEND.address}
    seeds = list(seeds)
    for task_id in tasks:
        spec = specs[task_id]
        if spec.split != "atomic":
            raise ValueError(f"{task_id} is a {spec.split} task: only atomic tasks are drawn without a chain")
        for seed in seeds:
            if evm_instance_split(seed) != "train":
                raise ValueError(f"seed {seed} is a held-out instance (< {EVM_TEST_SEEDS})")
            rng, _ = seeding.np_random(int(seed))
            inst = instantiate(spec, rng, AGENT.address, names, globals_, accounts)
            inst.scoring = "default"
            inst.params["hidden"] = noise.draw(task_id, rng)
            obs = {
                "instruction": inst.instruction,
                "agent_address": AGENT.address,
                "contracts": dict.fromkeys(names.values(), ""),
                "step": 0,
                "last_result": "",
            }
            script = oracle_steps(inst, names, {})[0]
            yield Demo(
                messages=[*render(EVMQUEST, obs), {"role": "assistant", "content": evm_reply(script)}],
                env_id=EVMQUEST,
                task_id=task_id,
                seed=int(seed),
                split="train",
                step=0,
                source="oracle-synth",
                success=None,
            )
