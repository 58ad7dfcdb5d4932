"""EchoVectorEnv / EchoSB3VecEnv against their anchors, AsyncVectorEnv and SubprocVecEnv.

Written from the behaviour Gymnasium's ``tests/vector`` and SB3's ``tests/test_vec_envs.py`` check
(our own tests, not copies). Every test that is parametrised over ``kind`` runs the same assertions
on the anchor and on ours, so each behaviour claimed is one the anchor has; where both run in one
test, their outputs are compared value for value. Tests of ours alone cover what the anchor does
not do (EnvPool-style ``send``/``recv``, timeouts that kill, restarts) or does differently by
design (shared-memory fallback for custom spaces); the module docstring of
``lynn.wrappers.echo.vector`` lists those differences.
"""

from __future__ import annotations

import functools
import gc
import logging
import multiprocessing as mp
import os
import re
import signal
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from lynn.wrappers.echo.vector import (
    EchoRecordEpisodeStatistics,
    EchoSpaceError,
    EchoTimeoutError,
    EchoVectorEnv,
    EchoWorkerError,
    _layout_kinds,
)
from tests.conftest import _descendants
from tests.wrappers.echo._echo_envs import (
    AnyText,
    CountEnv,
    FaultEnv,
    FlakyResetEnv,
    HelperProcessEnv,
    SlowEnv,
    SpaceEnv,
    WideText,
)

KINDS = ["async", "echo"]
MODES = [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP]


def vec(kind: str, fns, **kwargs):
    """The anchor (``async``) or ours (``echo``) over ``fns``."""
    cls = AsyncVectorEnv if kind == "async" else EchoVectorEnv
    return cls(fns, **kwargs)


def _workers_of_this_test(before: set[int]) -> list[tuple[int, str]]:
    helpers = ("resource_tracker", "forkserver")
    return [
        (pid, cmd)
        for pid, cmd in _descendants(os.getpid())
        if pid not in before and not any(h in cmd for h in helpers)
    ]


@pytest.fixture
def no_leaks(request):
    """Fail the test if a process it started is still alive 5 s after it ends."""
    before = {pid for pid, _ in _descendants(os.getpid())}
    yield
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("kind") == "async":
        # AsyncVectorEnv leaves its workers running when its constructor raises (until it is
        # garbage collected); collect it so that only a real leak of ours can fail here.
        gc.collect()
    deadline = time.time() + 5
    left = _workers_of_this_test(before)
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = _workers_of_this_test(before)
    assert not left, f"processes left behind: {left}"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --- same outputs as AsyncVectorEnv ---------------------------------------------------------------
@pytest.mark.parametrize("shared_memory", [True, False])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_steps_resets_and_infos_equal_async_vector_env(mode: AutoresetMode, shared_memory: bool) -> None:
    fns = [functools.partial(CountEnv, max_count=m) for m in (2, 3, 4)]
    anchor = vec("async", fns, autoreset_mode=mode, shared_memory=shared_memory)
    ours = vec("echo", fns, autoreset_mode=mode, shared_memory=shared_memory)
    try:
        assert ours.metadata["autoreset_mode"] == anchor.metadata["autoreset_mode"] == mode
        assert ours.observation_space == anchor.observation_space
        assert ours.action_space == anchor.action_space
        a, b = anchor.reset(seed=[0, 0, 1]), ours.reset(seed=[0, 0, 1])
        assert data_equivalence(a, b, exact=True), (a, b)
        dones = 0
        for t in range(12):
            actions = np.array([t % 5, (t + 1) % 5, 4])
            a, b = anchor.step(actions), ours.step(actions)
            assert data_equivalence(a, b, exact=True), (t, a, b)
            dones += int(a[2].sum())
        assert dones >= 5  # both autoreset modes were exercised many times
        a, b = anchor.reset(seed=5), ours.reset(seed=5)  # an int seed means seed + i per env
        assert data_equivalence(a, b, exact=True)
        assert b[0].tolist() == [5, 6, 7]
    finally:
        anchor.close()
        ours.close()


SPACES = {
    "box-scalar": spaces.Box(-1.0, 1.0, shape=(), dtype=np.float64),
    "box-image": spaces.Box(0, 255, shape=(16, 16, 3), dtype=np.uint8),
    "box-float16": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float16),
    "discrete-start": spaces.Discrete(5, start=-2),
    "multidiscrete": spaces.MultiDiscrete([11, 13, 17]),
    "multibinary": spaces.MultiBinary(7),
    "tuple": spaces.Tuple((spaces.Discrete(7), spaces.Box(0.0, 1.0, shape=(2,)))),
    "dict-nested": spaces.Dict(
        {
            "position": spaces.Dict({"x": spaces.Discrete(29), "y": spaces.Discrete(31)}),
            "velocity": spaces.Tuple((spaces.Discrete(37), spaces.Box(0, 255, shape=(), dtype=np.uint8))),
        }
    ),
    "text": spaces.Text(12),
    "oneof": spaces.OneOf((spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(2,)))),
    "dict-text-box": spaces.Dict(
        {"goal": spaces.Text(20), "screen": spaces.Box(0, 255, (8, 8, 3), np.uint8)}
    ),
}


@pytest.mark.parametrize("shared_memory", [True, False])
@pytest.mark.parametrize("name", list(SPACES))
def test_every_gymnasium_space_gives_the_anchors_observations(name: str, shared_memory: bool) -> None:
    fns = [functools.partial(SpaceEnv, SPACES[name])] * 2
    # Gymnasium 1.4's AsyncVectorEnv decodes Text/OneOf shared memory once, at construction, and then
    # returns that stale snapshot on every step (its read_from_shared_memory returns a tuple, not a
    # view); so for those spaces the anchor is its pickling path, which is right.
    stale = name in ("text", "oneof", "dict-text-box")
    anchor = vec(
        "async", fns, shared_memory=shared_memory and not stale, autoreset_mode=AutoresetMode.SAME_STEP
    )
    ours = vec("echo", fns, shared_memory=shared_memory)
    try:
        a, b = anchor.reset(seed=[3, 4]), ours.reset(seed=[3, 4])
        assert data_equivalence(a, b, exact=True), (a, b)
        if stale and shared_memory:
            assert "S" in _layout_kinds(ours._layout)  # ours does use shared memory for them
        for _ in range(7):  # crosses two autoresets: final_obs of every space type too
            a, b = anchor.step(np.array([0, 1])), ours.step(np.array([0, 1]))
            assert data_equivalence(a, b, exact=True), (a, b)
    finally:
        anchor.close()
        ours.close()


CUSTOM = {
    "custom-text": AnyText(),
    "dict-custom-text-box": spaces.Dict(
        {"text": AnyText(), "screen": spaces.Box(0, 255, (8, 8, 3), np.uint8)}
    ),
    "sequence": spaces.Sequence(spaces.Discrete(4), stack=True),
    "graph": spaces.Graph(node_space=spaces.Discrete(3), edge_space=None),
    "text-subclass": WideText(8),
}


@pytest.mark.parametrize("name", list(CUSTOM))
def test_spaces_without_a_shared_layout_are_pickled_by_default(name: str) -> None:
    # The anchor needs shared_memory=False for these; ours falls back per space part by itself.
    fns = [functools.partial(SpaceEnv, CUSTOM[name])] * 2
    if name == "text-subclass":  # the anchor accepts it, then cannot encode "✓" in its buffer
        anchor = AsyncVectorEnv(fns, shared_memory=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(KeyError):
                anchor.reset(seed=0)
        anchor.close(terminate=True)
    else:
        with pytest.raises((ValueError, TypeError)):
            AsyncVectorEnv(fns, shared_memory=True).close(terminate=True)
    anchor = vec("async", fns, shared_memory=False, autoreset_mode=AutoresetMode.SAME_STEP)
    ours = vec("echo", fns)  # shared_memory=True (the default)
    try:
        a, b = anchor.reset(seed=[3, 4]), ours.reset(seed=[3, 4])
        assert _same(a, b)
        for _ in range(4):
            a, b = anchor.step(np.array([0, 1])), ours.step(np.array([0, 1]))
            assert _same(a, b)
        if name == "dict-custom-text-box":  # the Box part still went through shared memory
            assert ours._layout[1]["screen"][0] == "S" and ours._layout[1]["text"][0] == "P"
    finally:
        anchor.close()
        ours.close()


def _same(a, b) -> bool:
    # Graph samples are GraphInstance namedtuples of arrays: compare them field by field.
    if isinstance(a, spaces.GraphInstance):
        return isinstance(b, spaces.GraphInstance) and all(
            (x is None and y is None) or np.array_equal(x, y) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) and a.dtype == object:
        return a.shape == b.shape and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return data_equivalence(a, b, exact=True)


# --- construction, state machine, closing -----------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_mismatched_spaces_are_refused_at_construction(kind: str, no_leaks) -> None:
    fns = [lambda: gym.make("CartPole-v1")] * 3
    fns[2] = lambda: gym.make("FrozenLake-v1")
    with pytest.raises(RuntimeError) as err:
        vec(kind, fns)
    if kind == "echo":
        assert isinstance(err.value, ValueError) and isinstance(err.value, EchoSpaceError)
        assert "env 2's observation space Discrete(16)" in str(err.value)
    # Same observation space, different action space.
    fns = [lambda: SpaceEnv(spaces.Discrete(3)), lambda: SpaceEnv(spaces.Discrete(3), spaces.Discrete(3))]
    with pytest.raises(RuntimeError, match="action space"):
        vec(kind, fns)


def _die_while_built() -> gym.Env:
    os._exit(7)


def test_env_fn_errors_at_construction_are_raised(no_leaks) -> None:
    # Ours only: AsyncVectorEnv's worker dies on such an error and its parent sees only EOFError.
    def failing() -> gym.Env:
        raise OSError("no such site")

    with pytest.raises(OSError, match="no such site"):
        EchoVectorEnv([CountEnv, failing])
    with pytest.raises(EchoWorkerError, match="exit code 7"):
        EchoVectorEnv([CountEnv, _die_while_built])


@pytest.mark.parametrize("kind", KINDS)
def test_observation_mode_different_batches_differing_bounds(kind: str) -> None:
    fns = [lambda: SpaceEnv(spaces.Box(0, 1, (2,))), lambda: SpaceEnv(spaces.Box(0, 5, (2,)))]
    with pytest.raises(RuntimeError):
        vec(kind, fns)
    envs = vec(kind, fns, observation_mode="different")
    try:
        assert envs.observation_space.high[1].tolist() == [5, 5]
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 2)
    finally:
        envs.close()


@pytest.mark.parametrize("kind", KINDS)
def test_calls_out_of_order_raise_gymnasiums_errors(kind: str) -> None:
    envs = vec(kind, [functools.partial(CountEnv)] * 2)
    try:
        with pytest.raises(NoAsyncCallError):
            envs.reset_wait()
        envs.reset()
        with pytest.raises(NoAsyncCallError):
            envs.step_wait()
        envs.step_async(np.array([1, 1]))
        with pytest.raises(AlreadyPendingCallError):
            envs.reset_async()
        with pytest.raises(AlreadyPendingCallError):
            envs.step_async(np.array([1, 1]))
        obs, *_ = envs.step_wait()
        assert obs.tolist() == [1, 1]
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            envs.close()


@pytest.mark.parametrize("kind", KINDS)
def test_closed_env_raises_and_starts_nothing(kind: str, no_leaks) -> None:
    envs = vec(kind, [functools.partial(CountEnv)] * 2)
    envs.reset()
    envs.close()
    for use in (lambda: envs.reset(), lambda: envs.step(np.array([0, 0])), lambda: envs.get_attr("count")):
        with pytest.raises(ClosedEnvironmentError):
            use()
    envs.close()  # a second close is a no-op
    if kind == "echo":
        for use in (lambda: envs.async_reset(), lambda: envs.recv(), lambda: envs.send(np.array([0, 0]))):
            with pytest.raises(ClosedEnvironmentError):
                use()
        assert envs.worker_pids() == []


@pytest.mark.parametrize("kind", KINDS)
def test_call_get_attr_set_attr_render_and_seeds(kind: str) -> None:
    envs = vec(kind, [functools.partial(CountEnv)] * 3)
    try:
        envs.set_attr("max_count", [2, 3, 4])
        assert envs.get_attr("max_count") == (2, 3, 4)
        envs.set_attr("max_count", 9)
        assert envs.call("__getattribute__", "max_count") == (9, 9, 9)
        with pytest.raises(ValueError, match="length equal to the number of environments"):
            envs.set_attr("max_count", [1, 2])
        envs.reset(seed=3)
        assert envs.np_random_seed == (3, 4, 5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the anchor logs its workers' errors as warnings
            with pytest.raises(AttributeError):
                envs.get_attr("no_such_attribute")
            if kind == "echo":  # ours keeps serving after a failed call; the anchor's workers exit
                with pytest.raises(ValueError):
                    envs.call("reset")
                obs, _ = envs.reset(seed=3)
                assert obs.tolist() == [3, 4, 5]
    finally:
        envs.close(terminate=True)


@pytest.mark.parametrize("kind", KINDS)
def test_render_returns_every_envs_frame(kind: str) -> None:
    envs = vec(kind, [functools.partial(SpaceEnv, spaces.Discrete(3))] * 2)  # CartPole needs pygame
    try:
        assert envs.render_mode == "rgb_array"
        envs.reset(seed=0)
        envs.step(np.array([0, 0]))
        frames = envs.render()
        assert isinstance(frames, tuple) and len(frames) == 2 and frames[0].shape == (4, 4, 3)
        assert frames[1].max() == 1  # rendered after the step
    finally:
        envs.close()


@pytest.mark.parametrize("kind", KINDS)
def test_copy_false_returns_the_shared_buffer(kind: str) -> None:
    envs = vec(kind, [lambda: gym.make("CartPole-v1")] * 2, copy=False)
    try:
        first, _ = envs.reset(seed=0)
        second, *_ = envs.step(np.array([0, 1]))
        assert np.shares_memory(first, second)
    finally:
        envs.close()
    envs = vec(kind, [lambda: gym.make("CartPole-v1")] * 2)
    try:
        first, _ = envs.reset(seed=0)
        second, *_ = envs.step(np.array([0, 1]))
        assert not np.shares_memory(first, second)
    finally:
        envs.close()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_record_episode_statistics_equal_the_anchors(mode: AutoresetMode) -> None:
    fns = [functools.partial(CountEnv, max_count=m) for m in (2, 3, 5)]
    anchor = RecordEpisodeStatistics(vec("async", fns, autoreset_mode=mode))
    ours = EchoRecordEpisodeStatistics(vec("echo", fns, autoreset_mode=mode))
    try:
        anchor.reset(seed=0)
        ours.reset(seed=0)
        for t in range(15):
            a, b = anchor.step(np.full(3, t % 5)), ours.step(np.full(3, t % 5))
            assert data_equivalence(a[:4], b[:4])
            assert ("episode" in a[4]) == ("episode" in b[4])
            if "episode" in a[4]:
                assert data_equivalence(a[4]["episode"]["r"], b[4]["episode"]["r"])
                assert data_equivalence(a[4]["episode"]["l"], b[4]["episode"]["l"])
        assert list(anchor.length_queue) == list(ours.length_queue)
        assert list(anchor.return_queue) == list(ours.return_queue)
    finally:
        anchor.close()
        ours.close()


# --- timeouts: the anchor raises; ours also kills the hung worker ------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_step_wait_timeout_raises_timeout_error(kind: str, no_leaks) -> None:
    envs = vec(kind, [SlowEnv] * 3)
    try:
        envs.reset()
        envs.step_async(np.array([0.0, 60.0, 0.0], dtype=np.float32))
        t = time.monotonic()
        with pytest.raises(mp.TimeoutError):
            envs.step_wait(timeout=0.5)
        assert time.monotonic() - t < 5
    finally:
        t = time.monotonic()
        envs.close(terminate=True)
        assert time.monotonic() - t < 5  # a hung env does not hold close(terminate=True)


@pytest.mark.parametrize("kind", KINDS)
def test_reset_wait_timeout_raises_timeout_error(kind: str, no_leaks) -> None:
    envs = vec(kind, [functools.partial(SlowEnv, slow_reset=30.0)] * 2)
    try:
        envs.reset_async()
        with pytest.raises(TimeoutError if kind == "echo" else mp.TimeoutError):
            envs.reset_wait(timeout=0.3)
    finally:
        envs.close(terminate=True)


def test_hung_env_is_killed_and_the_others_keep_working(no_leaks) -> None:
    envs = EchoVectorEnv([FaultEnv] * 3, timeout=0.5)
    try:
        _, info = envs.reset(seed=0)
        hung_pid = int(info["pid"][1])
        with pytest.raises(EchoTimeoutError, match=r"envs \[1\] timed out") as err:
            envs.step(np.array([0, 2, 0]))
        assert isinstance(err.value, TimeoutError)
        deadline = time.time() + 5
        while _alive(hung_pid) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(hung_pid)
        with pytest.raises(EchoWorkerError, match="reset"):
            envs.send(np.array([0]), [1])  # the killed env is refused until a reset
        obs, _ = envs.reset(seed=0)  # reset starts a new worker for it
        assert obs[:, 0].tolist() == [0, 0, 0]
        obs, *_ = envs.step(np.array([0, 0, 0]))
        assert obs[:, 0].tolist() == [1, 1, 1]
    finally:
        t = time.monotonic()
        envs.close()
        assert time.monotonic() - t < 5


def test_killing_a_hung_env_also_stops_what_it_started(no_leaks) -> None:
    envs = EchoVectorEnv([HelperProcessEnv] * 2, timeout=0.5, on_error="restart")
    try:
        _, info = envs.reset(seed=0)
        helper = int(info["helper_pid"][0])
        assert _alive(helper)
        _, _, _, trunc, info = envs.step(np.array([2, 0]))
        assert trunc.tolist() == [True, False] and info["helper_pid"][0] != helper
        deadline = time.time() + 5
        while _alive(helper) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(helper)  # the hung env's helper went with its worker's process group
    finally:
        envs.close()


def test_failed_reset_is_retried_with_the_same_seed(tmp_path, no_leaks) -> None:
    marker = str(tmp_path / "first-reset-done")
    envs = EchoVectorEnv([functools.partial(FlakyResetEnv, marker)] * 2, on_error="restart")
    try:
        obs, info = envs.reset(seed=[5, 7])
        failed = int(np.flatnonzero(info["_error"])[0])
        assert "first reset fails" in info["error"][failed] and envs.restarts == 1
        assert obs[:, 0].tolist() == [5.0, 7.0] and info["seed"].tolist() == [5, 7]
    finally:
        envs.close()


def test_close_does_not_wait_for_ever_on_a_hung_env(no_leaks) -> None:
    envs = EchoVectorEnv([FaultEnv] * 2, batch_size=1)
    envs.reset()
    envs.send(np.array([2, 0]))  # env 0 hangs, env 1 finishes
    envs.recv()
    t = time.monotonic()
    envs.close(timeout=0.5)
    assert time.monotonic() - t < 5


def test_hung_env_with_restart_is_reported_in_info(no_leaks, caplog) -> None:
    envs = EchoVectorEnv([FaultEnv] * 3, timeout=0.5, on_error="restart")
    try:
        envs.reset(seed=0)
        envs.step(np.array([0, 0, 0]))
        with caplog.at_level(logging.WARNING, logger="lynn.wrappers.echo.vector"):
            obs, reward, term, trunc, info = envs.step(np.array([0, 2, 0]))
        assert trunc.tolist() == [False, True, False] and not term.any()
        assert "timed out after 0.5 s in step" in info["error"][1] and info["_error"].tolist() == [
            False,
            True,
            False,
        ]
        assert info["worker_restarted"][1]
        assert info["final_obs"][1].tolist() == [1.0]  # the episode's real last observation
        assert obs[:, 0].tolist() == [2.0, 0.0, 2.0]
        assert envs.restarts == 1 and "restarting it" in caplog.text
    finally:
        envs.close()


# --- env exceptions: re-raised like the anchor by default ----------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_env_exceptions_are_reraised_with_their_type(kind: str, no_leaks) -> None:
    envs = vec(kind, [FaultEnv] * 3)
    try:
        envs.reset(seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the anchor logs through warnings
            with pytest.raises(ValueError, match="env step failed at t=0"):
                envs.step(np.array([0, 1, 0]))
    finally:
        envs.close(terminate=True)
    envs = vec(kind, [functools.partial(FaultEnv, reset_raises=True)] * 2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="reset always fails"):
                envs.reset()
    finally:
        envs.close(terminate=True)


def test_after_an_env_exception_reset_starts_a_fresh_worker(no_leaks) -> None:
    envs = EchoVectorEnv([FaultEnv] * 2)
    try:
        _, info = envs.reset(seed=0)
        with pytest.raises(ValueError) as err:
            envs.step(np.array([1, 0]))
        assert any("EchoVectorEnv env 0" in note for note in err.value.__notes__)
        with pytest.raises(EchoWorkerError, match="env 0"):
            envs.step(np.array([0, 0]))
        obs, info2 = envs.reset(seed=0)
        assert info2["pid"][0] != info["pid"][0] and info2["pid"][1] == info["pid"][1]
        obs, *_ = envs.step(np.array([0, 0]))
        assert obs[:, 0].tolist() == [1.0, 1.0]
    finally:
        envs.close()


def test_dead_worker_raises_by_default_and_get_attr_says_so(no_leaks) -> None:
    envs = EchoVectorEnv([FaultEnv] * 2)
    try:
        _, info = envs.reset(seed=0)
        os.kill(int(info["pid"][1]), signal.SIGKILL)
        with pytest.raises(EchoWorkerError, match="killed by signal 9"):
            envs.step(np.array([0, 0]))
        with pytest.raises(EchoWorkerError, match="env 1: its worker is not running"):
            envs.get_attr("t")
    finally:
        envs.close()
    envs = EchoVectorEnv([FaultEnv] * 2)
    try:
        _, info = envs.reset(seed=0)
        os.kill(int(info["pid"][0]), signal.SIGKILL)  # dies while idle
        time.sleep(0.2)
        with pytest.raises(EchoWorkerError, match="died"):
            envs.get_attr("t")
    finally:
        envs.close()


# --- opt-in restarts: correct episode ends -----------------------------------------------------
def test_restart_after_a_failed_step_same_step(no_leaks, caplog) -> None:
    envs = EchoVectorEnv([FaultEnv] * 2, on_error="restart")
    try:
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(np.array([0, 0]))
        with caplog.at_level(logging.WARNING, logger="lynn.wrappers.echo.vector"):
            obs, reward, term, trunc, info = envs.step(np.array([1, 0]))
        assert trunc.tolist() == [True, False] and term.tolist() == [False, False]
        assert reward.tolist() == [0.0, 1.0]
        assert "ValueError: env step failed at t=3" in info["error"][0]
        # The bootstrap target is the episode's last observation, not the new episode's first.
        assert info["_final_obs"].tolist() == [True, False] and info["final_obs"][0].tolist() == [3.0]
        assert obs[:, 0].tolist() == [0.0, 4.0]
        assert "env 0: ValueError" in caplog.text
    finally:
        envs.close()


def test_restart_after_a_failed_step_next_step(no_leaks) -> None:
    envs = EchoVectorEnv([FaultEnv] * 2, on_error="restart", autoreset_mode="NextStep")
    try:
        envs.reset(seed=0)
        envs.step(np.array([0, 0]))
        envs.step(np.array([0, 0]))
        obs, reward, term, trunc, info = envs.step(np.array([3, 0]))  # env 0's process dies
        assert trunc.tolist() == [True, False] and obs[:, 0].tolist() == [2.0, 3.0]  # its last obs
        assert "died" in info["error"][0]
        assert envs.get_attr("episode") == (100, 100)  # attributes stay reachable meanwhile
        obs, reward, term, trunc, info = envs.step(np.array([0, 0]))  # the reset step
        assert obs[:, 0].tolist() == [0.0, 4.0] and reward.tolist() == [0.0, 1.0]
        obs, *_ = envs.step(np.array([0, 0]))
        assert obs[:, 0].tolist() == [1.0, 5.0]
    finally:
        envs.close()


def test_termination_whose_autoreset_fails_stays_a_termination(no_leaks) -> None:
    fns = [
        functools.partial(FaultEnv, episode=2, reset_fails_after=1),
        functools.partial(FaultEnv, episode=50),
    ]
    envs = EchoVectorEnv(fns, on_error="restart")
    try:
        envs.reset(seed=0)
        envs.step(np.array([0, 0]))
        obs, reward, term, trunc, info = envs.step(np.array([0, 0]))  # env 0 terminates, its reset fails
        assert term.tolist() == [True, False] and trunc.tolist() == [False, False]
        assert reward.tolist() == [1.0, 1.0]
        assert info["final_obs"][0].tolist() == [2.0]  # the terminal observation
        assert "reset failed" in info["error"][0] and info["worker_restarted"][0]
        assert obs[:, 0].tolist() == [0.0, 2.0]  # a fresh env (its own reset counter) restarted it
    finally:
        envs.close()


def test_restart_budget_stops_a_crash_loop(no_leaks) -> None:
    envs = EchoVectorEnv([FaultEnv] * 2, on_error="restart", max_restarts=2)
    try:
        envs.reset(seed=0)
        envs.step(np.array([1, 0]))
        envs.step(np.array([1, 0]))
        assert envs.restarts == 2
        with pytest.raises(EchoWorkerError, match="restart budget exhausted"):
            envs.step(np.array([1, 0]))
    finally:
        envs.close()
    with pytest.raises(EchoWorkerError, match="budget"):
        envs = EchoVectorEnv(
            [functools.partial(FaultEnv, reset_raises=True)] * 2, on_error="restart", max_restarts=3
        )
        try:
            envs.reset()
        finally:
            envs.close()


# --- EnvPool-style send/recv (ours only) ---------------------------------------------------------
def test_recv_rows_carry_env_ids_with_their_mask() -> None:
    envs = EchoVectorEnv([functools.partial(CountEnv, max_count=50)] * 4, batch_size=2)
    try:
        envs.async_reset(seed=0)
        obs, _, _, _, info = envs.recv()
        assert info["_env_id"].tolist() == [True, True] and len(info["env_id"]) == 2
        assert envs.recv_observation_space.contains(np.asarray(obs))
        envs.send(np.array([1, 1]), info["env_id"])
        with pytest.raises(AlreadyPendingCallError):
            envs.send(np.array([1]), info["env_id"][:1])  # in flight
    finally:
        envs.close()


def test_send_refuses_collected_results_and_bad_actions_send_nothing() -> None:
    envs = EchoVectorEnv([functools.partial(CountEnv, max_count=50)] * 3, batch_size=1)
    try:
        envs.async_reset(seed=0)
        _, _, _, _, info = envs.recv()
        envs._gather(2)  # the other two finish and are collected, but recv() has not returned them
        others = sorted(set(range(3)) - {int(info["env_id"][0])})
        with pytest.raises(AlreadyPendingCallError, match="recv"):
            envs.send(np.array([1]), others[:1])
        first = int(info["env_id"][0])
        with pytest.raises(ValueError, match="picklable"):
            envs.send([lambda: 0], [first])  # an unpicklable action: nothing goes out
        assert first not in envs._pending
    finally:
        envs.close()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_episode_statistics_through_send_recv(mode: AutoresetMode) -> None:
    fns = [functools.partial(CountEnv, max_count=m) for m in (2, 3, 4, 5)]
    envs = EchoRecordEpisodeStatistics(EchoVectorEnv(fns, batch_size=2, autoreset_mode=mode))
    try:
        envs.async_reset(seed=[0] * 4)  # CountEnv starts counting at its seed
        seen: dict[int, list[int]] = {}
        for _ in range(60):
            _, _, _, _, info = envs.recv()
            if "episode" in info:
                for j in np.flatnonzero(info["_episode"]):
                    seen.setdefault(int(info["env_id"][j]), []).append(int(info["episode"]["l"][j]))
            envs.send(np.ones(2, dtype=np.int64), info["env_id"])
        assert seen and all(set(lengths) == {i + 2} for i, lengths in seen.items())  # max_count = i + 2
        assert set(envs.return_queue) == {float(i + 2) for i in seen}  # reward 1 per step
    finally:
        envs.close()


def test_step_seconds_only_when_asked() -> None:
    envs = EchoVectorEnv([lambda: gym.make("CartPole-v1")] * 2, record_step_seconds=True)
    try:
        envs.reset(seed=0)
        *_, info = envs.step(np.array([0, 1]))
        assert info["_step_seconds"].all() and (info["step_seconds"] >= 0).all()
    finally:
        envs.close()


def test_bad_arguments_name_what_to_pass() -> None:
    fns = [functools.partial(CountEnv)] * 2
    with pytest.raises(ValueError, match="autoreset_mode"):
        EchoVectorEnv(fns, autoreset_mode="later")
    with pytest.raises(ValueError, match="on_error"):
        EchoVectorEnv(fns, on_error="ignore")
    with pytest.raises(ValueError, match="timeout"):
        EchoVectorEnv(fns, timeout=0)
    with pytest.raises(ValueError, match="observation_mode"):
        EchoVectorEnv(fns, observation_mode="mixed")
    envs = EchoVectorEnv(fns)
    try:
        with pytest.raises(TypeError, match="reset_mask"):  # Gymnasium's checks and texts
            envs.reset(options={"reset_mask": [True, False]})
        with pytest.raises(ValueError, match="at least one True"):
            envs.reset(options={"reset_mask": np.array([False, False])})
        assert envs.reset(seed=0)[0].tolist() == [0, 1]
    finally:
        envs.close()


# --- the rest of Gymnasium's vector suite (issue 26) ----------------------------------------------
@pytest.mark.parametrize("shared_memory", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_disabled_autoreset_with_partial_resets(kind: str, shared_memory: bool) -> None:
    """autoreset_mode=DISABLED: a done env stays done until reset(options={"reset_mask": ...}) resets
    it; the others keep their observation and get an empty info."""
    fns = [functools.partial(CountEnv, max_count=m) for m in (2, 3)]
    envs = vec(kind, fns, autoreset_mode=AutoresetMode.DISABLED, shared_memory=shared_memory)
    try:
        assert envs.metadata["autoreset_mode"] == AutoresetMode.DISABLED
        obs, info = envs.reset(seed=[0, 0])
        assert obs.tolist() == [0, 0]
        for _ in range(2):
            obs, _, terminated, _, _ = envs.step(np.array([1, 1]))
        assert obs.tolist() == [2, 2] and terminated.tolist() == [True, False]
        obs, info = envs.reset(seed=[0, 99], options={"reset_mask": np.array([True, False])})
        assert obs.tolist() == [0, 2]
        assert info["reset_seed"].tolist() == [0, 0] and info["_reset_seed"].tolist() == [True, False]
        obs, _, terminated, _, _ = envs.step(np.array([0, 0]))
        assert obs.tolist() == [1, 3] and terminated.tolist() == [False, True]
    finally:
        envs.close()


@pytest.mark.parametrize("kind", KINDS)
def test_observation_mode_takes_a_batch_and_a_single_space(kind: str) -> None:
    single = spaces.Box(0, 10, (2,))
    batch = spaces.Box(0, 10, (2, 2))
    fns = [lambda: SpaceEnv(spaces.Box(0, 1, (2,))), lambda: SpaceEnv(spaces.Box(0, 5, (2,)))]
    envs = vec(kind, fns, observation_mode=(batch, single))
    try:
        assert envs.observation_space is batch and envs.single_observation_space is single
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 2) and obs in batch
    finally:
        envs.close()
    with pytest.raises(TypeError, match="Spaces"):
        vec(kind, fns, observation_mode=(batch, "x"))


def test_oneof_observations_already_returned_do_not_change() -> None:
    """A OneOf observation returned with copy=True is the caller's: the next step does not rewrite it."""
    space = spaces.OneOf((spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(2,))))
    envs = EchoVectorEnv([functools.partial(SpaceEnv, space)] * 2, shared_memory=True)
    try:
        first, _ = envs.reset(seed=[3, 4])
        kept = [(k, np.array(v, copy=True)) for k, v in first]
        for _ in range(3):
            envs.step(np.array([0, 1]))
        assert all(
            k == k2 and np.array_equal(v, np.asarray(v2))
            for (k, v), (k2, v2) in zip(kept, first, strict=True)
        )
    finally:
        envs.close()


@pytest.mark.parametrize("state", ["step", "reset"])
@pytest.mark.parametrize("kind", KINDS)
def test_close_with_a_call_pending_warns(kind: str, state: str) -> None:
    envs = vec(kind, [functools.partial(CountEnv)] * 2)
    envs.reset()
    if state == "step":
        envs.step_async(np.array([0, 0]))
    else:
        envs.reset_async()
    with pytest.warns(UserWarning, match=f"Calling `close` while waiting for a pending call to `{state}`"):
        envs.close(terminate=True)


def _fail_on_one(self, action):  # noqa: ANN001, ANN202
    if action >= 1:
        raise ValueError(f"Error in step with {action}")
    return 0, 0.0, False, False, {}


@pytest.mark.parametrize("kind", KINDS)
def test_worker_errors_warn_as_async_vector_env(kind: str) -> None:
    """One warning naming each failed worker, one with its traceback, then 'Raising the last
    exception'; the error raised is the env's own type."""
    from gymnasium.utils.env_checker import data_equivalence  # noqa: F401  (same import as above)

    class Failing(CountEnv):
        step = _fail_on_one

    envs = vec(kind, [Failing] * 3)
    envs.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="Error in step with [12]"):
            envs.step(np.array([0, 1, 2]))
    envs.close()
    texts = [str(w.message) for w in caught if "ERROR" in str(w.message)]
    assert len(texts) == 5, texts
    assert sorted(re.search(r"Worker-(\d)", t).group(1) for t in texts[0:4:2]) == ["1", "2"]
    assert all("Traceback" in t and "Error in step with" in t for t in texts[1:4:2])
    assert "Raising the last exception back to the main process." in texts[4]


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_workers_exit_when_the_main_process_is_killed(context: str) -> None:
    import subprocess
    import sys

    from tests.conftest import REPO

    code = (
        "import sys, time\n"
        "from lynn.wrappers.echo.vector import EchoVectorEnv\n"
        "from tests.wrappers.echo._echo_envs import CountEnv\n"
        "if __name__ == '__main__':\n"
        f"    envs = EchoVectorEnv([CountEnv] * 3, context={context!r})\n"
        "    envs.reset()\n"
        "    print(' '.join(map(str, envs.worker_pids())), flush=True)\n"
        "    time.sleep(300)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        proc.kill()  # no close(), no atexit: only the workers' own guards can stop them
        proc.wait()
        deadline = time.time() + 10
        while any(_alive(p) for p in pids) and time.time() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", KINDS)
def test_error_texts_code_may_match_are_the_anchors(kind: str) -> None:
    fns = [lambda: SpaceEnv(spaces.Box(0, 1, (2,))), lambda: SpaceEnv(spaces.Box(0, 2, (2,)))]
    with pytest.raises(
        RuntimeError,
        match="the sub-environments observation spaces are not equivalent. .*If this is intentional, "
        "use `observation_mode='different'` instead",
    ):
        vec(kind, fns, observation_mode="same")
    envs = vec(kind, [functools.partial(CountEnv)] * 2)
    try:
        envs.reset()
        with pytest.raises(TypeError):  # a scalar for a batch of actions
            envs.step(0)
        with pytest.raises(ValueError):
            envs.step(np.array([0, 0, 0]))
    finally:
        envs.close(terminate=True)
