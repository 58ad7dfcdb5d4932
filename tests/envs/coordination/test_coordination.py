"""Lynn/Coordination-v0: spaces, every scenario, delayed feedback, shocks, bad actions, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lynn  # noqa: F401  (registers the ids)
from lynn.envs.coordination import SCENARIOS, CoordinationEnv
from lynn.envs.coordination.coordination_env import vote_success_prob
from lynn.envs.coordination.metrics import loglog_slope, recovery_time, rolling_mean
from tests.conftest import run_lynn

ENV_ID = "Lynn/Coordination-v0"


def first_available(obs: dict[str, np.ndarray]) -> int:
    return int(np.flatnonzero(obs["action_mask"])[0])


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_check_env_every_scenario(scenario: str) -> None:
    env = CoordinationEnv(scenario=scenario)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert info["task_id"] == scenario
    assert env.observation_space.contains(obs)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_runs_a_full_registered_episode(scenario: str) -> None:
    env = gym.make(ENV_ID, scenario=scenario)
    obs, info = env.reset(seed=3)
    rng = np.random.default_rng(0)
    steps, truncated = 0, False
    while not truncated:
        mask = obs["action_mask"]
        action = int(rng.choice(np.flatnonzero(mask))) if mask.any() else 0
        obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated
        assert 0.0 <= info["regret"] <= 1.0
        assert obs["candidates"].shape == (env.unwrapped.n_slots, 6)
        steps += 1
    assert steps == 1000
    assert info["task_id"] == scenario and isinstance(info["success"], bool)
    assert 0.0 <= info["score"] <= 1.5


def test_observation_layout_and_sb3_compatible_spaces() -> None:
    env = CoordinationEnv(scenario="stationary")
    space = env.observation_space
    assert isinstance(space, gym.spaces.Dict)
    assert all(isinstance(s, gym.spaces.Box) for s in space.spaces.values())
    assert space["action_mask"].dtype == np.int8
    obs, _ = env.reset(seed=0)
    x = obs["candidates"]
    assert np.all(x[:, 0] == 1.0)  # bias column
    assert np.array_equal(x[:, 5].astype(np.int8), obs["action_mask"])  # available column == mask
    assert obs["subtask"].shape == (3 + 1,) and obs["subtask"][:3].sum() == 1.0


def test_invalid_actions_give_error_reward_zero_and_env_stays_usable() -> None:
    env = CoordinationEnv(scenario="stationary")
    obs, _ = env.reset(seed=0)
    for bad in (17, -1, "B-coder", 1.5, [0, 1]):
        obs, reward, terminated, truncated, info = env.step(bad)
        assert reward == 0.0 and info["error"], bad
        assert info["feedback"] == [(info["decision_id"], 0.0)]
        assert info["regret"] == pytest.approx(info["best_expected_success"])
    # Overload a worker by hammering it, then route to it while masked.
    env.reset(seed=0)
    env.pool.load[1] = 1.0
    obs = env._obs()
    assert obs["action_mask"][1] == 0
    obs, reward, _, _, info = env.step(1)
    assert reward == 0.0 and "overloaded" in info["error"]
    obs, reward, _, _, info = env.step(first_available(obs))
    assert info["error"] is None


def test_empty_slot_is_masked_and_an_error() -> None:
    env = CoordinationEnv(scenario="stationary", slots=8)
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"][5:].sum() == 0 and not obs["candidates"][5:].any()
    _, reward, _, _, info = env.step(7)
    assert reward == 0.0 and "empty" in info["error"]


def test_same_seed_same_stream_and_rewards() -> None:
    def run(seed: int) -> tuple[list, list]:
        env = gym.make(ENV_ID, scenario="churn")
        obs, info = env.reset(seed=seed)
        rewards, firsts = [], []
        for t in range(300):
            action = (
                first_available(obs)
                if t % 3
                else int(np.argmax(obs["candidates"][:, 4] * obs["action_mask"]))
            )
            obs, reward, _, _, info = env.step(action)
            rewards.append(reward)
            firsts.append(obs["candidates"].tobytes() + obs["subtask"].tobytes())
        return rewards, firsts

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_delayed_feedback_is_attributed_to_the_right_decisions() -> None:
    delay, votes = 3, 3
    env = CoordinationEnv(scenario="stationary", delay=delay, votes=votes)
    obs, info = env.reset(seed=1)
    assert info["next_decision_id"] == 0
    made: dict[int, int] = {}
    arrived: dict[int, float] = {}
    for t in range(60):
        obs, reward, _, _, info = env.step(first_available(obs))
        assert info["decision_id"] == t and info["next_decision_id"] == t + 1
        made[t] = t
        for did, r in info["feedback"]:
            assert did not in arrived, "each decision is settled once"
            # A decision's vote settles exactly `delay` steps after it was made.
            assert did == t - delay
            arrived[did] = r
        assert reward == pytest.approx(sum(r for _, r in info["feedback"]))
    assert sorted(arrived) == list(range(60 - delay))


def test_reputation_only_moves_when_feedback_arrives() -> None:
    env = CoordinationEnv(scenario="stationary", delay=5)
    obs, _ = env.reset(seed=2)
    before = env.pool.rec_n.sum()
    for _ in range(5):
        obs, _, _, _, info = env.step(first_available(obs))
        assert info["feedback"] == [] and env.pool.rec_n.sum() == before
    obs, _, _, _, info = env.step(first_available(obs))
    assert len(info["feedback"]) == 1 and env.pool.rec_n.sum() == before + 1


def test_votes_majority_probability() -> None:
    p = np.array([0.0, 0.5, 0.8, 1.0])
    np.testing.assert_allclose(vote_success_prob(p, 1), p)
    # P(at least 2 of 3) = 3p^2(1-p) + p^3
    np.testing.assert_allclose(vote_success_prob(p, 3), 3 * p**2 * (1 - p) + p**3)


def test_cost_and_latency_penalties_lower_the_reward() -> None:
    plain = CoordinationEnv(scenario="stationary")
    taxed = CoordinationEnv(scenario="stationary", cost_weight=0.5, latency_weight=0.5)
    a_obs, _ = plain.reset(seed=0)
    b_obs, _ = taxed.reset(seed=0)
    total_a = total_b = 0.0
    for _ in range(200):
        a_obs, ra, _, _, _ = plain.step(first_available(a_obs))
        b_obs, rb, _, _, info = taxed.step(first_available(b_obs))
        total_a += ra
        total_b += rb
    assert total_b < total_a - 10
    assert info["cost"] > 0 and info["timings"]["execution_s"] > 0


def test_symphony_shock_hits_the_best_agent_silently() -> None:
    env = CoordinationEnv(scenario="symphony-shock", scenario_kwargs={"shock_step": 10})
    obs, _ = env.reset(seed=0)
    a = env.pool.names().index("A")
    p_before = env.pool.p_hard[a]
    events = []
    for _ in range(12):
        obs, _, _, _, info = env.step(first_available(obs))
        events += info["events"]
    assert events == ["shock: A degraded"]
    assert env.pool.p_hard[a] == pytest.approx(0.2 * p_before)
    assert env.pool.capability[a, 1] == pytest.approx(0.95)  # the card did not change

    env = CoordinationEnv(scenario="symphony-shock-unavailable", scenario_kwargs={"shock_step": 10})
    obs, _ = env.reset(seed=0)
    for _ in range(11):
        obs, *_ = env.step(first_available(obs))
    # A still looks available, but routing to it fails and counts as full regret.
    env.pool.load[:] = 0.0
    obs = env._obs()
    assert obs["action_mask"][a] == 1
    for _ in range(20):
        env.pool.load[a] = 0.0
        _, reward, _, _, info = env.step(a)
        assert reward == 0.0 and info["expected_success"] == 0.0 and info["error"] is None


def test_scenario_overrides_and_bad_kwargs_are_clear() -> None:
    env = CoordinationEnv(scenario="drift", scenario_kwargs={"sigma": 0.0, "load_per_call": 0.2})
    assert env.scenario.sigma == 0.0 and env.scenario.dynamics.load_per_call == 0.2
    with pytest.raises(ValueError, match="unknown scenario"):
        CoordinationEnv(scenario="nope")
    with pytest.raises(ValueError, match="has no field"):
        CoordinationEnv(scenario="drift", scenario_kwargs={"sigmaa": 1})
    with pytest.raises(ValueError, match="votes"):
        CoordinationEnv(votes=0)
    with pytest.raises(ValueError, match="slots=8"):
        CoordinationEnv(scenario="churn", slots=5)


def test_list_tasks_and_switching_scenario_at_reset() -> None:
    tasks = CoordinationEnv.list_tasks()
    ids = [t["task_id"] for t in tasks]
    assert "stationary" in ids and "symphony-shock" in ids and "churn" not in ids  # churn needs 8 slots
    assert {t["task_id"] for t in CoordinationEnv.list_tasks(slots=8)} == set(SCENARIOS)
    assert [t["task_id"] for t in CoordinationEnv.list_tasks(split="stationary")] == ["stationary"]
    env = gym.make(ENV_ID, slots=8)
    for task in CoordinationEnv.list_tasks(slots=8):
        obs, info = env.reset(seed=0, options={"task_id": task["task_id"]})
        assert info["task_id"] == task["task_id"] and env.observation_space.contains(obs)


def test_episode_success_means_near_oracle() -> None:
    env = gym.make(ENV_ID)
    obs, info = env.reset(seed=0)
    done = False
    while not done:
        obs, _, _, done, info = env.step(env.unwrapped.oracle_action())
    assert info["success"] and info["score"] > 0.95
    obs, info = env.reset(seed=0)
    done = False
    while not done:  # always the over-advertised worker: far from the oracle
        obs, _, _, done, info = env.step(4 if obs["action_mask"][4] else first_available(obs))
    assert not info["success"] and info["score"] < 0.6


def test_metrics_helpers() -> None:
    np.testing.assert_allclose(rolling_mean(np.array([1, 0, 1, 1]), 2), [1, 0.5, 0.5, 1])
    steady = np.ones(400)
    assert recovery_time(steady, 200) == 0
    dip = np.ones(600)
    dip[300:330] = 0.0
    assert recovery_time(dip, 300) == pytest.approx(30 + 50 - 5, abs=6)
    never = np.concatenate([np.ones(300), np.zeros(300)])
    assert recovery_time(never, 300) is None
    t = np.arange(1, 5001)
    assert loglog_slope(np.sqrt(t)) == pytest.approx(0.5, abs=0.01)
    assert loglog_slope(t.astype(float)) == pytest.approx(1.0, abs=0.01)


def test_render_ansi() -> None:
    env = CoordinationEnv(scenario="stationary", render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert "B-coder" in text and "subtask=" in text


def test_lynn_eval_linucb_via_cli(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = run_lynn(
        "eval", ENV_ID, "--agent", "linucb", "--episodes", "2", "--out", str(out), "--json", "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["episodes"] == 2 and summary["crashed_episodes"] == 0
    assert summary["mean_reward"] > 700  # ~90% of 1000 routed subtasks succeed
    proc = run_lynn("leaderboard", str(out))
    assert proc.returncode == 0 and "linucb" in proc.stdout
