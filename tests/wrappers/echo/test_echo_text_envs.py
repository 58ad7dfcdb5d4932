"""The suite's text-observation envs (``Lynn/EVMQuest-v0``, ``Lynn/LiveWeb-v0``) through EchoVectorEnv.

Default settings (shared memory on, SAME_STEP, ``on_error="raise"``): the ``UnicodeText`` parts of
their ``Dict`` observations are pickled, the numeric parts go through shared memory, and every
process the envs start (the chain and script sandbox, the browser and site server) is gone after
``close()``.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
import pytest

import lynn  # noqa: F401
from lynn.wrappers.echo.vector import EchoVectorEnv, _layout_kinds
from tests.conftest import _descendants

pytestmark = pytest.mark.slow


def _new_processes(before: set[int]) -> list[tuple[int, str]]:
    helpers = ("resource_tracker", "forkserver")
    return [
        (p, c) for p, c in _descendants(os.getpid()) if p not in before and not any(h in c for h in helpers)
    ]


def _wait_gone(before: set[int]) -> list[tuple[int, str]]:
    deadline = time.time() + 10
    left = _new_processes(before)
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = _new_processes(before)
    return left


def test_evmquest_through_echo_vector_env() -> None:
    before = {p for p, _ in _descendants(os.getpid())}
    fn = lambda: gym.make("Lynn/EVMQuest-v0")  # noqa: E731
    envs = EchoVectorEnv([fn, fn], batch_size=1)
    try:
        kinds = envs._layout[1]
        assert kinds["chain_id"][0] == "S" and kinds["instruction"][0] == "P"
        obs, info = envs.reset(seed=[11, 12])
        ref = fn()
        try:
            ref_obs, _ = ref.reset(seed=11)
        finally:
            ref.close()
        assert obs["instruction"][0] == ref_obs["instruction"]  # the same task from the same seed
        assert (
            obs["chain_id"][0] == ref_obs["chain_id"]
            and obs["contracts"].keys() == ref_obs["contracts"].keys()
        )
        assert list(info["task_id"])
        # A bad action (not Python, non-ASCII) gives an error in info, as the env's own contract says.
        obs, reward, term, trunc, info = envs.step(("✓ this is not python", "print('héllo')"))
        assert reward.tolist() == [0.0, 0.0] and info["_error"][0] and info["error"][0]
        envs.async_reset(seed=[3, 4])
        obs, _, _, _, info = envs.recv()
        assert len(obs["instruction"]) == 1 and len(info["env_id"]) == 1
    finally:
        envs.close()
    assert not _wait_gone(before)


def test_liveweb_through_echo_vector_env() -> None:
    before = {p for p, _ in _descendants(os.getpid())}
    fn = lambda: gym.make("Lynn/LiveWeb-v0")  # noqa: E731
    envs = EchoVectorEnv([fn, fn])
    try:
        assert _layout_kinds(envs._layout) == {"P"}  # text only: all pickled
        obs, info = envs.reset(seed=[1, 2])
        assert all(isinstance(g, str) and g for g in obs["goal"])
        assert all("[ref=" in a or "ref=" in a or a for a in obs["axtree"])
        obs, reward, term, trunc, info = envs.step(("noop()", "click('no-such-element')"))
        assert reward.tolist() == [0.0, 0.0]
        assert info["_error"][1] and info["error"][1]  # the bad click is reported, not raised
        assert np.all(~term)
    finally:
        envs.close()
    assert not _wait_gone(before)
