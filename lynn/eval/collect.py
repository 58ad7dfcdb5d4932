"""``lynn collect``: run an agent over an env's tasks and record what it did, for training.

Two files in ``--out``:

- ``demos.jsonl`` — chat-format demonstrations (schema in :mod:`lynn.lm.data`), one per env step, for
  every env with a prompt renderer (:mod:`lynn.lm.prompts`): the prompt a model would see and the
  agent's action as the reply a model should give.
- ``transitions.jsonl`` — LiveWeb only: (goal, obs, action, next obs, reward, done) for world-model
  training.

Held-out instances never become training data by accident: the split of each record is the env's own
(EVMQuest: by seed, see :func:`lynn.lm.data.evm_instance_split`; LiveWeb: the task file's split), and
asking for ``--split train`` with held-out seeds is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lynn.eval.runner import EvalError, agent_seed, list_tasks
from lynn.records import TextObs, Transition

TEXT_KEYS = ("url", "title", "axtree", "open_pages", "last_action", "last_action_error")


def parse_seeds(text: str) -> list[int]:
    """``"100000:100010"`` (half-open range) or ``"1,5,9"`` -> list of ints."""
    try:
        if ":" in text:
            a, b = text.split(":", 1)
            return list(range(int(a), int(b)))
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise EvalError(f"--seeds expects A:B or a comma list of integers, got {text!r}") from exc


@dataclass
class CollectConfig:
    """What to collect (``lynn collect``'s flags are its fields).

    Attributes:
        env_id: ``Lynn/EVMQuest-v0`` or ``Lynn/LiveWeb-v0`` (any env with a renderer gets demos).
        agent: agent name (``oracle``, ``expert``, ``lm``, ``module:Class``); default the env's privileged
            agent (EVMQuest ``oracle``, LiveWeb ``expert``).
        out: output folder.
        split: the task list to cover: EVMQuest ``atomic``/``composite``/``all``; LiveWeb ``train``/``test``.
        seeds: reset seeds per task, ``A:B`` or ``a,b,c`` (EVMQuest train instances: ``>= 100000``; default
            ``EVM_TEST_SEEDS`` onwards, i.e. train).
        episodes: episodes per task when ``seeds`` is not given (seeds ``seed``, ``seed + 1``, ...).
        seed: first seed when ``seeds`` is not given.
        tasks: restrict to these task ids.
        limit: stop after this many tasks.
        max_steps: step cap per episode.
        agent_kwargs: an agent kwarg (``--agent-arg KEY=VALUE``, repeatable; e.g. ``epsilon=0.2``).
        env_kwargs: a ``gym.make`` kwarg (``--env-arg KEY=VALUE``, repeatable; the value as JSON).
        instance_split: EVMQuest: refuse seeds outside this instance split (``train`` refuses held-out seeds,
            ``test`` train seeds; ``any`` or ``None``: no check).
        progress: show a progress bar.
    """

    env_id: str = field(metadata={"positional": True})
    agent: str | None = None
    out: str = "data"
    split: str | None = None
    seeds: list[int] | None = field(default=None, metadata={"parse": parse_seeds})
    episodes: int = 1
    seed: int | None = None
    tasks: list[str] | None = None
    limit: int | None = None
    max_steps: int = 30
    agent_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"flag": "--agent-arg", "key_value": True}
    )
    env_kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"flag": "--env-arg", "key_value": True}
    )
    instance_split: str | None = field(default="train", metadata={"choices": ("train", "test", "any")})
    progress: bool = True


def _text_obs(obs: dict[str, Any]) -> TextObs:
    return {k: obs[k] for k in TEXT_KEYS if k in obs}


def _plan(cfg: CollectConfig) -> list[tuple[str, str, int]]:
    """(task_id, record split, seed) per episode."""
    from lynn.lm.data import EVM_TEST_SEEDS, evm_instance_split

    env_id = cfg.env_id.removeprefix("lynn:")
    evm = env_id == "Lynn/EVMQuest-v0"
    split = cfg.split or ("atomic" if evm else "train")
    known = list_tasks(cfg.env_id, split, **cfg.env_kwargs)
    by_id = {t["task_id"]: t for t in known}
    if cfg.tasks:
        unknown = [t for t in cfg.tasks if t not in by_id]
        if unknown:
            raise EvalError(f"unknown task ids in split {split!r}: {', '.join(unknown[:5])}")
        chosen = [by_id[t] for t in cfg.tasks]
    else:
        chosen = known
    if cfg.limit:
        chosen = chosen[: cfg.limit]
    if cfg.seeds is not None:
        seeds = list(cfg.seeds)
    else:
        first = cfg.seed if cfg.seed is not None else (EVM_TEST_SEEDS if evm else 0)
        seeds = list(range(first, first + cfg.episodes))
    out = []
    for t in chosen:
        for s in seeds:
            rec_split = evm_instance_split(s) if evm else (t.get("split") or split)
            if evm and cfg.instance_split not in (None, "any") and rec_split != cfg.instance_split:
                raise EvalError(
                    f"seed {s} is a {rec_split} instance of EVMQuest (held-out seeds are < {EVM_TEST_SEEDS}); "
                    f"use --seeds in the {cfg.instance_split} range or --instance-split"
                )
            if rec_split not in ("train", "test"):
                rec_split = "train"
            out.append((t["task_id"], rec_split, s))
    return out


def collect(cfg: CollectConfig) -> dict[str, Any]:
    """Run the episodes and append their records; returns counts and paths."""
    import gymnasium as gym

    import lynn  # noqa: F401  (registers the ids)
    from lynn.agents import make_agent
    from lynn.lm.data import Demo
    from lynn.lm.prompts import EVMQUEST, LIVEWEB, evm_reply, render

    env_id = cfg.env_id.removeprefix("lynn:")
    episodes = _plan(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    demos_path = out / "demos.jsonl"
    trans_path = out / "transitions.jsonl" if env_id == LIVEWEB else None
    can_render = env_id in (EVMQUEST, LIVEWEB)
    env = gym.make(cfg.env_id, **cfg.env_kwargs)
    agent_name = cfg.agent or ("expert" if env_id == LIVEWEB else "oracle")
    agent = make_agent(agent_name, env, **cfg.agent_kwargs)
    n_steps = n_success = n_demos = 0
    bar = _bar(cfg.progress, len(episodes), f"collect {env_id} · {agent_name}")
    try:
        with (
            demos_path.open("a", encoding="utf-8") as dfh,
            trans_path.open("a", encoding="utf-8") if trans_path else _Null() as tfh,
        ):
            for episode, (tid, rec_split, seed) in enumerate(episodes):
                obs, info = env.reset(seed=seed, options={"task_id": tid})
                agent.reset(seed=agent_seed(seed))
                steps: list[tuple[dict[str, Any], Any]] = []
                for step in range(cfg.max_steps):
                    action = agent.act(obs, info)
                    next_obs, reward, terminated, truncated, info = env.step(action)
                    truncated = truncated or step == cfg.max_steps - 1
                    done = bool(terminated or truncated)
                    steps.append((obs, action))
                    if trans_path is not None:
                        record: Transition = {
                            "env_id": env_id,
                            "task_id": tid,
                            "split": rec_split,
                            "seed": seed,
                            "episode": episode,
                            "step": step,
                            "goal": obs.get("goal", ""),
                            "obs": _text_obs(obs),
                            "action": action,
                            "next_obs": _text_obs(next_obs),
                            "reward": float(reward),
                            "done": done,
                            "terminated": bool(terminated),
                            "truncated": bool(truncated),
                            "error": info.get("error"),
                        }
                        tfh.write(json.dumps(record, ensure_ascii=False) + "\n")
                    n_steps += 1
                    obs = next_obs
                    if done:
                        break
                success = bool(info.get("success"))
                n_success += success
                if can_render:
                    for step, (o, a) in enumerate(steps):
                        reply = evm_reply(str(a)) if env_id == EVMQUEST else str(a)
                        msgs = render(env_id, o) + [{"role": "assistant", "content": reply}]
                        demo = Demo(msgs, env_id, tid, seed, rec_split, step, agent_name, success)
                        dfh.write(demo.to_json() + "\n")
                        n_demos += 1
                bar.advance(success)
    finally:
        bar.close()
        env.close()
    return {
        "episodes": len(episodes),
        "successes": n_success,
        "steps": n_steps,
        "demos": n_demos,
        "demos_path": str(demos_path) if can_render else None,
        "transitions_path": str(trans_path) if trans_path else None,
    }


class _Null:
    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def write(self, _: str) -> None:
        return None


class _bar:
    """A rich progress bar with the running success count (no-op when disabled)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.p = None
        self.done = self.ok = 0
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.p = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("success {task.fields[ok]}"),
                TimeRemainingColumn(),
                transient=False,
            )
            self.p.start()
            self.t = self.p.add_task(label, total=total, ok=0)

    def advance(self, success: bool) -> None:
        self.done += 1
        self.ok += bool(success)
        if self.p is not None:
            self.p.update(self.t, advance=1, ok=f"{self.ok}/{self.done}")

    def close(self) -> None:
        if self.p is not None:
            self.p.stop()
