"""The LinUCB router and the bandit baselines on Lynn/Coordination-v0."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest

import lynn  # noqa: F401  (registers the ids)
from lynn.agents import Agent, make_agent
from lynn.agents.bandits import (
    EpsilonGreedyAgent,
    OracleRouter,
    RoundRobinAgent,
    StaticRuleAgent,
    ThompsonAgent,
)
from lynn.agents.linucb import LinUCBAgent, Ridge, screening_scores
from lynn.envs.coordination import SCENARIOS, CoordinationEnv
from lynn.envs.coordination.metrics import loglog_slope

ROUTERS = ["linucb", "round-robin", "static", "epsilon-greedy", "thompson", "oracle"]


def run(env: gym.Env, agent: Agent, steps: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Drive ``agent`` for ``steps`` steps; per-step regret, reward, chosen worker name."""
    obs, info = env.reset(seed=seed)
    agent.reset(seed=seed)
    regret, reward, chosen = np.zeros(steps), np.zeros(steps), []
    for t in range(steps):
        action = agent.act(obs, info)
        obs, r, terminated, truncated, info = env.step(action)
        agent.observe(action, r, obs, terminated, truncated, info)
        regret[t], reward[t] = info["regret"], r
        chosen.append(info["agent"])
        assert info["error"] is None, info["error"]
    return {"regret": regret, "reward": reward, "chosen": np.array(chosen)}


def test_sherman_morrison_matches_the_direct_solution() -> None:
    rng = np.random.default_rng(0)
    model = Ridge(6, lam=1.0)
    xs, rs = rng.random((50, 6)) / np.sqrt(6), rng.random(50)
    for x, r in zip(xs, rs, strict=True):
        model.update(0, x, r)
    a = np.eye(6) + xs.T @ xs
    np.testing.assert_allclose(model.A_inv[0], np.linalg.inv(a), atol=1e-10)
    np.testing.assert_allclose(model.theta[0], np.linalg.solve(a, xs.T @ rs), atol=1e-10)


def test_screening_score_is_the_reference_formula() -> None:
    x = np.array([[1.0, 0.8, 0.5, 0.25, 0.6, 1.0]])
    stability = 0.4 * 0.5 + 0.4 * 0.75 + 0.2 * 1.0
    assert screening_scores(x)[0] == pytest.approx(0.5 * 0.8 + 0.35 * 0.6 + 0.15 * stability)


def test_beta_is_the_oful_radius() -> None:
    agent = LinUCBAgent(CoordinationEnv(), alpha=1.0, lam=1.0, delta=0.05, S=1.0)
    t = 100
    expected = np.sqrt(6 * np.log(1 + t) + 2 * np.log(20)) + 1.0
    assert agent.beta(t) == pytest.approx(expected)


@pytest.mark.parametrize("name", ROUTERS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_routers_only_route_to_available_workers(name: str, scenario: str) -> None:
    env = gym.make("Lynn/Coordination-v0", scenario=scenario, slots=8)
    agent = make_agent(name, env)
    run(env, agent, 300, seed=1)  # asserts info["error"] is None every step


def test_delayed_updates_use_the_decisions_that_earned_them() -> None:
    env = CoordinationEnv(scenario="stationary", delay=4, votes=3)
    agent = LinUCBAgent(env)
    obs, info = env.reset(seed=3)
    agent.reset(seed=3)
    chosen_x: dict[int, np.ndarray] = {}
    rewards: dict[int, float] = {}
    for _ in range(120):
        action = agent.act(obs, info)
        x = agent.delayed.last[1].copy()
        obs, r, term, trunc, info = env.step(action)
        chosen_x[info["decision_id"]] = x
        rewards.update(dict(info["feedback"]))
        agent.observe(action, r, obs, term, trunc, info)
    settled = sorted(rewards)
    assert settled == list(range(120 - 4))
    assert sorted(agent.delayed.pending) == list(range(116, 120))  # still waiting for their votes
    xs = np.array([chosen_x[i] for i in settled])
    rs = np.array([rewards[i] for i in settled])
    a = np.eye(6) + xs.T @ xs
    np.testing.assert_allclose(agent.model.theta[0], np.linalg.solve(a, xs.T @ rs), atol=1e-8)


def test_regret_grows_sublinearly_on_stationary() -> None:
    steps = 6000
    env = CoordinationEnv(scenario="stationary")
    ours = run(env, LinUCBAgent(env), steps, seed=0)
    cum = np.cumsum(ours["regret"])
    assert loglog_slope(cum) < 0.6
    assert ours["regret"][-2000:].mean() < 0.01  # it has converged to the oracle's choices
    rand = run(env, make_agent("random", gym.make("Lynn/Coordination-v0")), steps, seed=0)
    assert loglog_slope(np.cumsum(rand["regret"])) > 0.95  # a non-learner's regret is linear
    assert cum[-1] < 0.1 * rand["regret"].sum()


@pytest.mark.parametrize("scenario", ["symphony-shock", "symphony-shock-unavailable"])
def test_recovers_after_the_shock_on_symphony_shock(scenario: str) -> None:
    post_ours, post_frozen, post_oracle = [], [], []
    for seed in range(3):
        env = CoordinationEnv(scenario=scenario)
        ours = run(env, LinUCBAgent(env), 1000, seed=seed)
        frozen = run(env, LinUCBAgent(env, freeze_after=300), 1000, seed=seed)
        oracle = run(env, OracleRouter(env), 1000, seed=seed)
        # After the shock the router stops sending work to the degraded worker A ...
        late = ours["chosen"][600:]
        assert (late == "A").mean() < 0.05
        assert (ours["chosen"][300:500] == "A").mean() > 0.2  # ... which it used a lot before
        post_ours.append(ours["reward"][600:].mean())
        post_frozen.append(frozen["reward"][600:].mean())
        post_oracle.append(oracle["reward"][600:].mean())
    # ... and its success comes back close to what the (privileged) oracle achieves after the shock,
    # while a router frozen before the shock does not recover.
    assert np.mean(post_ours) > 0.93 * np.mean(post_oracle)
    assert np.mean(post_ours) > np.mean(post_frozen) + 0.08


def test_variants_and_options() -> None:
    env = CoordinationEnv(scenario="stationary", slots=8)
    frozen = LinUCBAgent(env, freeze_after=50)
    run(env, frozen, 200)
    assert frozen.updates == 50
    disjoint = LinUCBAgent(env, disjoint=True)
    run(env, disjoint, 300)
    assert disjoint.model.theta.shape == (8, 6) and (disjoint.model.n[:5] > 0).sum() >= 3
    assert disjoint.model.n[5:].sum() == 0  # empty slots are never chosen
    flat = LinUCBAgent(env, screening=False)
    result = run(env, flat, 300)
    assert set(result["chosen"]) >= {"B-coder", "C-math", "D-writer"}
    with pytest.raises(TypeError, match="unknown option"):
        LinUCBAgent(env, alpah=1.0)
    with pytest.raises(TypeError, match="unknown option"):
        ThompsonAgent(env, eps=0.1)


def test_round_robin_cycles_and_static_follows_the_card() -> None:
    env = CoordinationEnv(scenario="stationary")
    rr = run(env, RoundRobinAgent(env), 10)
    assert list(rr["chosen"][:5]) == env.pool.names()
    obs, info = env.reset(seed=0)
    static = StaticRuleAgent(env)
    for _ in range(50):
        action = static.act(obs, info)
        sims = obs["candidates"][:, 1] * obs["action_mask"]
        assert action == int(np.argmax(sims))
        obs, _, _, _, info = env.step(action)


@pytest.mark.parametrize(
    "factory",
    [lambda e: LinUCBAgent(e), lambda e: ThompsonAgent(e), lambda e: EpsilonGreedyAgent(e)],
    ids=["linucb", "thompson", "epsilon-greedy"],
)
def test_learners_beat_the_non_learners(factory: Callable[[gym.Env], Agent]) -> None:
    env = CoordinationEnv(scenario="stationary")
    learner = run(env, factory(env), 1500, seed=4)["reward"].mean()
    for baseline in (RoundRobinAgent(env), StaticRuleAgent(env)):
        assert learner > run(env, baseline, 1500, seed=4)["reward"].mean() + 0.2


def test_same_seed_same_decisions() -> None:
    for name in ("thompson", "epsilon-greedy", "linucb"):
        env = gym.make("Lynn/Coordination-v0", scenario="drift")
        a = run(env, make_agent(name, env), 300, seed=9)
        b = run(env, make_agent(name, env), 300, seed=9)
        assert (a["chosen"] == b["chosen"]).all() and (a["reward"] == b["reward"]).all()


def test_works_without_decision_ids() -> None:
    """On an env that reports no feedback pairs, each reward updates the decision just made."""
    env = CoordinationEnv(scenario="stationary")
    agent = LinUCBAgent(env)
    obs, info = env.reset(seed=0)
    for _ in range(20):
        action = agent.act(obs, info)
        obs, r, term, trunc, info = env.step(action)
        agent.observe(action, r, obs, term, trunc, {})
    assert agent.updates == 20
