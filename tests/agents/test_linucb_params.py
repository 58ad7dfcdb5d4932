"""LinUCB with parameters other than 1, checked step by step against an independent numpy router.

The reference below is written from the formulas in the module docstring (direct solves, no
Sherman-Morrison, no shared code with ``lynn.agents.linucb``): any misplaced ``lam``, ``alpha``,
``S``, ``delta`` or ``top_l``, a wrong update path or a wrong screening weight changes a decision
or the learned ``theta``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lynn.agents.linucb import LinUCBAgent, LinUCBArgs, candidates, parse_args
from lynn.envs.coordination import CoordinationEnv

D = 6


class Reference:
    """Two-stage LinUCB straight from the formulas (one model, or one per slot)."""

    def __init__(
        self,
        n_slots: int,
        alpha: float,
        lam: float,
        delta: float,
        S: float,
        top_l: int,
        screening: bool,
        disjoint: bool,
        features: str = "scaled",
    ):
        self.features = features
        self.alpha, self.lam, self.delta, self.S = alpha, lam, delta, S
        self.top_l, self.screening, self.disjoint = top_l, screening, disjoint
        n = n_slots if disjoint else 1
        self.xs: list[list[np.ndarray]] = [[] for _ in range(n)]
        self.rs: list[list[float]] = [[] for _ in range(n)]

    def radius(self, t: int) -> float:
        t = max(1, t)  # GlobalLinUCB.beta
        return (
            self.alpha * math.sqrt(D * math.log(1 + t / self.lam) + 2 * math.log(1 / self.delta))
            + math.sqrt(self.lam) * self.S
        )

    def model(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        a = self.lam * np.eye(D)
        b = np.zeros(D)
        for x, r in zip(self.xs[m], self.rs[m], strict=True):
            a += np.outer(x, x)
            b += r * x
        return a, np.linalg.solve(a, b)

    def choose(self, obs: dict) -> tuple[int, np.ndarray]:
        raw = np.asarray(obs["candidates"], dtype=float)
        mask = np.asarray(obs["action_mask"])
        slots = [i for i in range(len(raw)) if mask[i]] or list(range(len(raw)))
        if self.screening and len(slots) > self.top_l:

            def score(i: int) -> float:
                _, sim, load, lat, prior, avail = raw[i]
                stability = 0.4 * (1 - load) + 0.4 * (1 - lat) + 0.2 * avail
                return 0.5 * sim + 0.35 * prior + 0.15 * stability

            # sorted() is stable: ties keep the lower slot first
            slots = sorted(slots, key=lambda i: -score(i))[: self.top_l]
        best, best_ucb, best_x = -1, -math.inf, None
        for i in slots:
            if self.features == "reference":  # build_x: x / ||x|| when ||x|| > 1
                norm = math.sqrt(sum(v * v for v in raw[i]))
                x = raw[i] / norm if norm > 1.0 else raw[i]
            else:
                x = raw[i] / math.sqrt(D)
            m = i if self.disjoint else 0
            a, theta = self.model(m)
            ucb = x @ theta + self.radius(len(self.xs[m])) * math.sqrt(x @ np.linalg.solve(a, x))
            if ucb > best_ucb + 1e-12:
                best, best_ucb, best_x = i, ucb, x
        return best, best_x

    def learn(self, slot: int, x: np.ndarray, r: float) -> None:
        m = slot if self.disjoint else 0
        self.xs[m].append(x)
        self.rs[m].append(r)


PARAMS = [
    dict(alpha=0.7, lam=2.5, delta=0.2, S=1.7, top_l=2, screening=True, disjoint=False),
    dict(alpha=0.3, lam=0.4, delta=0.01, S=0.25, top_l=4, screening=True, disjoint=False),
    dict(alpha=1.3, lam=3.0, delta=0.1, S=0.6, top_l=3, screening=False, disjoint=False),
    dict(alpha=0.5, lam=1.7, delta=0.3, S=0.9, top_l=3, screening=True, disjoint=True),
    # The reference's router: Symphony-Coord's GlobalLinUCB defaults with build_x.
    dict(
        alpha=1.0, lam=1.0, delta=0.05, S=1.0, top_l=3, screening=True, disjoint=False, features="reference"
    ),
    dict(alpha=0.7, lam=2.5, delta=0.2, S=1.7, top_l=2, screening=True, disjoint=False, features="reference"),
]


@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_decisions_and_theta_match_the_reference(params: dict) -> None:
    env = CoordinationEnv(scenario="stationary", slots=8, delay=2, votes=3)
    agent = LinUCBAgent(env, **params)
    ref = Reference(8, **params)
    obs, info = env.reset(seed=5)
    agent.reset(seed=5)
    pending: dict[int, tuple[int, np.ndarray]] = {}
    learned = 0
    for _ in range(60):
        want, x = ref.choose(obs)
        action = agent.act(obs, info)
        assert action == want
        obs, r, term, trunc, info = env.step(action)
        pending[int(info["decision_id"])] = (want, x)
        for decision_id, reward in info["feedback"]:
            slot, xx = pending.pop(int(decision_id))
            ref.learn(slot, xx, float(reward))
            learned += 1
        agent.observe(action, r, obs, term, trunc, info)
    assert learned > 40 and agent.updates == learned
    for m in range(len(ref.xs)):
        a, theta = ref.model(m)
        np.testing.assert_allclose(agent.model.theta[m], theta, atol=1e-9)
        np.testing.assert_allclose(agent.model.A_inv[m], np.linalg.inv(a), atol=1e-9)
        assert agent.model.n[m] == len(ref.xs[m])


def test_radius_with_every_parameter_off_one() -> None:
    agent = LinUCBAgent(CoordinationEnv(), alpha=0.7, lam=2.5, delta=0.2, S=1.7)
    for t in (0, 1, 7, 250):
        tt = max(1, t)  # the reference's t = max(1, t): no update yet radiates like one
        want = 0.7 * math.sqrt(6 * math.log(1 + tt / 2.5) + 2 * math.log(5)) + math.sqrt(2.5) * 1.7
        assert agent.beta(t) == pytest.approx(want, rel=1e-12)
    assert agent.beta(0) == agent.beta(1)
    counts = np.array([0, 3, 40])
    want = [
        0.7 * math.sqrt(6 * math.log(1 + max(1, t) / 2.5) + 2 * math.log(5)) + math.sqrt(2.5) * 1.7
        for t in counts
    ]
    np.testing.assert_allclose(agent.beta(counts), want, rtol=1e-12)


def test_one_shared_model_unless_disjoint_and_integer_counts() -> None:
    env = CoordinationEnv(slots=5)
    agent = LinUCBAgent(env, lam=2.0)
    assert agent.env is env
    assert agent.model.A_inv.shape == (1, 6, 6) and agent.model.theta.shape == (1, 6)
    assert agent.model.n.dtype == np.int64 and agent.model.n.tolist() == [0]
    agent.reset()
    assert agent.model.A_inv.shape == (1, 6, 6)


def test_observe_before_any_decision_learns_nothing() -> None:
    env = CoordinationEnv()
    agent = LinUCBAgent(env)
    obs, info = env.reset(seed=0)
    agent.observe(0, 1.0, obs, False, False, {})  # nothing was chosen yet
    assert agent.updates == 0
    agent.act(obs, info)
    agent.reset()
    agent.observe(0, 1.0, obs, False, False, {})  # reset forgets the decision
    assert agent.updates == 0 and agent.delayed.last is None


def test_a_fresh_model_is_lam_times_identity() -> None:
    agent = LinUCBAgent(CoordinationEnv(slots=5), lam=4.0, disjoint=True)
    assert agent.model.A_inv.shape == (5, 6, 6)
    np.testing.assert_allclose(agent.model.A_inv[3], np.eye(6) / 4.0)
    assert not agent.model.theta.any() and not agent.model.b.any()


def test_rewards_without_decision_ids_are_the_real_rewards() -> None:
    """An env with no ``feedback``: each step's reward (not 0) updates the decision just made."""
    env = CoordinationEnv(scenario="stationary")
    agent = LinUCBAgent(env, lam=2.0, alpha=0.4, S=0.8)
    obs, info = env.reset(seed=2)
    agent.reset(seed=2)
    xs, rs = [], []
    for _ in range(25):
        action = agent.act(obs, info)
        xs.append(agent.delayed.last[1].copy())
        obs, r, term, trunc, info = env.step(action)
        rs.append(float(r))
        agent.observe(action, r, obs, term, trunc, {})
    xs_, rs_ = np.array(xs), np.array(rs)
    assert rs_.any() and agent.updates == 25
    a = 2.0 * np.eye(6) + xs_.T @ xs_
    np.testing.assert_allclose(agent.model.theta[0], np.linalg.solve(a, xs_.T @ rs_), atol=1e-9)
    np.testing.assert_allclose(agent.model.b[0], xs_.T @ rs_, atol=1e-12)
    # a second observe with nothing chosen in between learns nothing
    agent.observe(action, 1.0, obs, term, trunc, {})
    assert agent.updates == 25


def test_feedback_without_a_decision_id_files_nothing() -> None:
    env = CoordinationEnv()
    agent = LinUCBAgent(env)
    obs, info = env.reset(seed=0)
    agent.act(obs, info)
    agent.observe(0, 1.0, obs, False, False, {"feedback": [], "decision_id": None})
    assert agent.delayed.pending == {} and agent.delayed.last is None and agent.updates == 0
    agent.act(obs, info)
    x3 = agent.delayed.last[1].copy()
    agent.observe(0, 1.0, obs, False, False, {"feedback": [(7, 1.0)], "decision_id": 3})
    assert list(agent.delayed.pending) == [3] and agent.updates == 0  # 7 was never filed: ignored
    agent.observe(0, 0.0, obs, False, False, {"feedback": [(3, 0.75)], "decision_id": None})
    assert agent.updates == 1 and agent.delayed.pending == {}
    np.testing.assert_allclose(agent.model.b[0], 0.75 * x3)


def test_freeze_after_stops_learning_at_that_count() -> None:
    env = CoordinationEnv(scenario="stationary")
    agent = LinUCBAgent(env, freeze_after=5)
    obs, info = env.reset(seed=1)
    for step in range(12):
        action = agent.act(obs, info)
        obs, r, term, trunc, info = env.step(action)
        agent.observe(action, r, obs, term, trunc, {})
        assert agent.updates == min(step + 1, 5)
        if step == 4:
            frozen = agent.model.theta.copy()
    np.testing.assert_array_equal(agent.model.theta, frozen)
    assert agent.model.n[0] == 5


def test_candidates_follow_the_mask() -> None:
    obs = {"candidates": np.zeros((4, 6)), "action_mask": np.array([0, 1, 0, 1])}
    assert candidates(obs).tolist() == [1, 3]
    assert candidates({"candidates": np.zeros((3, 6))}).tolist() == [0, 1, 2]
    assert candidates({"candidates": np.zeros((3, 6)), "action_mask": np.zeros(3)}).tolist() == [0, 1, 2]


def test_unknown_option_names_the_known_ones() -> None:
    with pytest.raises(TypeError) as err:
        parse_args(LinUCBArgs, {"alpah": 1.0})
    assert "['alpah']" in str(err.value) and "'alpha'" in str(err.value) and "LinUCBArgs" in str(err.value)
    assert parse_args(LinUCBArgs, {"lam": 3.0}).lam == 3.0


def test_defaults_and_config() -> None:
    a = LinUCBArgs()
    assert (a.alpha, a.lam, a.delta, a.S, a.top_l, a.screening, a.disjoint, a.freeze_after) == (
        0.05,
        1.0,
        0.05,
        0.5,
        3,
        True,
        False,
        None,
    )
    agent = LinUCBAgent(CoordinationEnv(), lam=2.0)
    assert agent.config()["lam"] == 2.0 and agent.config()["alpha"] == 0.05
    assert agent.scale == pytest.approx(1 / math.sqrt(6))


def test_reference_feature_map_is_build_x() -> None:
    """build_x by hand: x = [1, 0.5, 0.2, 0.1, 0.6, 1] has ||x|| = sqrt(2.66) = 1.6310 > 1, so each
    entry is divided by it; the scaled map divides every vector by sqrt(6) = 2.4495 instead."""
    env = CoordinationEnv()
    ref = LinUCBAgent(env, features="reference")
    ours = LinUCBAgent(env)
    x = np.array([[1.0, 0.5, 0.2, 0.1, 0.6, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    want = np.array([1.0, 0.5, 0.2, 0.1, 0.6, 1.0]) / 1.6309506
    np.testing.assert_allclose(ref.features(x)[0], want, rtol=1e-6)
    np.testing.assert_allclose(ref.features(x)[1], x[1])  # norm 1: left as it is
    np.testing.assert_allclose(ours.features(x), x / 2.4494897, rtol=1e-6)
    with pytest.raises(ValueError, match="features"):
        LinUCBAgent(env, features="unit")


def test_reference_router_differs_from_the_scaled_one() -> None:
    """The two maps are different routers: over 400 decisions some choices differ."""
    env = CoordinationEnv(scenario="stationary", slots=8, delay=2, votes=3)
    picks = {}
    for feat in ("reference", "scaled"):
        agent = LinUCBAgent(env, alpha=1.0, S=1.0, features=feat, change_detect=False)
        obs, info = env.reset(seed=11)
        agent.reset(seed=11)
        out = []
        for _ in range(400):
            a = agent.act(obs, info)
            obs, r, term, trunc, info = env.step(a)
            agent.observe(a, r, obs, term, trunc, info)
            out.append(a)
        picks[feat] = out
    assert sum(a != b for a, b in zip(picks["reference"], picks["scaled"], strict=True)) > 0
