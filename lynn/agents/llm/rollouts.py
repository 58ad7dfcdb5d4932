"""Inference workers for GRPO: :class:`~lynn.agents.llm.policy.LMPolicy` against real EVMQuest episodes.

A :class:`RolloutWorker` is an Echo worker (``set_weights`` / ``rollout(seed)``, see
:mod:`lynn.wrappers.echo.actor_learner`). ``rollout(seed)`` makes one **GRPO group**: it resets a real
``Lynn/EVMQuest-v0`` env with ``seed`` (a train instance: seeds below
:data:`lynn.lm.data.EVM_TEST_SEEDS` are held out and refused), samples ``G`` replies to that prompt
with ``LMPolicy`` (the same rendering and parsing as ``lynn eval --agent lm``; temperature sampling
seeded by ``seed``), and scores each reply by executing it: reset to the same instance, ``step`` the
parsed script on the chain, reward = the env's reward for that first attempt (partial credit kept;
0 when the script fails and the episode is not over). The group carries the token ids the policy
wrote and **the policy version** the worker held, so the learner can recompute log-probs itself.

Atomic tasks are one decision each (one script), which is what a group compares; composites (several
scripts) are the second curriculum stage and are not run by this worker yet.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lynn.lm.backends import Generation, Generator, Prompt, encode_prompt, eos_token_ids

__all__ = ["IdGenerator", "RolloutWorker", "WorkerFactory"]


class IdGenerator(Generator):
    """Plain ``transformers`` sampling that also returns the prompt and completion token ids
    (``Generation.stats["prompt_ids"]`` / ``["completion_ids"]``; the completion keeps its EOS token).

    ``batch_size`` caps how many prompts one ``model.generate`` call decodes together (default: all of
    them): the same replies' distribution, another speed (a heterogeneous worker).
    """

    name = "transformers-ids"

    def __init__(self, model: Any, tokenizer: Any, batch_size: int | None = None) -> None:
        import torch

        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model, self.tokenizer, self.torch = model, tokenizer, torch
        self.batch_size = batch_size
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = eos_token_ids(tokenizer, model)
        self.context = int(getattr(model.config, "max_position_embeddings", 2048))

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def count_tokens(self, prompt: Prompt) -> int:
        return len(self.encode(prompt))

    def generate(
        self,
        prompts: Sequence[Prompt],
        max_new_tokens: int = 256,
        stop: Sequence[str] | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> list[Generation]:
        if temperature > 0 and seed is not None:
            self.torch.manual_seed(seed)  # once: the chunks continue one random stream
        ids = [self.encode(p) for p in prompts]
        step = self.batch_size or len(ids) or 1
        out: list[Generation] = []
        for i in range(0, len(ids), step):
            out += self._generate(ids[i : i + step], max_new_tokens, temperature)
        return out

    def _generate(self, ids: list[list[int]], max_new_tokens: int, temperature: float) -> list[Generation]:
        torch = self.torch
        n = max(len(b) for b in ids)
        input_ids = torch.tensor([[self.pad_id] * (n - len(b)) + b for b in ids])
        mask = torch.tensor([[0] * (n - len(b)) + [1] * len(b) for b in ids])
        kwargs: dict[str, Any] = {"do_sample": temperature > 0}
        if temperature > 0:
            kwargs.update(temperature=temperature, top_k=0, top_p=1.0)
        else:
            kwargs.update(temperature=None, top_k=None, top_p=None)
        self.model.eval()
        with torch.no_grad():
            seq = self.model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                eos_token_id=self.eos_ids or None,
                pad_token_id=self.pad_id,
                **kwargs,
            )
        out = []
        for p, row in zip(ids, seq, strict=True):
            toks = row[n:].tolist()
            finish = "length"
            for j, t in enumerate(toks):
                if t in self.eos_ids:
                    toks, finish = toks[: j + 1], "stop"
                    break
            text = self.tokenizer.decode([t for t in toks if t not in self.eos_ids], skip_special_tokens=True)
            out.append(Generation(text, len(p), len(toks), finish, {"prompt_ids": p, "completion_ids": toks}))
        return out


#: Prompt options of ``lynn train lm`` that ``LMPolicy`` must reproduce for a model (``lynn_train.json`` config).
PROMPT_OPTIONS = ("slots", "history")


def prompt_options(model: str | Path) -> dict[str, bool]:
    """The EVMQuest prompt options ``model`` was trained with (``{"slots": True, "history": True}``), read from its
    ``lynn_train.json``; GRPO must sample and score on that prompt, not on the plain one."""
    summary = Path(model) / "lynn_train.json"
    cfg = json.loads(summary.read_text()).get("config", {}) if summary.exists() else {}
    return {k: bool(cfg.get(k, False)) for k in PROMPT_OPTIONS}


class RolloutWorker:
    """One GRPO inference worker (an Echo worker).

    Args:
        model: the starting model folder (weights are replaced by every ``set_weights``).
        group_size: replies per prompt ``G``.
        temperature: sampling temperature (the learner scores log-probs at the same temperature).
        max_new_tokens: reply budget.
        tasks: EVMQuest atomic task ids to draw from (default: every atomic task).
        env_kwargs: extra ``EVMQuestEnv`` arguments.
        threads: torch threads in this worker.
        index: the worker's index (for logs).
        gen_batch: replies decoded per ``generate`` call (default: the whole group at once); a smaller
            batch is a slower worker with the same sampling distribution.
    """

    def __init__(
        self,
        model: str | Path,
        group_size: int = 4,
        temperature: float = 1.0,
        max_new_tokens: int = 384,
        tasks: Sequence[str] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        threads: int | None = 1,
        index: int = 0,
        gen_batch: int | None = None,
    ) -> None:
        import gymnasium as gym
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        import lynn  # noqa: F401  (registers the ids: made by id, so the Echo driver imports no env module)
        from lynn.agents.llm.policy import EVMQUEST, LMPolicy

        if threads:
            torch.set_num_threads(threads)
        if group_size < 2:
            raise ValueError("a GRPO group needs at least 2 replies (group_size >= 2)")
        self.model = AutoModelForCausalLM.from_pretrained(model)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.gen = IdGenerator(self.model, self.tokenizer, batch_size=gen_batch)
        self.policy = LMPolicy(
            env_id=EVMQUEST,
            generator=self.gen,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            context=self.gen.context,
            **prompt_options(model),  # the prompt the base was trained on (slots, Done: line)
        )
        self.env = gym.make(
            EVMQUEST,
            task=list(tasks) if tasks else None,
            split="atomic",
            disable_env_checker=True,
            **(env_kwargs or {}),
        ).unwrapped
        self.G = group_size
        self.version = 0
        self.index = index

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.model.load_state_dict(weights["state"])
        self.version = int(weights["version"])

    def rollout(self, seed: int) -> dict[str, Any]:
        from lynn.lm.data import EVM_TEST_SEEDS

        if seed < EVM_TEST_SEEDS:
            raise ValueError(
                f"seed {seed} is a held-out EVMQuest instance (< {EVM_TEST_SEEDS}); GRPO trains on train seeds only"
            )
        t0 = time.perf_counter()
        obs, info = self.env.reset(seed=seed)
        task_id = info.get("task_id")
        self.policy.reset(seed=seed)
        actions = self.policy.act_batch([obs] * self.G, [info] * self.G)
        gens = self.policy.last_generations
        gen_s = time.perf_counter() - t0
        comps = []
        for act, g in zip(actions, gens, strict=True):
            self.env.reset(seed=seed)  # the same instance (task and parameters follow the seed)
            _, reward, terminated, _, step_info = self.env.step(act)
            comps.append(
                {
                    "ids": g.stats["completion_ids"],
                    "reward": float(reward) if terminated else 0.0,
                    "success": bool(step_info.get("success", False)) if terminated else False,
                    "error": step_info.get("error"),
                    "finish": g.finish_reason,
                }
            )
        return {
            "version": self.version,
            "prompt_ids": gens[0].stats["prompt_ids"],
            "completions": comps,
            "task_id": task_id,
            "seed": seed,
            "worker": self.index,
            "gen_s": gen_s,
            "env_s": time.perf_counter() - t0 - gen_s,
            "tokens": sum(len(c["ids"]) for c in comps),
        }

    def close(self) -> None:
        self.env.close()


#: What may differ between workers of one run (heterogeneous workers). Not the temperature or the
#: group size: the learner scores every group at one temperature and one ``G``.
PER_WORKER_KEYS = frozenset({"max_new_tokens", "gen_batch", "threads"})


class WorkerFactory:
    """A picklable ``make_worker(i)`` for :class:`lynn.wrappers.echo.ActorLearner`.

    Args:
        model: the starting model folder.
        per_worker: heterogeneous workers: worker ``i`` gets ``per_worker[i % len(per_worker)]`` on
            top of ``kwargs`` (keys from :data:`PER_WORKER_KEYS`, e.g. ``{"gen_batch": 1}``).
        kwargs: :class:`RolloutWorker` arguments shared by every worker.
    """

    per_worker: tuple[dict[str, Any], ...] = ()

    def __init__(self, model: str, per_worker: Sequence[dict[str, Any]] | None = None, **kwargs: Any) -> None:
        for i, spec in enumerate(per_worker or ()):
            bad = sorted(set(spec) - PER_WORKER_KEYS)
            if bad:
                raise ValueError(
                    f"per-worker settings of worker {i}: {', '.join(bad)} cannot differ between workers "
                    f"(allowed: {', '.join(sorted(PER_WORKER_KEYS))})"
                )
        self.model, self.kwargs = str(model), kwargs
        if per_worker:
            self.per_worker = tuple(dict(p) for p in per_worker)

    def settings(self, index: int) -> dict[str, Any]:
        """Worker ``index``'s :class:`RolloutWorker` arguments."""
        extra = self.per_worker[index % len(self.per_worker)] if self.per_worker else {}
        return {**self.kwargs, **extra}

    def __call__(self, index: int) -> RolloutWorker:
        return RolloutWorker(self.model, index=index, **self.settings(index))
