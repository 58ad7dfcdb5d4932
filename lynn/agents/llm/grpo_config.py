"""The ``lynn train grpo`` run configuration: one dataclass beside its trainer (:mod:`.grpo_trainer`) and
its loss (:mod:`.grpo`), as TRL keeps ``grpo_config.py`` next to ``grpo_trainer.py``.

The command's flags are built from these fields (:mod:`lynn.config_flags`; help from each field's
metadata), never declared by hand. Importing this module is light (no torch): the CLI builds its parsers
from it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["BACKENDS", "BROADCASTS", "MODES", "GRPOTrainConfig"]

MODES = ("colocated", "pull", "push_pull")
BACKENDS = ("local", "ray")
BROADCASTS = ("chain", "direct")
LEVELS = ("token", "sequence")


def _f(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002  (argparse's own word)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class GRPOTrainConfig:
    """``lynn train grpo`` options (see :mod:`lynn.agents.llm.grpo_trainer` for the modes)."""

    model: str = field(metadata={"help": "the starting (BC) model folder"})
    out: str = field(metadata={"help": "run folder: checkpoints/, final/, reward.png, summary.json"})
    env: str = _f("Lynn/EVMQuest-v0", "the env (EVMQuest atomic tasks, train seeds)")
    mode: str = _f("push_pull", "colocated | pull | push_pull (Echo modes)", choices=MODES)
    staleness: int = _f(1, "S: largest staleness consumed (push_pull)")
    kappa: int = _f(1, "publish every kappa updates (push_pull)")
    workers: int = _f(2, "rollout worker processes (or Ray actors)")
    updates: int = _f(10, "optimiser updates of the whole run (a resumed run goes on to it)")
    groups_per_update: int = _f(4, "R: prompt groups per update", aliases=("--groups",))
    group_size: int = _f(4, "G: sampled replies per prompt")
    lr: float = _f(2e-5, "AdamW learning rate")
    beta: float = _f(0.0, "KL coefficient to the starting model")
    epsilon: float = _f(0.2, "clip: the ratio is kept in [1 - epsilon, 1 + epsilon]")
    importance_sampling_level: str = _f(
        "token", "token (GRPO) or sequence (GSPO) ratios", aliases=("--level",), choices=LEVELS
    )
    temperature: float = _f(1.0, "sampling temperature of rollouts")
    max_new_tokens: int = _f(384, "reply budget per rollout")
    tasks: list[str] | None = _f(None, "atomic task ids (default: every atomic task)")
    seed: int = _f(0, "seeds sampling and the train instances drawn")
    backend: str = _f("local", "worker processes (local) or Ray actors (ray)", choices=BACKENDS)
    broadcast: str = _f(
        "chain", "weights to workers: chain (workers relay) or direct (learner to each)", choices=BROADCASTS
    )
    checkpoint_every: int = _f(5, "save a checkpoint every N updates (and at the end)")
    resume: bool = _f(False, "continue from the newest checkpoint in --out")
    max_minutes: float | None = _f(
        None, "cap on the run's minutes (a run is --updates updates; a binding cap is reported)"
    )
    eval_heldout: bool = _f(
        False,
        "evaluate final/ on the held-out atomic instances (as lynn eval --split atomic)",
        aliases=("--eval",),
    )
    eval_workers: int = _f(1, "episode workers of that evaluation")
    progress: bool = _f(True, "show the progress bar")
    threads: int = _f(1, "torch threads per process")
    kill_worker_at: int | None = _f(None, "fault drill: kill worker 0 after this update")
    worker_overrides: list[dict[str, Any]] | None = _f(
        None,
        "heterogeneous workers: worker i gets entry i mod len on top of the shared settings "
        "(max_new_tokens, gen_batch, threads; see lynn.agents.llm.rollouts.WorkerFactory)",
    )
    extra: dict[str, Any] = _f({}, "free-form notes kept in the run's summary")
