"""EchoSB3VecEnv against SB3's SubprocVecEnv, written from what SB3's tests/test_vec_envs.py checks.

Each test runs the same assertions on ``SubprocVecEnv`` (the anchor) and on ``EchoSB3VecEnv``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from gymnasium import spaces

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack, VecNormalize  # noqa: E402

from lynn.wrappers.echo.sb3 import EchoSB3VecEnv  # noqa: E402
from tests.wrappers.echo._echo_envs import FaultEnv, SpaceEnv, StepEnv  # noqa: E402

N = 3
KINDS = ["subproc", "echo"]


def vec(kind: str, fns, **kwargs):
    cls = SubprocVecEnv if kind == "subproc" else EchoSB3VecEnv
    return cls(fns, start_method="fork", **kwargs)  # fork: cheapest start on this 2-core machine


def _box_env():
    return Monitor(SpaceEnv(spaces.Box(low=np.zeros(2), high=np.ones(2))))


@pytest.mark.parametrize("kind", KINDS)
def test_attribute_calls_options_and_render(kind: str) -> None:
    venv = vec(kind, [_box_env] * N)
    try:
        venv.seed(0)
        venv.reset()
        image = venv.render()
        assert image is not None and image.ndim == 3  # the tiled frames of every env
        assert not venv.has_attr("dummy")
        venv.set_attr("dummy", 12)
        assert venv.get_attr("dummy") == [12] * N
        venv.env_method("set_wrapper_attr", "dummy2", 2)
        assert venv.get_attr("dummy2") == [2] * N
        results = venv.env_method("custom_method", 1, indices=None, dim_1=2)
        assert len(results) == N and all((r == np.ones((1, 2))).all() for r in results)
        for i in range(N):
            assert venv.set_attr("dummy1", i, indices=i) is None
        assert venv.get_attr("dummy1") == list(range(N))
        assert len(venv.env_method("custom_method", 1, indices=[0, 2], dim_1=3)) == 2
        venv.env_method("set_wrapper_attr", "t", 12, indices=[0, -1])
        assert venv.get_attr("t") == [12, 0, 12] and venv.get_attr("t", indices=[-1]) == [12]
        assert venv.get_attr("current_options")[0] is None
        venv.set_options({"hello": 1})
        venv.reset()
        assert venv.get_attr("current_options") == [{"hello": 1}] * N
        venv.reset()
        assert venv.get_attr("current_options")[0] is None  # options last one reset
        options = [{"hello": 1}] * N
        options[0] = {"other": 2}
        venv.set_options(options)
        venv.reset()
        assert venv.get_attr("current_options") == options
        assert venv.env_is_wrapped(Monitor) == [True] * N
    finally:
        venv.close()


@pytest.mark.parametrize("wrapper", [None, VecNormalize, VecFrameStack])
@pytest.mark.parametrize("kind", KINDS)
def test_terminal_observation(kind: str, wrapper) -> None:
    steps = [5 + i for i in range(N)]
    venv = vec(kind, [functools.partial(StepEnv, n) for n in steps])
    if wrapper is VecFrameStack:
        venv = VecFrameStack(venv, n_stack=2)
    elif wrapper is VecNormalize:
        venv = VecNormalize(venv)
    try:
        prev = venv.reset()
        for step in range(1, max(steps) + 1):
            obs, _, dones, infos = venv.step(np.zeros(N, dtype=np.int64))
            for p, o, done, info, last in zip(prev, obs, dones, infos, steps, strict=True):
                assert done == (step == last)
                if not done:
                    assert "terminal_observation" not in info
                    continue
                assert np.all(p < info["terminal_observation"]) and np.all(o < p)
                if wrapper is None:
                    assert np.all(p + 1 == info["terminal_observation"]) and np.all(o == 0)
                    assert info["TimeLimit.truncated"]
            prev = obs
    finally:
        venv.close()


SPACES = {
    "discrete": spaces.Discrete(2),
    "multidiscrete": spaces.MultiDiscrete([2, 3]),
    "multibinary": spaces.MultiBinary(3),
    "box": spaces.Box(low=np.zeros(2, np.float32), high=np.ones(2, np.float32)),
}
SPACES["dict"] = spaces.Dict(dict(SPACES))
SPACES["tuple"] = spaces.Tuple(tuple(v for k, v in SPACES.items() if k != "dict"))


@pytest.mark.parametrize("name", list(SPACES))
@pytest.mark.parametrize("kind", KINDS)
def test_observation_and_action_spaces_incl_dict_and_tuple_actions(kind: str, name: str) -> None:
    space = SPACES[name]
    venv = vec(kind, [functools.partial(SpaceEnv, space, space)] * N)  # obs and action space alike
    try:
        obs = venv.reset()
        for _ in range(4):
            actions = [venv.action_space.sample() for _ in range(N)]  # SB3 passes a per-env list
            obs, _, dones, _ = venv.step(actions)
        if isinstance(space, spaces.Dict):
            assert obs.keys() == space.spaces.keys()
            for key, values in obs.items():
                assert len(values) == N and all(space[key].contains(v) for v in values)
        elif isinstance(space, spaces.Tuple):
            assert len(obs) == len(space.spaces)
            for values, sub in zip(obs, space.spaces, strict=True):
                assert all(sub.contains(v) for v in values)
        else:
            assert obs.shape[0] == N and all(space.contains(v) for v in obs)
    finally:
        venv.close()


def test_same_seeds_give_the_anchors_observations() -> None:
    runs = {}
    for kind in KINDS:
        venv = make_vec_env(
            "Pendulum-v1",
            n_envs=N,
            seed=0,
            vec_env_cls=SubprocVecEnv if kind == "subproc" else EchoSB3VecEnv,
            vec_env_kwargs={"start_method": "fork"},
        )
        try:
            first = venv.reset()
            actions = [np.array([0.5 * i], np.float32) for i in range(N)]
            runs[kind] = (first, *venv.step(actions)[:3])
            venv.seed(3)
            a = venv.reset()
            venv.seed(3)
            assert np.allclose(a, venv.reset())
        finally:
            venv.close()
    for x, y in zip(runs["subproc"], runs["echo"], strict=True):
        np.testing.assert_allclose(x, y)


@pytest.mark.parametrize("kind", KINDS)
def test_unseeded_envs_differ(kind: str) -> None:
    venv = vec(kind, [_box_env] * N)
    try:
        venv.seed()
        obs = venv.reset()
        assert not np.allclose(obs[0], obs[1]) and not np.allclose(obs[1], obs[2])
    finally:
        venv.close()


@pytest.mark.parametrize("kind", KINDS)
def test_env_is_wrapped_per_env(kind: str) -> None:
    venv = vec(kind, [lambda: SpaceEnv(spaces.Box(0, 1, (2,))), _box_env])
    try:
        assert venv.env_is_wrapped(Monitor) == [False, True]
    finally:
        venv.close()


@pytest.mark.parametrize("kind", KINDS)
def test_env_exception_propagates(kind: str) -> None:
    venv = vec(kind, [FaultEnv] * 2)
    try:
        venv.reset()
        # SubprocVecEnv's worker dies and its parent sees only EOFError; ours re-raises the env's error.
        with pytest.raises(ValueError if kind == "echo" else EOFError):
            venv.step(np.array([1, 0]))
    finally:
        try:
            venv.close()
        except (EOFError, BrokenPipeError):  # the anchor cannot close a vec env with a dead worker
            for proc in venv.processes:
                proc.terminate()
                proc.join()


def test_restart_is_an_episode_end_for_sb3() -> None:
    venv = EchoSB3VecEnv([FaultEnv] * 2, start_method="fork", on_error="restart", timeout=0.5)
    try:
        venv.reset()
        venv.step(np.array([0, 0]))
        obs, rewards, dones, infos = venv.step(np.array([2, 1]))  # env 0 hangs, env 1 raises
        assert dones.tolist() == [True, True]
        for info in infos:
            assert info["TimeLimit.truncated"] and info["terminal_observation"].tolist() == [1.0]
        assert "timed out" in infos[0]["error"] and "ValueError" in infos[1]["error"]
        assert obs[:, 0].tolist() == [0.0, 0.0] and venv.restarts == 2
    finally:
        venv.close()
