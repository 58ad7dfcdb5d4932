"""The eval runner, in process, on a probe env whose rewards report what the runner passed it.

Every expected value here is written out by hand (seeds ``seed + i`` per episode, including the
repeats of one task; the run identity over every config field; ``info["success"]`` over the reward;
the ``max_steps`` cap), so a runner that drops a field, reuses a seed or ignores a flag fails.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from lynn.agents import Agent
from lynn.eval.runner import (
    EpisodeSpec,
    EvalConfig,
    EvalError,
    agent_seed,
    bare_id,
    config_dict,
    env_class,
    evaluate,
    list_tasks,
    plan,
    read_records,
    run_dir,
    slug,
    summarize,
)

PROBE_ID = "LynnTest/RunnerProbe-v0"
PROBE_STR_ID = "LynnTest/RunnerProbeByName-v0"  # registered with a "module:Class" string
AGENT = f"{__name__}:ProbeAgent"
TASKS = [
    {"task_id": "t-a", "split": "train"},
    {"task_id": "t-b", "split": "train"},
    {"task_id": "t-c", "split": "test"},
]


class ProbeEnv(gym.Env):
    """An env whose rewards and infos say how it was driven.

    Modes: ``seed`` (one step; reward = reset seed, ``info["score"]`` = the agent's action, which is
    its own seed), ``long`` (reward ``step_reward`` a step, ends after ``length`` steps), ``success``
    (one step; reward and ``info["success"]`` from kwargs), ``crash`` (step raises on given seeds),
    ``reset_crash`` (reset raises), ``deep_crash`` (step raises 30 calls deep). The observation is the
    step count; ``step_sleep`` seconds pass in each step. Every reset is logged with its arguments.
    """

    observation_space = gym.spaces.Discrete(1000)
    action_space = gym.spaces.Discrete(2**32)
    resets = 0
    builds = 0
    reset_log: list[tuple[int | None, dict | None]] = []

    def __init__(
        self,
        mode: str = "seed",
        length: int = 1,
        step_reward: float = 0.5,
        success: bool | None = None,
        reward: float = 1.0,
        crash_seeds: tuple[int, ...] = (),
        scoring: str | None = None,
        errors: int = 0,
        split: str | None = None,
        step_sleep: float = 0.0,
        task_info: bool = True,
        only: str | None = None,
        rename: str | None = None,
    ) -> None:
        ProbeEnv.builds += 1
        self.step_sleep, self.task_info, self.rename = step_sleep, task_info, rename
        self.mode, self.length, self.step_reward = mode, length, step_reward
        self.success, self.reward, self.crash_seeds = success, reward, crash_seeds
        self.scoring, self.errors, self.split = scoring, errors, split

    @classmethod
    def list_tasks(cls, split: str | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        if split not in (None, "train", "test", "empty"):
            raise ValueError(f"no split {split!r}")
        tasks = [t for t in TASKS if split is None or t["split"] == split]
        return [t for t in tasks if kwargs.get("only") in (None, t["task_id"])]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        ProbeEnv.resets += 1
        ProbeEnv.reset_log.append((seed, options))
        if self.mode == "reset_crash":
            raise ValueError("cannot reset")
        self.seed_, self.t = seed, 0
        info: dict[str, Any] = {"error": "reset note", "t": 0}
        if self.task_info:
            info["task_id"] = self.rename or (options or {}).get("task_id")
        if self.scoring is not None:
            info["scoring"] = self.scoring
        return 0, info

    def step(self, action: int):
        self.t += 1
        time.sleep(self.step_sleep)
        info: dict[str, Any] = {"error": "bad step" if self.t <= self.errors else None, "t": self.t}
        if self.mode == "deep_crash":
            _recurse(30)
        if self.mode == "crash" and self.seed_ in self.crash_seeds:
            raise RuntimeError(f"boom at {self.seed_}")
        if self.mode == "seed":
            return 0, float(self.seed_), True, False, {**info, "score": float(action)}
        if self.mode == "long":
            return self.t, self.step_reward, self.t >= self.length, False, info
        if self.success is not None:
            info["success"] = self.success
        return 0, self.reward, True, False, info


def _recurse(n: int) -> None:
    if n == 0:
        raise RuntimeError("deep")
    _recurse(n - 1)


class ProbeAgent(Agent):
    """Acts with its own reset seed (after ``act_sleep`` seconds); logs what it is given."""

    log: list[tuple] = []

    def __init__(self, env: gym.Env, tag: str = "", act_sleep: float = 0.0) -> None:
        super().__init__(env)
        self.tag, self.seed, self.act_sleep = tag, None, act_sleep
        ProbeAgent.log.append(("init", tag))

    def reset(self, seed: int | None = None) -> None:
        self.seed = seed

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        ProbeAgent.log.append(("act", obs, info["t"]))
        time.sleep(self.act_sleep)
        return int(self.seed)

    def observe(
        self, action: Any, reward: float, obs: Any, terminated: bool, truncated: bool, info: dict
    ) -> None:
        ProbeAgent.log.append(("observe", action == self.seed, reward, obs, terminated, truncated, info["t"]))


@pytest.fixture(autouse=True)
def _probe() -> None:
    if PROBE_ID not in gym.registry:
        gym.register(PROBE_ID, entry_point=ProbeEnv)
        gym.register(PROBE_STR_ID, entry_point=f"{__name__}:ProbeEnv")
    ProbeEnv.resets = ProbeEnv.builds = 0
    ProbeEnv.reset_log.clear()
    ProbeAgent.log.clear()


def cfg(tmp_path: Path, **kw: Any) -> EvalConfig:
    base: dict[str, Any] = dict(env_id=PROBE_ID, agent=AGENT, out=str(tmp_path), progress=False)
    base.update(kw)
    return EvalConfig(**base)


def records(c: EvalConfig) -> list[dict[str, Any]]:
    return read_records(run_dir(c) / "episodes.jsonl")


def expected_agent_seed(env_seed: int) -> int:
    return int(np.random.SeedSequence(entropy=env_seed, spawn_key=(1,)).generate_state(1)[0])


# --- seeds --------------------------------------------------------------------------------------
def test_every_episode_gets_seed_plus_index(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=4, seed=30)
    summary = evaluate(c)
    recs = records(c)
    assert [r["episode"] for r in recs] == [0, 1, 2, 3]
    assert [r["seed"] for r in recs] == [30, 31, 32, 33]
    assert [r["reward"] for r in recs] == [30.0, 31.0, 32.0, 33.0]  # the env really got those seeds
    assert [r["score"] for r in recs] == [float(expected_agent_seed(s)) for s in (30, 31, 32, 33)]
    assert summary["mean_reward"] == pytest.approx(31.5) and summary["episodes"] == 4


def test_repeats_of_one_task_get_their_own_seeds(tmp_path: Path) -> None:
    c = cfg(tmp_path, tasks=["t-b", "t-a"], episodes=3, seed=7)
    evaluate(c)
    recs = records(c)
    assert [r["task_id"] for r in recs] == ["t-b"] * 3 + ["t-a"] * 3  # given order, from the env's info
    assert [r["reward"] for r in recs] == [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    assert [r["split"] for r in recs] == ["train"] * 6


def test_plan_by_split_and_default_count() -> None:
    specs = plan(EvalConfig(env_id=PROBE_ID, split="train", episodes=2, seed=100))
    assert specs == [
        EpisodeSpec(0, 100, "t-a", "train"),
        EpisodeSpec(1, 101, "t-a", "train"),
        EpisodeSpec(2, 102, "t-b", "train"),
        EpisodeSpec(3, 103, "t-b", "train"),
    ]
    assert plan(EvalConfig(env_id=PROBE_ID, split="test")) == [EpisodeSpec(0, 0, "t-c", "test")]
    assert plan(EvalConfig(env_id=PROBE_ID, seed=5)) == [EpisodeSpec(i, 5 + i) for i in range(10)]
    assert plan(EvalConfig(env_id=PROBE_ID, episodes=2)) == [EpisodeSpec(0, 0), EpisodeSpec(1, 1)]


def test_plan_with_split_also_given_to_the_env() -> None:
    # WebWorldModel-v0 takes split= (which recorded starts it resets to): `--split train --env-arg
    # split='"train"'` lists the train tasks instead of failing on a split given twice.
    c = EvalConfig(env_id=PROBE_ID, split="train", env_kwargs={"split": "train"})
    assert [s.task_id for s in plan(c)] == ["t-a", "t-b"]


def test_plan_errors() -> None:
    with pytest.raises(EvalError, match="unknown task ids for .*: nope"):
        plan(EvalConfig(env_id=PROBE_ID, tasks=["t-a", "nope"]))
    with pytest.raises(EvalError, match="no tasks in split 'empty'"):
        plan(EvalConfig(env_id=PROBE_ID, split="empty"))
    with pytest.raises(EvalError, match="no split 'bogus'"):
        plan(EvalConfig(env_id=PROBE_ID, split="bogus"))


def test_agent_seed_is_derived_and_stable() -> None:
    for s in (0, 1, 12345):
        assert agent_seed(s) == expected_agent_seed(s) != s
    assert len({agent_seed(s) for s in range(50)}) == 50


# --- identity -----------------------------------------------------------------------------------
# env_id, agent and split also name the run folder: a change there is a new folder (tests below).
IDENTITY_CHANGES = {
    "seed": 1,
    "tasks": ["t-a"],
    "env_kwargs": {"mode": "seed", "length": 2},
    "agent_kwargs": {"tag": "other"},
    "max_steps": 5,
}


def test_identity_is_every_field_that_defines_results() -> None:
    c = EvalConfig(
        env_id=PROBE_ID,
        agent=AGENT,
        seed=3,
        split="train",
        tasks=["t-a", "t-b"],
        env_kwargs={"mode": "seed"},
        agent_kwargs={"tag": "x"},
        max_steps=9,
        episodes=2,
        workers=3,
        progress=False,
    )
    assert c.identity() == {
        "env_id": PROBE_ID,
        "agent": AGENT,
        "seed": 3,
        "split": "train",
        "tasks": ["t-a", "t-b"],
        "env_kwargs": {"mode": "seed"},
        "agent_kwargs": {"tag": "x"},
        "max_steps": 9,
    }


@pytest.mark.parametrize("field", ["seed", "tasks", "env_kwargs", "agent_kwargs", "max_steps"])
def test_resume_with_another_value_of_an_identity_field_is_refused(tmp_path: Path, field: str) -> None:
    first = cfg(
        tmp_path, episodes=1, tasks=["t-b"], env_kwargs={"mode": "seed"}, agent_kwargs={}, max_steps=None
    )
    evaluate(first)
    again = cfg(
        tmp_path,
        episodes=1,
        **{
            "tasks": ["t-b"],
            "env_kwargs": {"mode": "seed"},
            "agent_kwargs": {},
            "max_steps": None,
            **{field: IDENTITY_CHANGES[field]},
        },
    )
    assert run_dir(again) == run_dir(first)
    with pytest.raises(EvalError, match="different configuration"):
        evaluate(again)
    saved = json.loads((run_dir(first) / "config.json").read_text())
    assert saved == json.loads(json.dumps(first.identity()))


def test_env_id_with_prefix_is_another_identity(tmp_path: Path) -> None:
    first = cfg(tmp_path, episodes=1)
    evaluate(first)
    with pytest.raises(EvalError, match="different configuration"):
        evaluate(cfg(tmp_path, episodes=1, env_id="tests.eval.test_runner_identity:" + PROBE_ID))


def test_fields_outside_the_identity_resume(tmp_path: Path) -> None:
    evaluate(cfg(tmp_path, episodes=2))
    assert ProbeEnv.resets == 2
    summary = evaluate(cfg(tmp_path, episodes=3, workers=1, progress=False))
    assert ProbeEnv.resets == 3  # only episode 2 ran
    assert summary["episodes"] == 3 and [r["seed"] for r in records(cfg(tmp_path))] == [0, 1, 2]
    summary = evaluate(cfg(tmp_path, episodes=2))  # fewer: the summary covers the plan only
    assert summary["episodes"] == 2 and ProbeEnv.resets == 3


def test_torn_and_foreign_lines_are_dropped_on_resume(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=3)
    evaluate(c)
    path = run_dir(c) / "episodes.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + '["not a record"]\n{"no": "episode"}\n' + lines[1][:20])
    assert [r["episode"] for r in read_records(path)] == [0]
    ProbeEnv.resets = 0
    evaluate(c)
    assert ProbeEnv.resets == 2
    assert [r["episode"] for r in records(c)] == [0, 1, 2]
    assert all(json.loads(line) for line in path.read_text().splitlines())


# --- the episode loop ---------------------------------------------------------------------------
def test_max_steps_caps_an_episode_and_the_env_limit_applies_without_it(tmp_path: Path) -> None:
    kw = {"mode": "long", "length": 7, "step_reward": 0.25}
    capped = cfg(tmp_path / "a", episodes=1, env_kwargs=kw, max_steps=3)
    evaluate(capped)
    (rec,) = records(capped)
    assert rec["steps"] == 3 and rec["reward"] == pytest.approx(0.75)
    free = cfg(tmp_path / "b", episodes=1, env_kwargs=kw)
    evaluate(free)
    (rec,) = records(free)
    assert rec["steps"] == 7 and rec["reward"] == pytest.approx(1.75)
    longer = cfg(tmp_path / "c", episodes=1, env_kwargs=kw, max_steps=50)
    evaluate(longer)
    assert records(longer)[0]["steps"] == 7


@pytest.mark.parametrize(
    ("success", "reward", "want"),
    [(False, 1.0, False), (True, 0.0, True), (None, 1.0, True), (None, 0.0, False), (None, -1.0, False)],
)
def test_info_success_decides_over_the_reward(
    tmp_path: Path, success: bool | None, reward: float, want: bool
) -> None:
    c = cfg(tmp_path, episodes=2, env_kwargs={"mode": "success", "success": success, "reward": reward})
    summary = evaluate(c)
    assert [r["success"] for r in records(c)] == [want, want]
    assert summary["success_rate"] == (1.0 if want else 0.0)


def test_errors_are_counted_and_the_last_one_kept(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=1, env_kwargs={"mode": "long", "length": 4, "errors": 2})
    evaluate(c)
    (rec,) = records(c)
    assert rec["step_errors"] == 2 and rec["error"] == "bad step" and rec["steps"] == 4
    c2 = cfg(tmp_path / "b", episodes=1, env_kwargs={"mode": "long", "length": 2})
    evaluate(c2)
    (rec,) = records(c2)
    assert rec["step_errors"] == 0 and rec["error"] == "reset note"  # reset's error when no step erred


def test_record_fields(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=1, seed=4, env_kwargs={"mode": "long", "length": 2}, agent_kwargs={"tag": "t"})
    evaluate(c)
    (rec,) = records(c)
    assert rec["env_id"] == PROBE_ID and rec["agent"] == AGENT and rec["seed"] == 4 and rec["episode"] == 0
    assert rec["split"] is None and rec["task_id"] is None and "score" not in rec and "traceback" not in rec
    assert set(rec["timings"]) == {"reset_s", "act_s", "step_s", "total_s"}
    assert rec["timings"]["total_s"] >= rec["timings"]["step_s"] >= 0


def test_scoring_profile_and_env_kwarg_split_name_the_row(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=1, env_kwargs={"mode": "long", "split": "test", "scoring": "reference"})
    evaluate(c)
    assert records(c)[0]["split"] == "test/reference"
    c = cfg(tmp_path / "b", tasks=["t-a"], env_kwargs={"mode": "long", "scoring": "default"})
    evaluate(c)
    assert records(c)[0]["split"] == "train"
    c = cfg(tmp_path / "c", episodes=1, env_kwargs={"mode": "long", "scoring": "reference"})
    evaluate(c)
    assert records(c)[0]["split"] is None  # no split: nothing to qualify


def test_a_crash_is_a_result_and_the_env_is_rebuilt(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=4, env_kwargs={"mode": "crash", "crash_seeds": (1,)})
    summary = evaluate(c)
    recs = records(c)
    assert recs[1]["error"] == "RuntimeError: boom at 1" and "Traceback" in recs[1]["traceback"]
    assert recs[1]["success"] is False and recs[1]["reward"] == 0.0
    assert [r["error"] for r in (recs[0], recs[2], recs[3])] == ["reset note"] * 3
    assert ProbeEnv.builds == 2  # the crashed env is closed and the next episode builds a new one
    assert summary["crashed_episodes"] == 1


# --- summary and validation ---------------------------------------------------------------------
def test_summarize_by_hand() -> None:
    recs = [
        {"reward": 1.0, "success": True, "steps": 2, "timings": {"total_s": 1.0}},
        {"reward": 0.0, "success": False, "steps": 4, "timings": {"total_s": 3.0}, "traceback": "x"},
        {"reward": 2.0, "success": True, "steps": 6, "timings": {"total_s": 2.0}},
    ]
    s = summarize(recs, EvalConfig(env_id="lynn:" + PROBE_ID, agent="a", split="train", seed=9))
    assert s["env_id"] == PROBE_ID and s["agent"] == "a" and s["split"] == "train" and s["seed"] == 9
    assert s["episodes"] == 3 and s["success_rate"] == pytest.approx(2 / 3)
    assert s["mean_reward"] == pytest.approx(1.0) and s["mean_steps"] == pytest.approx(4.0)
    assert s["crashed_episodes"] == 1 and s["episode_seconds"] == pytest.approx(2.0)
    empty = summarize([])
    assert empty["episodes"] == 0 and empty["mean_steps"] == 0.0 and empty["episode_seconds"] == 0.0


def test_bad_requests(tmp_path: Path) -> None:
    for kw, msg in [
        ({"backend": "dask"}, "--backend must be local or ray"),
        ({"address": "h:1"}, "--address needs --backend ray"),
        ({"workers": 0}, "--workers must be at least 1"),
        ({"episodes": 0}, "--episodes must be at least 1"),
        ({"agent": "no-such-agent"}, "unknown agent 'no-such-agent'"),
        ({"env_id": "LynnTest/Nope-v0"}, "unknown env id 'LynnTest/Nope-v0'"),
        ({"env_id": "no_such_module:" + PROBE_ID}, "cannot import 'no_such_module'"),
    ]:
        with pytest.raises(EvalError, match=msg):
            evaluate(cfg(tmp_path, **kw))
    assert ProbeEnv.builds == 0


def test_a_run_that_cannot_start_records_nothing(tmp_path: Path) -> None:
    # A bad env kwarg or agent kwarg (or a missing model) fails once, before any episode, and leaves
    # no results folder: not N "episodes" whose error is the same TypeError.
    for kw in ({"env_kwargs": {"no_such_kwarg": 1}}, {"agent_kwargs": {"no_such_kwarg": 1}}):
        with pytest.raises(EvalError, match="cannot start: TypeError"):
            evaluate(cfg(tmp_path, episodes=3, **kw))
    assert not any(tmp_path.iterdir()) and ProbeEnv.resets == 0


def test_the_env_and_agent_are_built_once_for_a_serial_run(tmp_path: Path) -> None:
    evaluate(cfg(tmp_path, episodes=3))
    assert ProbeEnv.builds == 1 and ProbeAgent.log.count(("init", "")) == 1


def test_resume_says_so_and_fresh_starts_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evaluate(cfg(tmp_path, episodes=2))
    c = cfg(tmp_path, episodes=3)
    summary = evaluate(c)
    out = run_dir(c)
    assert summary["resumed"] == 2 and ProbeEnv.resets == 3  # only episode 2 ran again
    assert f"resumed 2 of 3 episodes from {out}" in capsys.readouterr().err
    evaluate(c)
    assert f"all 3 episodes already in {out}" in capsys.readouterr().err and ProbeEnv.resets == 3
    summary = evaluate(cfg(tmp_path, episodes=3, fresh=True))
    assert summary["resumed"] == 0 and ProbeEnv.resets == 6 and len(records(c)) == 3
    assert "resumed" not in capsys.readouterr().err
    # --fresh also replaces results of another configuration in the same folder
    with pytest.raises(EvalError, match="different configuration"):
        evaluate(cfg(tmp_path, episodes=3, env_kwargs={"mode": "long"}))
    evaluate(cfg(tmp_path, episodes=1, env_kwargs={"mode": "long"}, fresh=True))
    assert [r["reward"] for r in records(c)] == [0.5]


def test_names() -> None:
    assert bare_id("lynn:Lynn/X-v0") == "Lynn/X-v0" and bare_id("Lynn/X-v0") == "Lynn/X-v0"
    assert slug("Lynn/EVMQuest-v0") == "Lynn_EVMQuest-v0" and slug("a b::c") == "a_b_c" and slug("//") == "x"
    c = EvalConfig(env_id="lynn:Lynn/X-v0", agent="mod:Cls", split="test", out="R")
    assert run_dir(c) == Path("R") / "Lynn_X-v0" / "mod_Cls__test"
    assert run_dir(EvalConfig(env_id="Lynn/X-v0", agent="random", out="R")) == Path("R/Lynn_X-v0/random")


# --- what the loop passes where -------------------------------------------------------------------
def test_the_agent_sees_each_obs_and_info_and_every_transition(tmp_path: Path) -> None:
    c = cfg(
        tmp_path,
        episodes=1,
        env_kwargs={"mode": "long", "length": 3, "step_reward": 0.25},
        agent_kwargs={"tag": "k"},
    )
    evaluate(c)
    assert ProbeAgent.log == [
        ("init", "k"),
        ("act", 0, 0),
        ("observe", True, 0.25, 1, False, False, 1),
        ("act", 1, 1),
        ("observe", True, 0.25, 2, False, False, 2),
        ("act", 2, 2),
        ("observe", True, 0.25, 3, True, False, 3),
    ]
    assert ProbeEnv.reset_log == [(0, None)]  # no task: no options at all


def test_reset_gets_the_task_in_options_and_a_missing_info_task_id_falls_back(tmp_path: Path) -> None:
    c = cfg(tmp_path, tasks=["t-c"], env_kwargs={"mode": "long", "task_info": False})
    evaluate(c)
    assert ProbeEnv.reset_log == [(0, {"task_id": "t-c"})]
    (rec,) = records(c)
    assert rec["task_id"] == "t-c" and rec["split"] == "test"


def test_a_crash_in_reset_is_a_clean_record(tmp_path: Path) -> None:
    c = cfg(tmp_path, tasks=["t-a"], env_kwargs={"mode": "reset_crash"})
    evaluate(c)
    (rec,) = records(c)
    assert set(rec) == {
        "env_id", "split", "task_id", "episode", "seed", "agent", "reward", "success", "steps", "error",
        "step_errors", "traceback", "timings",
    }  # fmt: skip
    assert (rec["task_id"], rec["split"], rec["steps"], rec["reward"], rec["success"]) == (
        "t-a",
        "train",
        0,
        0.0,
        False,
    )
    assert rec["error"] == "ValueError: cannot reset" and rec["step_errors"] == 0
    assert (
        rec["timings"]["reset_s"] == 0.0
        and rec["timings"]["act_s"] == 0.0
        and rec["timings"]["step_s"] == 0.0
    )


def test_a_deep_crash_keeps_the_last_eight_frames(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=1, env_kwargs={"mode": "deep_crash"})
    evaluate(c)
    tb = records(c)[0]["traceback"]
    assert tb.count('  File "') == 8 and "_recurse" in tb and "RuntimeError: deep" in tb


def test_timings_add_up_over_the_steps(tmp_path: Path) -> None:
    c = cfg(
        tmp_path,
        episodes=1,
        env_kwargs={"mode": "long", "length": 4, "step_sleep": 0.02},
        agent_kwargs={"act_sleep": 0.03},
    )
    evaluate(c)
    t = records(c)[0]["timings"]
    assert t["act_s"] >= 4 * 0.03 and t["step_s"] >= 4 * 0.02  # summed over the 4 steps
    assert t["total_s"] >= t["act_s"] + t["step_s"] + t["reset_s"] and t["reset_s"] >= 0
    assert t["total_s"] < 60
    assert all(isinstance(v, float) and round(v, 6) == v for v in t.values())


def test_an_empty_scoring_profile_is_no_profile(tmp_path: Path) -> None:
    c = cfg(tmp_path, tasks=["t-a"], env_kwargs={"mode": "long", "scoring": ""})
    evaluate(c)
    assert records(c)[0]["split"] == "train"


# --- env lookup -----------------------------------------------------------------------------------
def test_env_class_by_callable_and_by_string() -> None:
    assert env_class(PROBE_ID) is ProbeEnv and env_class(PROBE_STR_ID) is ProbeEnv
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    assert env_class("CartPole-v1") is CartPoleEnv
    assert env_class("gymnasium.envs.classic_control:CartPole-v1") is CartPoleEnv


def test_list_tasks_passes_env_kwargs_and_needs_a_task_list() -> None:
    assert [t["task_id"] for t in list_tasks(PROBE_STR_ID)] == ["t-a", "t-b", "t-c"]
    assert [t["task_id"] for t in list_tasks(PROBE_STR_ID, "train", only="t-b")] == ["t-b"]
    assert plan(EvalConfig(env_id=PROBE_ID, split="train", env_kwargs={"only": "t-b"})) == [
        EpisodeSpec(0, 0, "t-b", "train")
    ]
    with pytest.raises(EvalError, match="CartPole-v1 has no task list; evaluate it by --episodes and --seed"):
        list_tasks("CartPole-v1")
    with pytest.raises(EvalError, match=f"{PROBE_ID}: no split 'x'"):
        list_tasks(PROBE_ID, "x")


def test_config_dict_is_every_field() -> None:
    c = EvalConfig(env_id=PROBE_ID, seed=2, env_kwargs={"a": 1})
    d = config_dict(c)
    assert d["seed"] == 2 and d["env_kwargs"] == {"a": 1} and d["backend"] == "local" and d["address"] is None
    assert set(d) == {
        "env_id", "agent", "episodes", "seed", "workers", "out", "split", "tasks", "env_kwargs", "agent_kwargs",
        "max_steps", "progress", "backend", "address", "label", "fresh",
    }  # fmt: skip


RECORD_KEYS = {
    "env_id", "split", "task_id", "episode", "seed", "agent", "reward", "success", "steps", "error", "step_errors",
    "timings",
}  # fmt: skip


def test_the_env_names_the_task_in_the_record(tmp_path: Path) -> None:
    c = cfg(tmp_path, tasks=["t-a"], env_kwargs={"mode": "long", "rename": "env-chosen"})
    evaluate(c)
    (rec,) = records(c)
    assert rec["task_id"] == "env-chosen" and set(rec) == RECORD_KEYS


def test_files_are_sorted_json(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=2)
    summary = evaluate(c)
    out = run_dir(c)
    assert (out / "config.json").read_text() == json.dumps(c.identity(), indent=2, sort_keys=True) + "\n"
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(line == json.dumps(json.loads(line), sort_keys=True) for line in lines)
    assert summary["results"] == str(out / "episodes.jsonl")
    assert (out / "summary.json").read_text() == json.dumps(summary, indent=2, sort_keys=True) + "\n"
    assert summary["seed"] == 0 and summary["split"] is None and summary["agent"] == AGENT
    assert set(summary) >= {
        "success_ci95",
        "reward_ci95",
        "crashed_episodes",
        "episode_seconds",
        "mean_steps",
    }
    evaluate(c)  # resumed: the rewritten file keeps the same sorted lines
    assert (out / "episodes.jsonl").read_text().splitlines() == lines


def test_summary_without_a_config_reads_the_first_record() -> None:
    recs = [
        {
            "env_id": "E",
            "agent": "A",
            "split": "S",
            "reward": 1.0,
            "success": True,
            "steps": 1,
            "timings": {"total_s": 1},
        }
    ]
    s = summarize(recs)
    assert (s["env_id"], s["agent"], s["split"], s["seed"]) == ("E", "A", "S", None)
    assert {"success_ci95", "reward_ci95"} <= set(s)


def test_resume_rewrites_records_as_sorted_json(tmp_path: Path) -> None:
    c = cfg(tmp_path, episodes=2)
    evaluate(c)
    path = run_dir(c) / "episodes.jsonl"
    first, second = path.read_text().splitlines()
    unsorted = json.dumps(dict(reversed(list(json.loads(first).items()))))  # as another tool might write it
    path.write_text(unsorted + "\n" + second + "\n")
    evaluate(c)
    assert path.read_text().splitlines() == [first, second]


def test_bad_line_in_the_middle_is_skipped_not_the_end(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('{"episode": 0}\nnot json\n{"episode": 1}\n')
    assert [r["episode"] for r in read_records(path)] == [0, 1]
    assert read_records(tmp_path / "missing.jsonl") == []


def test_exact_error_messages(tmp_path: Path) -> None:
    import lynn.registry

    cases = [
        ({"backend": "dask"}, "--backend must be local or ray, got 'dask'"),
        ({"address": "h:1"}, "--address needs --backend ray"),
        ({"workers": 0}, "--workers must be at least 1"),
        ({"episodes": 0}, "--episodes must be at least 1"),
        (
            {"env_id": "LynnTest/Nope-v0"},
            f"unknown env id 'LynnTest/Nope-v0'; registered: {', '.join(lynn.registry.ENV_IDS)}",
        ),
    ]
    for kw, msg in cases:
        with pytest.raises(EvalError) as err:
            evaluate(cfg(tmp_path, **kw))
        assert str(err.value) == msg
    # the ray backend passes validation (this fails later, on the agent, before Ray starts)
    with pytest.raises(EvalError, match="unknown agent 'nope'"):
        evaluate(cfg(tmp_path / "r", backend="ray", address="h:1", agent="nope", episodes=1))
    with pytest.raises(EvalError) as err:
        plan(EvalConfig(env_id=PROBE_ID, tasks=[f"x{i}" for i in range(7)]))
    assert str(err.value) == f"unknown task ids for {PROBE_ID}: x0, x1, x2, x3, x4"


def test_env_specific_agent_names_resolve(tmp_path: Path) -> None:
    c = EvalConfig(
        env_id="Lynn/Coordination-v0",
        agent="oracle",
        episodes=1,
        max_steps=3,
        out=str(tmp_path),
        progress=False,
    )
    summary = evaluate(c)
    assert summary["episodes"] == 1 and records(c)[0]["steps"] == 3 and records(c)[0]["error"] is None


def test_backends_are_dispatched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which episode loop runs: the worker pool for workers > 1, Ray for backend ray (both replaced here by
    the serial loop; tests/eval/test_runner.py runs the real ones)."""
    import lynn.eval.runner as runner

    calls: list[tuple[str, int, int]] = []

    def recorder(kind: str):
        def run(cfg: EvalConfig, todo: list[EpisodeSpec]):
            calls.append((kind, cfg.workers, len(todo)))
            yield from runner._run_serial(cfg, todo)

        return run

    monkeypatch.setattr(runner, "_run_parallel", recorder("pool"))
    monkeypatch.setattr(runner, "_run_ray", recorder("ray"))
    evaluate(cfg(tmp_path / "a", episodes=3, workers=2))
    evaluate(cfg(tmp_path / "b", episodes=2, workers=1))
    evaluate(cfg(tmp_path / "c", episodes=2, workers=3, backend="ray"))
    evaluate(cfg(tmp_path / "d", episodes=2, workers=1, backend="ray"))
    assert calls == [("pool", 2, 3), ("ray", 3, 2), ("ray", 1, 2)]
