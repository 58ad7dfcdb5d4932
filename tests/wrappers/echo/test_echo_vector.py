from __future__ import annotations

import os
import signal
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import NoAsyncCallError
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from lynn.wrappers.echo.vector import EchoVectorEnv
from tests.wrappers.echo._echo_envs import DelayEnv, EchoTextEnv


def envs_kinds(envs: EchoVectorEnv) -> set[str]:
    from lynn.wrappers.echo.vector import _layout_kinds

    return _layout_kinds(envs._layout)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_step_matches_sync_vector_env_same_step_autoreset() -> None:
    fns = [lambda: gym.make("CartPole-v1")] * 3
    ours = EchoVectorEnv(fns)
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        assert ours.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        assert ours.observation_space == ref.observation_space
        obs, _ = ours.reset(seed=7)
        ref_obs, _ = ref.reset(seed=7)
        np.testing.assert_allclose(obs, ref_obs)
        finished = 0
        for t in range(120):
            actions = np.array([t % 2, (t // 3) % 2, 1])
            o, r, term, trunc, info = ours.step(actions)
            ro, rr, rterm, rtrunc, rinfo = ref.step(actions)
            np.testing.assert_allclose(o, ro)
            np.testing.assert_array_equal(r, rr)
            np.testing.assert_array_equal(term, rterm)
            assert "env_id" not in info  # step() infos are Gymnasium's own
            if term.any():
                finished += 1
                np.testing.assert_array_equal(info["_final_obs"], rinfo["_final_obs"])
                for i in np.flatnonzero(term):
                    np.testing.assert_allclose(info["final_obs"][i], rinfo["final_obs"][i])
        assert finished > 0
    finally:
        ours.close()
        ref.close()


def test_recv_returns_the_fastest_batch_and_stragglers_keep_running() -> None:
    delays = [0.0, 0.0, 0.5, 0.5]
    envs = EchoVectorEnv([lambda d=d: DelayEnv(delay=d) for d in delays], batch_size=2)
    try:
        envs.async_reset(seed=0)
        obs, reward, term, trunc, info = envs.recv()
        assert obs.shape == (2, 1) and len(info["env_id"]) == 2
        envs.send(np.zeros(2, dtype=np.int64), info["env_id"])
        # Slow envs 2 and 3 are now stepping; the fast ones must come back without waiting for them.
        seen: list[int] = []
        for _ in range(6):
            obs, reward, term, trunc, info = envs.recv()
            ids = info["env_id"].tolist()
            seen += ids
            if set(ids) <= {2, 3}:
                assert (reward == 0.0).all()  # reset results
            envs.send(np.zeros(len(ids), dtype=np.int64), ids)
        assert seen.count(0) + seen.count(1) >= 8  # fast envs stepped repeatedly
    finally:
        envs.close()


def test_text_parts_are_pickled_and_the_rest_shared() -> None:
    envs = EchoVectorEnv([EchoTextEnv, EchoTextEnv], batch_size=1)
    try:
        # Per space: the custom text part through the pipe, the Discrete part in shared memory.
        assert envs._layout[1]["text"][0] == "P" and envs._layout[1]["step"][0] == "S"
        obs, info = envs.reset(seed=0)
        assert obs["text"] == ("héllo ✓", "héllo ✓")
        obs, reward, term, trunc, info = envs.step(("añb", "🙂"))
        assert obs["text"] == ("you said añb", "you said 🙂")
        np.testing.assert_array_equal(reward, [3.0, 1.0])
        envs.async_reset()
        obs, *_, info = envs.recv()
        assert len(obs["text"]) == 1 and len(info["env_id"]) == 1
    finally:
        envs.close()


def test_dead_worker_is_restarted_and_reported() -> None:
    envs = EchoVectorEnv([lambda: DelayEnv(episode=50)] * 3, batch_size=3, on_error="restart")
    try:
        obs, info = envs.reset(seed=0)
        victim = int(info["pid"][1])
        os.kill(victim, signal.SIGKILL)
        obs, reward, term, trunc, info = envs.step(np.zeros(3, dtype=np.int64))
        np.testing.assert_array_equal(trunc, [False, True, False])
        assert info["worker_restarted"][1] and not info["_worker_restarted"][0]
        assert "killed by signal 9" in info["error"][1]
        assert obs[1, 0] == 0.0 and obs[0, 0] == 1.0  # env 1 reset, the others undisturbed
        assert envs.restarts == 1 and not _alive(victim)
        obs, *_ = envs.step(np.zeros(3, dtype=np.int64))
        np.testing.assert_array_equal(obs[:, 0], [2.0, 1.0, 2.0])
    finally:
        envs.close()


def test_worker_that_exits_mid_step_is_restarted() -> None:
    envs = EchoVectorEnv(
        [lambda: DelayEnv(die_at=2, episode=50), lambda: DelayEnv(episode=50)], on_error="restart"
    )
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(2, dtype=np.int64))
        _, _, _, trunc, info = envs.step(np.zeros(2, dtype=np.int64))
        assert trunc.tolist() == [True, False] and "exit code 3" in info["error"][0]
    finally:
        envs.close()


def test_close_leaves_no_worker_process() -> None:
    envs = EchoVectorEnv([lambda: DelayEnv(delay=0.2)] * 3, batch_size=1)
    envs.async_reset(seed=0)
    envs.recv()
    pids = envs.worker_pids()
    envs.close()  # with steps still in flight
    deadline = time.time() + 5
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def test_garbage_collection_stops_workers() -> None:
    envs = EchoVectorEnv([lambda: DelayEnv()] * 2)
    pids = envs.worker_pids()
    del envs
    import gc

    gc.collect()
    time.sleep(0.5)
    assert not any(_alive(p) for p in pids)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        EchoVectorEnv([lambda: DelayEnv()] * 2, batch_size=3)
    envs = EchoVectorEnv([lambda: DelayEnv()] * 2, batch_size=1)
    try:
        with pytest.raises(NoAsyncCallError, match="send"):
            envs.recv()
        envs.reset()
        with pytest.raises(ValueError, match="actions"):
            envs.send(np.zeros(1, dtype=np.int64), [0, 1])
        with pytest.raises(ValueError, match="out of range"):
            envs.send(np.zeros(1, dtype=np.int64), [2])
        with pytest.raises(ValueError, match="distinct"):
            envs.send(np.zeros(2, dtype=np.int64), [1, 1])
        assert not envs._pending  # none of the bad calls left anything in flight
    finally:
        envs.close()


def test_lynn_coordination_env_runs_through_shared_memory() -> None:
    import lynn  # noqa: F401

    if "Lynn/Coordination-v0" not in gym.registry:
        pytest.skip("Lynn/Coordination-v0 not registered")
    fns = [lambda: gym.make("Lynn/Coordination-v0")] * 2
    ours = EchoVectorEnv(fns)
    ref = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        assert envs_kinds(ours) == {"S"}  # Dict of Boxes: shared memory, no pickling
        obs, _ = ours.reset(seed=1)
        ref_obs, _ = ref.reset(seed=1)
        for _ in range(20):
            actions = np.flatnonzero(obs["action_mask"][0])[:1].repeat(2)
            for key in obs:
                np.testing.assert_array_equal(obs[key], ref_obs[key])
            obs, r, *_ = ours.step(actions)
            ref_obs, rr, *_ = ref.step(actions)
            np.testing.assert_allclose(r, rr)
    finally:
        ours.close()
        ref.close()
