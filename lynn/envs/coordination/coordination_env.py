"""``Lynn/Coordination-v0``: route a stream of subtasks to a pool of LLM workers (Symphony-Coord)."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lynn.envs.coordination.pool import N_FEATURES, AgentPool, Subtask
from lynn.envs.coordination.scenario_base import Scenario
from lynn.envs.coordination.scenarios import SCENARIOS, make_scenario


def vote_success_prob(p: np.ndarray, votes: int) -> np.ndarray:
    """P(a strict majority of ``votes`` independent executions succeeds) for success probability ``p``."""
    if votes == 1:
        return p
    need = votes // 2 + 1
    return sum(math.comb(votes, j) * p**j * (1.0 - p) ** (votes - j) for j in range(need, votes + 1))


class CoordinationEnv(gym.Env):
    """
    ## Description
    A pool of LLM workers receives a stream of subtasks; every step the policy routes the current
    subtask to one worker (Symphony-Coord, arXiv 2602.00966). Workers differ in cost, latency and
    (hidden) skill per subtask type and difficulty; their load rises with every call and decays over
    time, an overloaded or failed worker is unavailable, and scenarios add shocks, bursts, churn and
    drift (see :mod:`lynn.envs.coordination.scenarios`). The episode is a continuing stream, cut by
    the registered ``max_episode_steps`` (1000), so vector envs lose no steps to resets.

    ## Action Space
    ``Discrete(N)``: the pool slot to route the subtask to (``N`` = the scenario's slots, or ``slots``).
    Slots whose ``action_mask`` is 0 (unavailable or empty) are invalid: the subtask is lost
    (reward 0, ``info["error"]`` says why) and the env carries on.

    ## Observation Space
    A ``Dict`` of Boxes (SB3 ``MultiInputPolicy`` works on it as is):

    | key | shape | content |
    |---|---|---|
    | ``candidates`` | ``(N, 6)`` float32 | per slot ``[1, similarity, load, latency_norm, prior_success, available]`` |
    | ``action_mask`` | ``(N,)`` int8 | 1 where the slot can take the subtask |
    | ``subtask`` | ``(K + 1,)`` float32 | one-hot subtask type (``K`` types), then the hard flag |

    ``similarity`` is the worker's advertised match with the subtask's requirement,
    ``latency_norm = min(1, latency_ema_ms / 2000)``, ``prior_success`` the pool's reputation record of
    the worker on this subtask class (a Beta posterior mean over settled executions). Empty slots
    are all zeros.

    ## Rewards
    Each decision runs ``votes`` executions on the chosen worker; the subtask succeeds if a strict
    majority succeeds (Bernoulli draws from the hidden model). The decision's reward is
    ``success + agreement_weight * agreement - cost_weight * cost / max_cost - latency_weight * latency_norm`` and is settled
    ``delay`` steps later: the step's reward is the sum of the rewards settled in that step, listed
    in ``info["feedback"]`` as ``(decision_id, reward)`` pairs (with ``delay=0``, the decision's own).

    ## Episode End
    Never terminates; truncated by the ``TimeLimit`` of the registered id (``max_episode_steps=1000``).
    ``info["success"]`` (any step, so the last one counts for the leaderboard) is whether the
    episode's settled success rate reaches ``target_ratio`` (0.9) of the oracle's expected rate
    (always routing to the best available worker); ``info["score"]`` is that ratio itself.

    ## Arguments
    ```python
    gym.make("Lynn/Coordination-v0", scenario="symphony-shock", scenario_kwargs={"shock_step": 300},
             votes=1, delay=0, cost_weight=0.0, latency_weight=0.0, agreement_weight=0.0,
             slots=None, types=None)
    ```
    * ``scenario``: a name from :data:`~lynn.envs.coordination.scenarios.SCENARIOS`, ``"real-pool"``
      (real EVMQuest task instances, and with ``scenario_kwargs={"liveweb": N}`` LiveWeb test
      instances, routed to real agents, :mod:`lynn.envs.coordination.real_pool`:
      the validator decides success, latency and tokens are measured, results are cached), or a
      ``Scenario``.
    * ``scenario_kwargs``: overrides of the scenario's dataclass fields (and of its pool dynamics).
    * ``votes``: executions per subtask before the vote (odd numbers avoid ties, which fail).
    * ``delay``: steps between a decision and its reward.
    * ``cost_weight``, ``latency_weight``: penalty weights in the reward.
    * ``agreement_weight``: the reference's "agreement with the vote" term: the fraction of the
      ``votes`` executions that agree with the majority, times this weight, is added to the reward.
    * ``slots``, ``types``: pad the action/observation sizes, so that one env can switch between
      scenarios at ``reset(options={"task_id": name})`` (``list_tasks`` lists those that fit).

    ``info`` carries ``task_id`` (the scenario), ``decision_id`` (this step's decision),
    ``next_decision_id``, ``feedback``, ``regret`` (expected-success gap between the best available
    worker and the chosen one), ``success``, ``score``, ``error``, ``agent``, ``events`` and ``timings``
    (the simulated seconds of the routed call, so that equal seeds give equal infos).

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 30}

    def __init__(
        self,
        scenario: str | Scenario = "stationary",
        scenario_kwargs: dict[str, Any] | None = None,
        votes: int = 1,
        delay: int = 0,
        cost_weight: float = 0.0,
        latency_weight: float = 0.0,
        agreement_weight: float = 0.0,
        slots: int | None = None,
        types: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        if not isinstance(votes, int) or votes < 1:
            raise ValueError(f"votes must be an integer >= 1, got {votes!r}")
        if not isinstance(delay, int) or delay < 0:
            raise ValueError(f"delay must be an integer >= 0, got {delay!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.scenario = make_scenario(scenario, scenario_kwargs)
        self._scenario_kwargs = dict(scenario_kwargs or {})
        self.votes, self.delay = votes, delay
        self.cost_weight, self.latency_weight = float(cost_weight), float(latency_weight)
        self.agreement_weight = float(agreement_weight)
        self.render_mode = render_mode
        self.n_slots = slots if slots is not None else self.scenario.n_slots
        self.n_types = types if types is not None else self.scenario.n_types
        self._check_fits(self.scenario)

        self.action_space = spaces.Discrete(self.n_slots)
        self.observation_space = spaces.Dict(
            {
                "candidates": spaces.Box(0.0, 1.0, (self.n_slots, N_FEATURES), np.float32),
                "action_mask": spaces.Box(0, 1, (self.n_slots,), np.int8),
                "subtask": spaces.Box(0.0, 1.0, (self.n_types + 1,), np.float32),
            }
        )
        self.pool: AgentPool | None = None
        self.task: Subtask | None = None

    # --- task list ----------------------------------------------------------------------------
    @classmethod
    def list_tasks(cls, split: str | None = None, **env_kwargs: Any) -> list[dict[str, Any]]:
        """The scenarios an env made with ``env_kwargs`` can switch to at reset.

        Splits: ``stationary`` (the stationary scenario), ``nonstationary`` (the others), ``all``.
        """
        if split not in (None, "all", "stationary", "nonstationary"):
            raise ValueError(f"unknown split {split!r}; choose all, stationary or nonstationary")
        base = make_scenario(env_kwargs.get("scenario", "stationary"), env_kwargs.get("scenario_kwargs"))
        slots = env_kwargs.get("slots") or base.n_slots
        types = env_kwargs.get("types") or base.n_types
        tasks = []
        for name, sc_cls in SCENARIOS.items():
            sc = sc_cls()
            kind = "stationary" if name == "stationary" else "nonstationary"
            if split not in (None, "all") and kind != split:
                continue
            if sc.n_slots > slots or sc.n_types > types:
                continue
            tasks.append(
                {
                    "task_id": name,
                    "split": kind,
                    "description": sc_cls.description,
                    "agents": sc.n_slots,
                    "types": list(sc.type_names),
                }
            )
        return tasks

    def _check_fits(self, sc: Scenario) -> None:
        if sc.n_slots > self.n_slots or sc.n_types > self.n_types:
            raise ValueError(
                f"scenario {sc.name!r} needs {sc.n_slots} slots and {sc.n_types} types but this env has "
                f"{self.n_slots} and {self.n_types}; make it with slots={max(sc.n_slots, self.n_slots)}, "
                f"types={max(sc.n_types, self.n_types)}"
            )

    # --- gym API ------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is not None and task_id != self.scenario.name:
            if task_id not in SCENARIOS:  # a real pool cannot be switched to (its workers are built once)
                raise ValueError(f"unknown task_id {task_id!r}; choose one of {', '.join(SCENARIOS)}")
            scenario = make_scenario(task_id)
            self._check_fits(scenario)
            self.scenario = scenario
        rng = self.np_random
        self.pool = AgentPool(self.n_slots, self.n_types, self.scenario.dynamics)
        self.scenario.populate(self.pool, rng)
        self._cost_scale = max(1.0, float(self.pool.cost.max()))
        self.t = 0
        self._next_id = 0
        self._pending: deque[tuple[int, int, int, Subtask, int, int, float]] = deque()
        self._settled = 0
        self._settled_success = 0
        self._oracle_sum = 0.0
        self._regret_sum = 0.0
        events = self.scenario.on_step(0, self.pool, rng)
        self.task = self.scenario.sample_subtask(0, rng)
        obs = self._obs()
        info = {
            "task_id": self.scenario.name,
            "next_decision_id": 0,
            "agents": self.pool.names(),
            "events": events,
            "error": None,
            "timings": {},
        }
        return obs, info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self.pool is None or self.task is None:
            raise RuntimeError("call reset() before step()")
        pool, task, rng = self.pool, self.task, self.np_random
        decision_id = self._next_id
        self._next_id += 1

        real = self.scenario.real
        if real:  # exact: each available worker's cached majority-vote outcome on this instance
            q = self.scenario.expected(pool, task, self.votes)
        else:
            q = vote_success_prob(pool.success_prob(task), self.votes)
        best = float(q.max()) if q.size else 0.0
        self._oracle_sum += best
        slot, error = self._parse_action(action)
        feedback: list[tuple[int, float]] = []
        cost = latency_ms = 0.0
        chosen_q = 0.0
        exec_events: list[str] = []
        if error is not None:
            # The subtask is lost; its (zero) reward is known at once, so learners can settle it.
            feedback.append((decision_id, 0.0))
            self._settled += 1
        else:
            if real:
                ok, latency_ms, cost, note = self.scenario.execute(slot, task, self.votes, pool)
                if note is not None:
                    exec_events.append(f"unavailable: {note}")
            else:
                ok, latency_ms = pool.execute(slot, task, self.votes, rng)
                cost = float(pool.cost[slot]) * self.votes
            chosen_q = float(q[slot])
            success = int(ok.sum()) * 2 > self.votes
            agreement = float(np.mean(ok == success)) if self.votes > 1 else 1.0
            reward = (
                float(success)
                + self.agreement_weight * agreement
                - self.cost_weight * cost / (self._cost_scale * self.votes)
                - self.latency_weight * min(1.0, latency_ms / pool.dyn.latency_scale_ms)
            )
            self._pending.append(
                (self.t + self.delay, decision_id, slot, task, int(ok.sum()), self.votes, reward)
            )
        regret = best - chosen_q
        self._regret_sum += regret

        # Settle the votes that are due: the reputation record and the learner see them only now.
        while self._pending and self._pending[0][0] <= self.t:
            _, did, s, tk, n_ok, n, r = self._pending.popleft()
            pool.record(s, tk.type, tk.hard, n_ok, n)
            self._settled += 1
            self._settled_success += int(n_ok * 2 > n)
            feedback.append((did, r))
        reward_total = float(sum(r for _, r in feedback))

        chosen = pool.names()[slot] if error is None else None
        self.t += 1
        pool.decay()
        events = exec_events + self.scenario.on_step(self.t, pool, rng)
        self.task = self.scenario.sample_subtask(self.t, rng)
        obs = self._obs()
        rate = self._settled_success / self._settled if self._settled else 0.0
        oracle_rate = self._oracle_sum / self._next_id
        score = rate / oracle_rate if oracle_rate > 0 else 0.0
        info = {
            "task_id": self.scenario.name,
            "decision_id": decision_id,
            "next_decision_id": self._next_id,
            "feedback": feedback,
            "regret": regret,
            "expected_success": chosen_q,
            "best_expected_success": best,
            "agent": chosen,
            "cost": cost,
            "latency_ms": latency_ms,
            "success": bool(self._settled > 0 and score >= self.scenario.target_ratio),
            "score": score,
            "success_rate": rate,
            "error": error,
            "events": events,
            # Simulated seconds of the routed call (not wall clock: the env must stay deterministic);
            # real pools: the measured seconds, replayed from the cache on a cached stream.
            "timings": {"execution_s": latency_ms / 1000.0},
        }
        return obs, reward_total, False, False, info

    def _parse_action(self, action: Any) -> tuple[int, str | None]:
        try:
            arr = np.asarray(action)
            if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
                raise TypeError
            slot = int(arr.reshape(()))
        except (TypeError, ValueError):
            return -1, f"action must be one integer slot in [0, {self.n_slots}), got {action!r}"
        if not 0 <= slot < self.n_slots:
            return -1, f"slot {slot} is out of range [0, {self.n_slots})"
        assert self.pool is not None
        if not self.pool.present[slot]:
            return -1, f"slot {slot} is empty (no worker there); route to a slot whose action_mask is 1"
        if self.pool.offline[slot]:
            name = self.pool.names()[slot]
            reason = self.pool.offline_reason.get(slot, "its heartbeat stopped")
            return -1, (
                f"worker {name} (slot {slot}) is offline ({reason}); route to a slot whose action_mask is 1"
            )
        if not self.pool.available()[slot]:
            name = self.pool.names()[slot]
            return -1, (
                f"worker {name} (slot {slot}) is overloaded (load {self.pool.load[slot]:.2f}); "
                "route to a slot whose action_mask is 1"
            )
        return slot, None

    def _obs(self) -> dict[str, np.ndarray]:
        assert self.pool is not None and self.task is not None
        x, mask = self.pool.features(self.task)
        sub = np.zeros(self.n_types + 1, dtype=np.float32)
        sub[self.task.type] = 1.0
        sub[-1] = float(self.task.hard)
        return {"candidates": x, "action_mask": mask, "subtask": sub}

    # --- extras -------------------------------------------------------------------------------
    def oracle_action(self) -> int:
        """The available slot with the highest expected success now (privileged; for baselines/tests)."""
        assert self.pool is not None and self.task is not None
        if self.scenario.real:
            return int(np.argmax(self.scenario.expected(self.pool, self.task, self.votes)))
        q = self.pool.success_prob(self.task)
        return int(np.argmax(q))

    def close(self) -> None:
        """Stop the real pool's worker processes (simulated pools hold none)."""
        close = getattr(self.scenario, "close", None)
        if close is not None:
            close()
        super().close()

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.pool is None or self.task is None:
            return None
        x, mask = self.pool.features(self.task)
        kind = self.scenario.type_names[self.task.type] + (" (hard)" if self.task.hard else "")
        lines = [f"t={self.t} scenario={self.scenario.name} subtask={kind}"]
        for name, row, m in zip(self.pool.names(), x, mask, strict=True):
            lines.append(
                f"  {name:>14} {'ok ' if m else 'off'} sim={row[1]:.2f} load={row[2]:.2f} "
                f"lat={row[3]:.2f} prior={row[4]:.2f}"
            )
        return "\n".join(lines)
