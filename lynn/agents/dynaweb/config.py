"""The DynaWeb run configuration: one dataclass, CleanRL style; ``lynn train dynaweb``'s flags are built
from its fields by :mod:`lynn.config_flags` (help from each field's metadata), never declared by hand.

Importing this module is light (no torch): the CLI builds its parsers from it at start-up.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from lynn.config_flags import add_config_flags, config_from_args

__all__ = ["DynaWebConfig", "add_arguments", "from_args"]

IMAGINED = "Lynn/WebWorldModel-v0"
REAL = "Lynn/LiveWeb-v0"
LEVELS = ("sequence", "token")
REWARD_MODES = ("binary", "prob")
REWARD_SOURCES = ("model", "checks")  # lynn.envs.worldmodel.worldmodel_env's (not imported: no gym here)


def _f(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002  (argparse's own word)
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class DynaWebConfig:
    """Every option of a DynaWeb run (see :mod:`lynn.agents.dynaweb`); the defaults are the paper's where
    it gives one (G = 8, horizon 5, GSPO with ε = 0.2, half of each batch expert)."""

    policy: str = _f(
        "", "the starting policy: a BC-trained LiveWeb LM folder (`lynn train lm`)", required=True
    )
    out: str = _f("", "run folder: checkpoints/, final/, curve.png, summary.json", required=True)
    world_model: str = _f("", "a `lynn train world-model` folder (imagination; also its starts.jsonl)")
    reward_model: str = _f(
        "", "a folder/reward.json from `lynn train reward-model` (default: world_model's, else the zoo's)"
    )
    env: str = _f(IMAGINED, f"where rollouts run: {IMAGINED} (DynaWeb) or {REAL} (the live-RL baseline)")
    expert_data: str = _f("", "`lynn collect` demos of the LiveWeb expert on train instances (interleaving)")
    tasks: list[str] = _f([], "train task ids to sample (default: every train task with a start page)")
    starts: list[str] = _f(
        [],
        "more train instances to imagine: their recorded start pages (`lynn collect Lynn/LiveWeb-v0 "
        "--env-arg tasks=FILE --max-steps 1`), beside the world model's own; goals need no expert episode",
    )
    task_file: str = _f(
        "", "the LiveWeb task file of those instances (a salted draw: their specs and checks)"
    )
    reward_source: str = _f(
        "model",
        "model (the reward model scores every rollout, as DynaWeb) or checks (instances whose checks read "
        "only the answer or the final URL are scored by them: string_match, url_match; the rest by the model)",
    )
    updates: int = _f(20, "optimiser updates (fixed steps, not minutes)")
    groups_per_update: int = _f(2, "R: tasks per update, one group of G rollouts each")
    group_size: int = _f(8, "G: rollouts per task (group-normalised advantages)")
    horizon: int = _f(5, "imagined (or real) steps per rollout; the reward model scores the last page")
    expert_ratio: float = _f(
        0.5, "fraction of each batch's trajectories that are real expert ones, in [0, 1)"
    )
    expert_advantage: float = _f(1.0, "the advantage every expert step enters the loss with")
    expert_only: bool = _f(
        False,
        "ablation: no rollouts; each update trains on the expert trajectories this config's batch would "
        "interleave (the same draws), i.e. BC continued with the same optimiser, updates and expert rows",
    )
    branch_ratio: float = _f(
        0.0,
        "fraction of groups that start at a state of a real expert train episode of their task (MBPO-style "
        "branching, lynn.agents.dynaweb.branches; 0: every rollout starts at the task's start page, as the paper)",
    )
    reward_mode: str = _f("binary", "reward model output: binary (P >= threshold) or prob (P)")
    self_assess: bool = _f(
        False, "reward by the world model LM's self-assessment instead of the reward model"
    )
    importance_sampling_level: str = _f("sequence", "sequence (GSPO) or token (GRPO)")
    epsilon: float = _f(0.2, "clip: the ratio is kept in [1 - epsilon, 1 + epsilon_high]")
    epsilon_high: float = _f(-1.0, "upper clip (negative: epsilon)")
    beta: float = _f(0.0, "KL coefficient to the starting policy (0: no reference model kept)")
    loss_type: str = _f("grpo", "grpo (per-reply token mean, then mean) or bnpo (batch token mean)")
    iterations: int = _f(1, "gradient steps per batch (TRL's num_iterations; > 1 makes the clip bind)")
    lr: float = _f(1e-4, "AdamW learning rate")
    max_grad_norm: float = _f(1.0, "gradient-norm clip (0: none)")
    micro_batch: int = _f(8, "rows (one step each) per forward/backward pass; same loss")
    temperature: float = _f(1.0, "sampling temperature of rollouts (log-probs are scored at it)")
    answer_temperature: float = _f(
        0.0,
        "ranked policies, rollouts only: once a rollout's drawn step is an answer, redraw which answer among the "
        "page's answer candidates at this temperature (0: off); with --reward-source checks the dream's check says "
        "which literal is right. Not importance-corrected: an exploration device",
    )
    max_new_tokens: int = _f(96, "reply budget per step (the page is cut to context - this, as in BC)")
    learn_memory_weight: bool = _f(
        False,
        "ranked policies: learn the memory weight λ (shared bias + per memory-key kind + per goal template) "
        "by RL on the mixture's own log-probability (lynn.agents.dynaweb.mixture)",
    )
    memory_weight_lr: float = _f(0.1, "Adam learning rate of the λ logits (learn_memory_weight)")
    rollout_memory_scale: float = _f(
        1.0,
        "rollouts only: draw with λ·s instead of λ (exploration, importance-corrected; needs learn_memory_weight)",
    )
    is_truncation: float = _f(2.0, "cap c of the importance weight min(π/μ, c) of explored decisions")
    seed: int = _f(0, "seeds task draws, expert draws and sampling (update u draws from (seed, u))")
    checkpoint_every: int = _f(5, "save a checkpoint every N updates (and at the end)")
    eval_every: int = _f(5, "K: real success on the validation train instances every K updates (0: never)")
    eval_tasks: int = _f(8, "validation subset: this many train instances, evenly spread")
    eval_max_steps: int = _f(10, "real steps per validation episode")
    real_envs: int = _f(2, f"{REAL} envs (browsers) stepped in lockstep for live rollouts and validation")
    resume: bool = _f(False, "continue from the newest checkpoint in --out")
    threads: int = _f(1, "torch threads")
    progress: bool = _f(True, "show the progress bar")

    def __post_init__(self) -> None:
        if not self.policy or not self.out:
            raise ValueError("DynaWebConfig needs policy=BC_MODEL_DIR and out=RUN_DIR")
        if self.env.removeprefix("lynn:") not in (IMAGINED, REAL):
            raise ValueError(f"env must be {IMAGINED} or {REAL}, got {self.env!r}")
        if self.env.removeprefix("lynn:") == IMAGINED and not self.world_model:
            raise ValueError(f"{IMAGINED} needs world_model=DIR (`lynn train world-model ... --reward`)")
        if not 0.0 <= self.expert_ratio < 1.0:
            raise ValueError("expert_ratio must be in [0, 1): the rest of the batch is on-policy rollouts")
        if self.expert_ratio > 0 and not self.expert_data:
            raise ValueError(
                "expert_ratio > 0 needs expert_data=DIR (`lynn collect Lynn/LiveWeb-v0 --split train`)"
            )
        if self.expert_only and self.expert_ratio <= 0:
            raise ValueError(
                "expert_only needs expert_ratio > 0 (it trains on the interleaved expert rows alone)"
            )
        if not 0.0 <= self.branch_ratio <= 1.0:
            raise ValueError("branch_ratio must be in [0, 1]")
        if self.branch_ratio > 0 and not self.expert_data:
            raise ValueError("branch_ratio > 0 needs expert_data=DIR (the expert episodes it branches from)")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (advantages are normalised within a group)")
        if self.importance_sampling_level not in LEVELS:
            raise ValueError(f"importance_sampling_level must be one of {LEVELS}")
        if self.reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}")
        if self.reward_source not in REWARD_SOURCES:
            raise ValueError(f"reward_source must be one of {REWARD_SOURCES}")
        if (self.starts or self.reward_source != "model") and not self.imagined:
            raise ValueError(f"starts and reward_source are options of imagination ({IMAGINED})")
        if self.rollout_memory_scale != 1.0 and not self.learn_memory_weight:
            raise ValueError(
                "rollout_memory_scale != 1 needs learn_memory_weight (its importance correction)"
            )
        if self.rollout_memory_scale < 0:
            raise ValueError("rollout_memory_scale must be >= 0 (λ·s is capped at 1)")
        if self.learn_memory_weight and self.beta:
            raise ValueError("learn_memory_weight with beta > 0 is not supported (no reference mixture kept)")
        if self.answer_temperature < 0:
            raise ValueError("answer_temperature must be >= 0 (0: off)")
        if self.answer_temperature and self.learn_memory_weight:
            raise ValueError(
                "answer_temperature with learn_memory_weight is not supported (its draws are uncorrected)"
            )
        if self.is_truncation <= 0:
            raise ValueError("is_truncation must be > 0")
        for name in ("updates", "groups_per_update", "horizon", "iterations", "micro_batch", "real_envs"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1")

    @property
    def imagined(self) -> bool:
        """Whether rollouts run in the world model (else on the real browser)."""
        return self.env.removeprefix("lynn:") == IMAGINED

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per :class:`DynaWebConfig` field (``--field-name``), help from its metadata."""
    add_config_flags(parser, DynaWebConfig)


def from_args(args: argparse.Namespace) -> DynaWebConfig:
    """The config of parsed ``lynn train dynaweb`` flags."""
    return config_from_args(DynaWebConfig, args)
