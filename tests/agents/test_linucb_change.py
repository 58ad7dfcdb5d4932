"""LinUCB's change detector (``change_detect``): a per-worker Bernoulli CUSUM with a circuit breaker."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lynn.agents.linucb import ChangeDetector, LinUCBAgent
from lynn.envs.coordination import CoordinationEnv
from lynn.envs.coordination.metrics import recovery_time

CLS = b"simple"


def detector(**kw) -> ChangeDetector:
    args = {"n_slots": 3, "rho": 0.1, "h": 7.0, "suspend_for": 50, "min_record": 10} | kw
    return ChangeDetector(**args)


def feed(det: ChangeDetector, slot: int, outcomes: list[bool], cls: bytes = CLS) -> list[bool]:
    out = []
    for ok in outcomes:
        det.tick()
        out.append(det.update(slot, cls, ok))
    return out


def test_two_failures_after_a_long_good_record_alarm_and_suspend() -> None:
    det = detector()
    assert not any(feed(det, 0, [True] * 60))
    assert feed(det, 0, [False, False]) == [False, True]
    assert det.suspended().tolist() == [True, False, False]
    # The statistic is exactly the summed log-likelihood ratio of H1: p = 0.1 p0 against H0: p = p0.
    det2 = detector()
    feed(det2, 1, [True] * 60)
    p0 = 61 / 62
    feed(det2, 1, [False])
    assert det2.stat[1] == pytest.approx(math.log((1 - 0.1 * p0) / (1 - p0)))
    for _ in range(49):
        det.tick()
    assert det.suspended()[0]
    det.tick()
    assert not det.suspended()[0]  # 50 decisions later it is readmitted


def test_a_mediocre_record_or_a_short_one_is_not_alarmed_by_two_failures() -> None:
    det = detector()
    feed(det, 0, [True, True, True, True, False] * 12)  # a 0.8 worker
    assert feed(det, 0, [False, False]) == [False, False]
    det = detector()
    assert feed(det, 1, [False] * 10) == [False] * 10  # under min_record: LinUCB's business, not ours
    assert det.alarms == []


def test_probation_and_exponential_backoff() -> None:
    det = detector()
    feed(det, 0, [True] * 60 + [False, False])
    first = det.until[0] - det.t
    assert first == 50
    for _ in range(50):
        det.tick()
    assert feed(det, 0, [False]) == [True]  # the first call back fails: flagged again at once ...
    assert det.until[0] - det.t == 100  # ... for twice as long
    for _ in range(100):
        det.tick()
    assert feed(det, 0, [True]) == [False]  # a success on probation readmits it
    assert not det.suspended()[0] and not det.probation[0]


def test_outcomes_settling_during_a_suspension_do_not_alarm_again() -> None:
    """The issue's reproduction: with delayed feedback, calls made before the alarm settle while the
    worker is suspended. They are the same break the alarm acted on: one alarm, one suspension of 50
    (to t = 62 + 50 = 112), not a second alarm (strikes 2) that runs it to 65 + 100 = 165."""
    det = detector()
    feed(det, 0, [True] * 60 + [False, False])  # alarm at t = 62
    assert det.alarms == [(62, 0)] and det.until[0] == 112
    assert feed(det, 0, [False, False, False]) == [False, False, False]  # in flight, settling at 63..65
    assert det.strikes[0] == 1 and det.until[0] == 112 and det.stat[0] == 0.0
    assert det.record[(0, CLS)] == [60, 65]  # they still join the record
    for _ in range(112 - det.t):
        det.tick()
    assert feed(det, 0, [True]) == [False] and not det.probation[0]  # readmitted on probation, cleared


def run(agent: LinUCBAgent, env: CoordinationEnv, seed: int, steps: int = 1000) -> dict:
    obs, info = env.reset(seed=seed)
    agent.reset(seed=seed)
    reward, regret, chosen = np.zeros(steps), np.zeros(steps), []
    for t in range(steps):
        action = agent.act(obs, info)
        obs, r, terminated, truncated, info = env.step(action)
        agent.observe(action, r, obs, terminated, truncated, info)
        reward[t], regret[t] = r, info["regret"]
        chosen.append(info["agent"])
    return {"reward": reward, "regret": regret, "chosen": chosen}


def test_the_detector_leaves_the_silently_failed_worker_within_three_calls_on_standby() -> None:
    # Seeds 100-102: not the benchmark's streams (0-9).
    times = []
    for seed in (100, 101, 102):
        env = CoordinationEnv(scenario="standby-shock")
        agent = LinUCBAgent(env)  # change_detect is the default
        out = run(agent, env, seed)
        a = env.pool.names().index("A")
        alarm = [t for t, s in agent.detector.alarms if s == a and t > 500]
        assert alarm, agent.detector.alarms
        calls = out["chosen"][500 : alarm[0]].count("A")
        assert calls <= 3, calls  # two or three failed calls after a long good record are enough
        times.append(recovery_time(out["reward"], 500))
    assert all(t is not None for t in times) and float(np.median(times)) <= 50, times
    plain = LinUCBAgent(CoordinationEnv(scenario="standby-shock"), change_detect=False)
    assert plain.detector is None


def test_no_regression_on_a_stationary_stream() -> None:
    for seed in (100, 101):
        env = CoordinationEnv(scenario="stationary")
        on = LinUCBAgent(env)
        with_cd = run(on, env, seed, steps=1500)
        without = run(LinUCBAgent(env, change_detect=False), env, seed, steps=1500)
        # Nothing changes on a stationary pool, so a false alarm is rare (e^7 ~ 1100 calls apart).
        assert len(on.detector.alarms) <= 1, on.detector.alarms
        assert with_cd["regret"].sum() <= without["regret"].sum() + 3.0


def test_bad_options_are_rejected() -> None:
    env = CoordinationEnv(scenario="stationary")
    for kw in ({"cusum_rho": 1.0}, {"cusum_h": 0.0}, {"suspend_for": -1}, {"min_record": -2}):
        with pytest.raises(ValueError):
            LinUCBAgent(env, **kw)
