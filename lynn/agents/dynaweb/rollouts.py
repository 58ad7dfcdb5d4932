"""Rollouts of an LM policy, imagined (``Lynn/WebWorldModel-v0``) or real (``Lynn/LiveWeb-v0``).

:func:`run_episodes` plays a list of episodes (task id + reset seed) on a few envs **in lockstep**: at
every step the policy answers all live episodes in one batched generation
(:meth:`lynn.agents.llm.LMPolicy.act_batch`, the same rendering, page cut and parsing as
``lynn eval --agent lm``), and the world-model envs are stepped together with
:meth:`WebWorldModelEnv.step_batch` (one batched model call per imagined step); real browsers are
stepped one after the other. Each step keeps the prompt and reply token ids the policy used
(:class:`lynn.agents.llm.rollouts.IdGenerator`), so the learner recomputes log-probs itself.

**Ranked-format policies** (a policy folder with ``lynn_web.json``, e.g. ``zoo:web-lm``) do not generate.
Their chooser (:class:`lynn.lm.web_candidates.RankedChooser`) samples one of the page's valid candidate
actions from the policy's own distribution at the rollout temperature — the LM's softmax over the
candidates, mixed with the action memory of expert replies (``λ·p_kNN + (1 − λ)·p_LM``) — and the step keeps
the prompt and the chosen reply's token ids exactly as the chooser scored them
(:meth:`~lynn.lm.web_candidates.Choice.token_ids`). The learner then raises or lowers the LM's likelihood of
that reply: RL trains the LM, the memory stays as built (unless ``learn_memory_weight`` is on: then λ is a
parameter of the policy and the row's log-probability is the mixture's, :mod:`lynn.agents.dynaweb.mixture`). The actions were drawn from the mixture, not from
the LM alone, and no importance weight corrects for that (the memory is fixed and shares every update's
mass with the LM, so the LM's likelihood is the part of the policy a gradient can move). Each episode keeps
its own reply history (the chooser's prompt lists it) while the batch's rows shift as episodes end.

An episode ends when the policy answers (``send_msg_to_user`` / ``report_infeasible``) or at the
horizon: the envs are made with ``max_steps=horizon``, so a rollout cut there is still scored (by the
reward model in imagination, by the task's evaluators on the real site). Its reward is the last step's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Step", "Trajectory", "make_envs", "make_policy", "run_episodes"]


@dataclass
class Step:
    """One decision: the prompt's token ids, the reply's (EOS included) and the action text sent."""

    prompt_ids: list[int]
    completion_ids: list[int]
    action: str
    #: a ranked policy with learned λ: the chooser's mixture terms for the chosen candidate
    #: (:attr:`lynn.lm.web_candidates.Choice.mixture`), which :mod:`~lynn.agents.dynaweb.mixture` trains on
    mixture: dict[str, Any] | None = None


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
    starts: Sequence[str] = (),
    task_file: str = "",
    reward_source: str = "model",
) -> list[Any]:
    """``n`` unwrapped envs of ``env_id`` that end episodes at ``horizon``. World-model envs share one
    loaded world model (batched stepping); LiveWeb envs are one browser each. ``starts``: more recorded
    start pages, beside the world model's own; ``task_file``: the LiveWeb task file of their instances
    (their specs and checks)."""
    import gymnasium as gym

    import lynn  # noqa: F401  (registers the ids)

    env_id = env_id.removeprefix("lynn:")
    if env_id == "Lynn/WebWorldModel-v0":
        from lynn import zoo
        from lynn.envs.worldmodel.model import STARTS_FILE, stored

        if not reward_model and not self_assess:  # the world model's own reward.json, else the zoo's
            has = (Path(zoo.resolve(world_model)) / "reward.json").exists()
            reward_model = world_model if has else zoo.default_for(env_id, "reward_model")
        kw: dict[str, Any] = dict(
            reward_model=reward_model,
            split=split,
            max_steps=horizon,
            reward_mode=reward_mode,
            self_assess=self_assess,
            reward_source=reward_source,
        )
        if starts:
            own = stored(Path(zoo.resolve(world_model)) / STARTS_FILE)
            kw["starts"] = [*([str(own)] if own.exists() else []), *starts]
        if task_file:
            kw["tasks"] = task_file
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
    if starts or reward_source != "model":
        raise ValueError("starts and reward_source are options of the imagined env (Lynn/WebWorldModel-v0)")
    kw = {"tasks": task_file} if task_file else {}
    return [
        gym.make(env_id, split=split, max_steps=horizon, disable_env_checker=True, **kw).unwrapped
        for _ in range(n)
    ]


def make_policy(
    model: Any,
    tokenizer: Any,
    env_id: str,
    temperature: float,
    max_new_tokens: int,
    context: int,
    folder: str | None = None,
) -> Any:
    """An ``LMPolicy`` over ``model`` whose generations carry token ids (an :class:`IdGenerator`).

    ``folder``: the starting policy's model folder; when it holds ``lynn_web.json`` (a ranked-format policy,
    e.g. ``zoo:web-lm``) the policy chooses among the page's candidates with its chooser (and action memory)
    over ``model``'s live weights, sampling the candidate at ``temperature``.
    """
    from lynn.agents.llm.policy import LMPolicy
    from lynn.agents.llm.rollouts import IdGenerator

    ranked = folder is not None and (Path(folder) / "lynn_web.json").exists()
    return LMPolicy(
        env_id=env_id.removeprefix("lynn:"),
        generator=IdGenerator(model, tokenizer),
        model=folder if ranked else None,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        context=context,
    )


def _ids(g: Any, tokenizer: Any) -> tuple[list[int], list[int]]:
    """A generation's (prompt ids, completion ids): a chooser's decision re-encodes its prompt and reply."""
    choice = g.stats.get("choice")
    if choice is not None:
        return choice.token_ids(tokenizer)
    return list(g.stats["prompt_ids"]), list(g.stats["completion_ids"])


def _start(env: Any, tid: str, seed: int, branch: Any, horizon: int, imagined: bool, traj: Trajectory) -> Any:
    """Reset ``env`` for ``traj``'s episode, at the branch point when there is one; returns the first page."""
    if branch is None:
        if not imagined:
            env.max_steps = horizon
        o, _ = env.reset(seed=seed, options={"task_id": tid})
        return o
    traj.info["branch_steps"] = branch.steps
    if imagined:  # the recorded real page and prefix: nothing is imagined before the policy's first step
        o, _ = env.reset(seed=seed, options={"task_id": tid, "branch": branch.option()})
        return o
    env.max_steps = branch.steps + horizon  # the browser counts the replayed prefix too
    o, _ = env.reset(seed=seed, options={"task_id": tid})
    for n, action in enumerate(branch.actions(), 1):
        o, r, term, trunc, info = env.step(action)
        traj.info["branch_real_steps"] = n
        if info.get("error"):
            traj.info.setdefault("branch_errors", []).append(str(info["error"])[:200])
        if term or trunc:  # the replay ended the episode (it should not): scored as it stands, no policy step
            traj.reward, traj.success = float(r), bool(info.get("success", r > 0))
            traj.info["branch_ended"] = True
            break
    return o


def run_episodes(
    envs: Sequence[Any],
    policy: Any,
    episodes: Sequence[tuple[str, int] | tuple[str, int, Any]],
    horizon: int,
    seed: int,
    source: str = "imagined",
) -> list[Trajectory]:
    """Play ``episodes`` (``(task_id, reset_seed)``, or ``(task_id, reset_seed, branch)``) on ``envs`` in waves
    of ``len(envs)``, lockstep.

    Args:
        envs: unwrapped envs (from :func:`make_envs`).
        policy: an ``LMPolicy`` with an :class:`~lynn.agents.llm.rollouts.IdGenerator`.
        episodes: what to play, in order; the result is in the same order. A
            :class:`~lynn.agents.dynaweb.branches.Branch` (or None) starts the episode at an expert state: the
            world-model env starts from its recorded page; a real env replays its actions after the reset
            (``info["branch_real_steps"]`` counts them). The policy's own ``horizon`` steps follow either way.
        horizon: step cap (the envs end episodes there themselves; this is a guard).
        seed: sampling seed of the policy (each batched generation continues from it).
        source: label of the trajectories.
    """
    from lynn.envs.worldmodel.worldmodel_env import WebWorldModelEnv

    policy.reset(seed=seed)
    policy.calls = 0
    batched = all(isinstance(e, WebWorldModelEnv) for e in envs)
    chooser = getattr(policy, "chooser", None) is not None
    tok = policy.generator.tokenizer
    out: list[Trajectory] = []
    for w in range(0, len(episodes), len(envs)):
        wave = list(episodes[w : w + len(envs)])
        live = envs[: len(wave)]
        obs, trajs = [], []
        hist: list[list[str]] = [[] for _ in wave]
        done = [False] * len(wave)
        for i, (env, (tid, s, *rest)) in enumerate(zip(live, wave, strict=True)):
            branch = rest[0] if rest else None
            traj = Trajectory(tid, [], source=source, seed=int(s))
            o = _start(env, tid, int(s), branch, horizon, batched, traj)
            if branch is not None:
                hist[i] = list(branch.replies)
                done[i] = traj.info.get("branch_ended", False)
            obs.append(o)
            trajs.append(traj)
        t0 = time.perf_counter()
        for _ in range(horizon):
            idx = [i for i, d in enumerate(done) if not d]
            if not idx:
                break
            if chooser:  # rows shift as episodes end: hand each live episode its own reply history
                policy.replies = [hist[i] for i in idx]
            actions = policy.act_batch([obs[i] for i in idx], [{} for _ in idx])
            gens = policy.last_generations
            if chooser:
                for j, i in enumerate(idx):
                    hist[i] = policy.replies[j]
            if batched:
                results = WebWorldModelEnv.step_batch([live[i] for i in idx], actions)
            else:
                results = [live[i].step(a) for i, a in zip(idx, actions, strict=True)]
            for i, a, g, (o, r, term, trunc, info) in zip(idx, actions, gens, results, strict=True):
                choice = g.stats.get("choice")
                trajs[i].steps.append(Step(*_ids(g, tok), a, getattr(choice, "mixture", None)))
                trajs[i].errors += bool(info.get("error"))
                obs[i] = o
                if term or trunc:
                    done[i] = True
                    trajs[i].reward = float(r)
                    trajs[i].success = bool(info.get("success", False))
                    trajs[i].info.update(score=info.get("score"), terminated=bool(term))
        for t in trajs:
            t.info["wave_s"] = time.perf_counter() - t0
        out += trajs
    return out
