"""Rollouts of an LM policy, imagined (``Lynn/WebWorldModel-v0``) or real (``Lynn/LiveWeb-v0``).

:func:`run_episodes` plays a list of episodes (task id + reset seed) on a few envs **in lockstep**: at
every step the policy answers all live episodes in one batched generation
(:meth:`lynn.agents.llm.LMPolicy.act_batch`, the same rendering, page cut and parsing as
``lynn eval --agent lm``), and the world-model envs are stepped together with
:meth:`WebWorldModelEnv.step_batch` (one batched model call per imagined step); real browsers are
stepped one after the other. Each step keeps the prompt and reply token ids the policy used
(:class:`lynn.agents.llm.rollouts.IdGenerator`), so the learner recomputes log-probs itself.

An episode ends when the policy answers (``send_msg_to_user`` / ``report_infeasible``) or at the
horizon: the envs are made with ``max_steps=horizon``, so a rollout cut there is still scored (by the
reward model in imagination, by the task's evaluators on the real site). Its reward is the last step's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Step", "Trajectory", "make_envs", "make_policy", "run_episodes"]


@dataclass
class Step:
    """One decision: the prompt's token ids, the reply's (EOS included) and the action text sent."""

    prompt_ids: list[int]
    completion_ids: list[int]
    action: str


@dataclass
class Trajectory:
    """One episode. ``source``: ``imagined``, ``real`` (a live rollout) or ``expert``."""

    task_id: str
    steps: list[Step]
    reward: float = 0.0
    success: bool = False
    source: str = "imagined"
    seed: int = 0
    errors: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def make_envs(
    env_id: str,
    n: int,
    horizon: int,
    world_model: str = "",
    reward_model: str = "",
    reward_mode: str = "binary",
    self_assess: bool = False,
    split: str = "train",
) -> list[Any]:
    """``n`` unwrapped envs of ``env_id`` that end episodes at ``horizon``. World-model envs share one
    loaded world model (batched stepping); LiveWeb envs are one browser each."""
    import gymnasium as gym

    import lynn  # noqa: F401  (registers the ids)

    env_id = env_id.removeprefix("lynn:")
    if env_id == "Lynn/WebWorldModel-v0":
        kw: dict[str, Any] = dict(
            reward_model=reward_model or world_model,
            split=split,
            max_steps=horizon,
            reward_mode=reward_mode,
            self_assess=self_assess,
        )
        first = gym.make(env_id, model=world_model, disable_env_checker=True, **kw).unwrapped
        others = [
            gym.make(
                env_id,
                model=world_model,
                world_model=first.world_model,
                disable_env_checker=True,
                **kw,
            ).unwrapped
            for _ in range(n - 1)
        ]
        return [first, *others]
    return [
        gym.make(env_id, split=split, max_steps=horizon, disable_env_checker=True).unwrapped for _ in range(n)
    ]


def make_policy(
    model: Any, tokenizer: Any, env_id: str, temperature: float, max_new_tokens: int, context: int
) -> Any:
    """An ``LMPolicy`` over ``model`` whose generations carry token ids (an :class:`IdGenerator`)."""
    from lynn.agents.llm.policy import LMPolicy
    from lynn.agents.llm.rollouts import IdGenerator

    return LMPolicy(
        env_id=env_id.removeprefix("lynn:"),
        generator=IdGenerator(model, tokenizer),
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        context=context,
    )


def run_episodes(
    envs: Sequence[Any],
    policy: Any,
    episodes: Sequence[tuple[str, int]],
    horizon: int,
    seed: int,
    source: str = "imagined",
) -> list[Trajectory]:
    """Play ``episodes`` (``(task_id, reset_seed)``) on ``envs`` in waves of ``len(envs)``, lockstep.

    Args:
        envs: unwrapped envs (from :func:`make_envs`).
        policy: an ``LMPolicy`` with an :class:`~lynn.agents.llm.rollouts.IdGenerator`.
        episodes: what to play, in order; the result is in the same order.
        horizon: step cap (the envs end episodes there themselves; this is a guard).
        seed: sampling seed of the policy (each batched generation continues from it).
        source: label of the trajectories.
    """
    from lynn.envs.worldmodel.worldmodel_env import WebWorldModelEnv

    policy.reset(seed=seed)
    policy.calls = 0
    batched = all(isinstance(e, WebWorldModelEnv) for e in envs)
    out: list[Trajectory] = []
    for w in range(0, len(episodes), len(envs)):
        wave = list(episodes[w : w + len(envs)])
        live = envs[: len(wave)]
        obs, trajs = [], []
        for env, (tid, s) in zip(live, wave, strict=True):
            o, _ = env.reset(seed=int(s), options={"task_id": tid})
            obs.append(o)
            trajs.append(Trajectory(tid, [], source=source, seed=int(s)))
        done = [False] * len(wave)
        t0 = time.perf_counter()
        for _ in range(horizon):
            idx = [i for i, d in enumerate(done) if not d]
            if not idx:
                break
            actions = policy.act_batch([obs[i] for i in idx], [{} for _ in idx])
            gens = policy.last_generations
            if batched:
                results = WebWorldModelEnv.step_batch([live[i] for i in idx], actions)
            else:
                results = [live[i].step(a) for i, a in zip(idx, actions, strict=True)]
            for i, a, g, (o, r, term, trunc, info) in zip(idx, actions, gens, results, strict=True):
                trajs[i].steps.append(Step(list(g.stats["prompt_ids"]), list(g.stats["completion_ids"]), a))
                trajs[i].errors += bool(info.get("error"))
                obs[i] = o
                if term or trunc:
                    done[i] = True
                    trajs[i].reward = float(r)
                    trajs[i].success = bool(info.get("success", False))
                    trajs[i].info = {"score": info.get("score"), "terminated": bool(term)}
        for t in trajs:
            t.info["wave_s"] = time.perf_counter() - t0
        out += trajs
    return out
