"""GRPO / GSPO learner for a causal LM, decoupled from generation (Echo's training swarm).

TRL's ``GRPOTrainer`` owns its generate-then-train loop, so it cannot consume rollouts that rollout
workers stream in at their own pace. This module computes **the same loss** from batches of
version-tagged rollout groups (``tests/agents/llm/test_grpo.py`` checks it equal to TRL 1.16's
``GRPOTrainer._compute_loss`` and its advantages on the same batch, token and sequence level, with
and without KL):

- **advantages** (group-normalised): for the ``G`` completions of one prompt with rewards ``r``,
  ``A_i = (r_i − mean(r)) / (std(r) + 1e-4)`` (``scale_rewards="group"``, unbiased std; ``"batch"``
  takes the std over the whole batch, ``"none"`` does not divide), as TRL's ``sum_then_normalize``;
- **importance weights**: per token ``w_t = π_θ(y_t)/π_old(y_t)`` (``importance_sampling_level=
  "token"``, GRPO), or one per sequence ``w = exp(mean_t log(π_θ/π_old))`` (``"sequence"``, GSPO);
- **clipped objective**: ``−min(w·A, clip(w, 1−ε_low, 1+ε_high)·A)`` per token;
- **KL to a reference** (``beta > 0``): ``exp(ref−logp) − (ref−logp) − 1`` per token (the k3
  estimator), times the importance weight (``kl_bias_correction``, TRL's default
  ``use_bias_correction_kl``), added as ``beta·KL``;
- **aggregation** (``loss_type``, TRL's four token-level rules; a micro-batch is TRL's per-device
  batch, the batch is one generation batch accumulated over ``k`` micro-batches):
  ``"grpo"``: mean over each completion's tokens, then mean over completions (÷ k when
  accumulating); ``"bnpo"``: mean over each *micro-batch's* completion tokens, then ÷ k — so it
  depends on the micro-batch size, as TRL's does; ``"dr_grpo"``: token sum ÷ (completions ×
  ``max_completion_length``), a constant normaliser (Dr. GRPO); ``"dapo"``: token sum ÷ the
  completion tokens of the whole batch (TRL's default; with one micro-batch it equals ``bnpo``).

  Our default is ``"grpo"``, not TRL's ``"dapo"``: it weighs every completion equally whatever its
  length, which is the GRPO objective and what sequence-level (GSPO) ratios need (TRL itself warns
  that ``bnpo``/``dr_grpo``/``dapo`` do not optimise the per-sequence objective there), and it is
  what every GRPO figure in BENCHMARKS.md was measured with. Pass ``loss_type="dapo"`` for TRL's.

**Log-probs are recomputed by the learner.** ``π_θ`` is the learner's model with gradients;
``π_old`` is the policy *version that generated the rollout* (its tag): the learner keeps the
snapshots it published (``keep_versions`` of them, at least ``S + 1`` for staleness ``S``) and
recomputes ``π_old`` with that snapshot, so a stale rollout is corrected by exactly the ratio
between the current policy and the one that sampled it. A rollout of the current version uses
``π_old = π_θ.detach()`` (ratio 1, TRL's single-iteration shortcut). Workers never send
log-probs: nothing in the loss depends on the inference engine's numerics.

A rollout group (:class:`lynn.records.RolloutGroup`, what a worker returns, see
:mod:`lynn.agents.llm.rollouts`)::

    {"version": 3, "prompt_ids": [...], "completions": [{"ids": [...], "reward": 0.5}, ...],
     "task_id": "wbnb_deposit", "seed": 100123}

:meth:`GRPOLearner.validate` refuses a malformed group (wrong keys, token ids outside the
vocabulary, a non-finite reward, a version the learner never published) with a reason string, so
the actor-learner can log it and never feed it to the loss.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lynn.records import RolloutGroup

__all__ = [
    "GRPOConfig",
    "GRPOLearner",
    "Rollouts",
    "collate",
    "grpo_loss",
    "group_advantages",
    "per_token_logps",
]

LEVELS = ("token", "sequence")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
SCALES = ("group", "batch", "none")


@dataclass
class GRPOConfig:
    """Learner options (names follow TRL's ``GRPOConfig`` where they overlap).

    Defaults that differ from TRL 1.16's: ``lr`` (TRL 1e-6), ``loss_type`` (TRL ``"dapo"``; see the
    module docstring for why ours is ``"grpo"``), ``micro_batch`` (TRL's per-device batch, 8).

    Attributes:
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        max_grad_norm: gradient-norm clip (0 = none).
        epsilon: lower clip ``ε_low`` (the ratio is clipped to ``[1−ε_low, 1+ε_high]``).
        epsilon_high: upper clip (default: ``epsilon``; DAPO suggests 0.28).
        beta: KL coefficient to the reference policy (0 = no reference kept).
        kl_bias_correction: multiply the KL term by the importance weight (TRL's default).
        importance_sampling_level: ``token`` (GRPO) or ``sequence`` (GSPO).
        loss_type: ``grpo``, ``bnpo``, ``dr_grpo`` or ``dapo`` (see the module docstring).
        max_completion_length: ``dr_grpo``'s constant normaliser (TRL's ``max_completion_length``:
            the workers' token limit); required for ``dr_grpo``.
        scale_rewards: ``group``, ``batch`` or ``none`` (see the module docstring).
        temperature: log-probs are of ``logits / temperature`` (the sampling temperature).
        micro_batch: completions per forward/backward pass (gradients accumulate): TRL's
            per-device batch, the batch being accumulated over ``ceil(n / micro_batch)`` of them.
            The loss does not depend on it except with ``bnpo`` (per-micro-batch token mean, as TRL).
        keep_versions: policy snapshots kept to recompute ``π_old`` of stale rollouts.
        seed: torch seed at construction.
    """

    lr: float = 2e-5
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    epsilon: float = 0.2
    epsilon_high: float | None = None
    beta: float = 0.0
    kl_bias_correction: bool = True
    importance_sampling_level: str = "token"
    loss_type: str = "grpo"
    max_completion_length: int | None = None
    scale_rewards: str = "group"
    temperature: float = 1.0
    micro_batch: int = 16
    keep_versions: int = 9
    seed: int = 0

    def __post_init__(self) -> None:
        if self.importance_sampling_level not in LEVELS:
            raise ValueError(f"importance_sampling_level must be one of {LEVELS}")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}")
        if self.loss_type == "dr_grpo" and not (self.max_completion_length or 0) > 0:
            raise ValueError("loss_type='dr_grpo' needs max_completion_length > 0 (its constant normaliser)")
        if self.scale_rewards not in SCALES:
            raise ValueError(f"scale_rewards must be one of {SCALES}")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0 (log-probs of logits / temperature)")
        if self.keep_versions < 1 or self.micro_batch < 1:
            raise ValueError("keep_versions and micro_batch must be >= 1")


# --- the pure parts (tested against TRL) ---------------------------------------------------------
def group_advantages(rewards: Any, group_size: int, scale_rewards: str = "group", eps: float = 1e-4) -> Any:
    """Group-normalised advantages of a flat reward vector laid out group by group.

    Args:
        rewards: ``(n_groups * group_size,)`` tensor (or sequence) of rewards.
        group_size: completions per prompt ``G``.
        scale_rewards: ``group`` (divide by the group's unbiased std), ``batch`` (the batch's), ``none``.
        eps: added to the std (TRL's 1e-4).
    """
    import torch

    r = torch.as_tensor(rewards, dtype=torch.float32)
    if r.numel() % group_size:
        raise ValueError(f"{r.numel()} rewards do not split into groups of {group_size}")
    grouped = r.view(-1, group_size)
    mean = grouped.mean(dim=1).repeat_interleave(group_size)
    if scale_rewards == "group":
        std = grouped.std(dim=1) if group_size > 1 else torch.zeros(grouped.size(0))
        std = std.repeat_interleave(group_size)
    elif scale_rewards == "batch":
        std = r.std().expand_as(r) if r.numel() > 1 else torch.zeros_like(r)
    elif scale_rewards == "none":
        return r - mean
    else:
        raise ValueError(f"scale_rewards must be one of {SCALES}")
    return (r - mean) / (std + eps)


def per_token_logps(
    model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, temperature: float = 1.0
) -> Any:
    """Log-probabilities of the last ``logits_to_keep`` tokens of each row under ``model``.

    Row ``b``'s token ``j`` of the completion part is scored by the logits at the position before it
    (``logits / temperature``); the result is ``(B, logits_to_keep)``.
    """
    import torch

    out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    logits = out.logits[:, -logits_to_keep - 1 : -1, :].float() / temperature
    targets = input_ids[:, -logits_to_keep:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def grpo_loss(
    logps: Any,
    old_logps: Any,
    advantages: Any,
    mask: Any,
    *,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    importance_sampling_level: str = "token",
    beta: float = 0.0,
    ref_logps: Any = None,
    loss_type: str = "grpo",
    kl_bias_correction: bool = True,
    total: int | None = None,
    total_tokens: float | None = None,
    micro_batches: int | None = None,
    max_completion_length: int | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The clipped GRPO/GSPO loss of one (micro-)batch and its diagnostics.

    Args:
        logps, old_logps, ref_logps: ``(B, T)`` token log-probs (current with grad, behaviour, reference).
        advantages: ``(B,)``.
        mask: ``(B, T)``, 1 on completion tokens.
        kl_bias_correction: multiply the KL term by the importance weight (TRL's
            ``use_bias_correction_kl``, default on).
        total: completions in the whole batch when this is a micro-batch (``grpo``: the sum of
            per-completion means is divided by it; ``dr_grpo``: times ``max_completion_length``;
            default ``B``).
        total_tokens: completion tokens in the whole batch (``dapo``; default this micro-batch's).
        micro_batches: micro-batches the batch is accumulated over (``bnpo``: this micro-batch's
            token mean is divided by it, TRL's ``current_gradient_accumulation_steps``). Left
            ``None`` with ``total_tokens`` given, ``bnpo`` keeps its pre-issue-25 meaning for callers
            that have not moved (the whole batch's token mean, which is TRL's ``dapo``: pass
            ``loss_type="dapo"`` for that, or ``micro_batches`` for TRL's ``bnpo``).
        max_completion_length: ``dr_grpo``'s constant (TRL's ``max_completion_length``).

    Returns:
        The loss and a dict of summed counts (``clipped``, ``tokens``, ``kl_sum``, ``ratio_sum``).
    """
    import torch

    mask = mask.to(logps.dtype)
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    log_ratio = logps - old_logps
    if importance_sampling_level == "token":
        log_w = log_ratio
    elif importance_sampling_level == "sequence":
        log_w = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    else:
        raise ValueError(f"importance_sampling_level must be one of {LEVELS}")
    w = torch.exp(log_w)
    w_clipped = torch.clamp(w, 1 - epsilon_low, 1 + epsilon_high)
    per_token = -torch.min(w * adv, w_clipped * adv)
    kl = None
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta != 0 needs ref_logps")
        d = ref_logps - logps
        kl = torch.exp(d) - d - 1
        if kl_bias_correction:  # DeepSeek-V3.2's unbiased reverse-KL gradient (TRL's default)
            kl = kl * w
        per_token = per_token + beta * kl
    per_token = per_token.expand_as(mask) if per_token.shape != mask.shape else per_token
    n = total if total is not None else logps.size(0)
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).sum() / n
    elif loss_type == "bnpo" and micro_batches is None and total_tokens is not None:
        loss = (per_token * mask).sum() / max(float(total_tokens), 1.0)  # legacy: see micro_batches
    elif loss_type == "bnpo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0) / (micro_batches or 1)
    elif loss_type == "dr_grpo":
        if max_completion_length is None or max_completion_length <= 0:
            raise ValueError("loss_type='dr_grpo' needs max_completion_length > 0")
        loss = (per_token * mask).sum() / (n * max_completion_length)
    elif loss_type == "dapo":
        tokens = total_tokens if total_tokens is not None else float(mask.sum().clamp(min=1.0))
        loss = (per_token * mask).sum() / max(float(tokens), 1.0)
    else:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}")
    with torch.no_grad():
        clipped = ((w < 1 - epsilon_low) & (adv < 0)) | ((w > 1 + epsilon_high) & (adv > 0))
        clipped = clipped.expand_as(mask).to(mask.dtype) * mask
        info = {
            "clipped": float(clipped.sum()),
            "tokens": float(mask.sum()),
            "ratio_sum": float((w.expand_as(mask) * mask).sum()),
            "kl_sum": float((kl * mask).sum()) if kl is not None else 0.0,
        }
    return loss, info


@dataclass
class Rollouts:
    """A flat, padded batch built from rollout groups (TRL's layout: prompts left-padded,
    completions right-padded)."""

    prompt_ids: Any
    prompt_mask: Any
    completion_ids: Any
    completion_mask: Any
    rewards: Any
    versions: list[int]
    group_size: int

    def __len__(self) -> int:
        return int(self.prompt_ids.size(0))


def collate(groups: Sequence[RolloutGroup], pad_id: int) -> Rollouts:
    """Pad rollout groups into one batch (every group must have the same number of completions)."""
    import torch

    sizes = {len(g["completions"]) for g in groups}
    if len(sizes) != 1:
        raise ValueError(f"groups of different sizes {sorted(sizes)}: GRPO normalises within equal groups")
    g_size = sizes.pop()
    prompts: list[list[int]] = []
    comps: list[list[int]] = []
    rewards: list[float] = []
    versions: list[int] = []
    for g in groups:
        for completion in g["completions"]:
            prompts.append(list(g["prompt_ids"]))
            comps.append(list(completion["ids"]))
            rewards.append(float(completion["reward"]))
            versions.append(int(g["version"]))
    p_len = max(len(p) for p in prompts)
    c_len = max(1, max(len(c) for c in comps))
    b = len(prompts)
    p_ids = torch.full((b, p_len), pad_id, dtype=torch.long)
    p_mask = torch.zeros((b, p_len), dtype=torch.long)
    c_ids = torch.full((b, c_len), pad_id, dtype=torch.long)
    c_mask = torch.zeros((b, c_len), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompts, comps, strict=True)):
        if p:
            p_ids[i, p_len - len(p) :] = torch.tensor(p)
            p_mask[i, p_len - len(p) :] = 1
        if c:
            c_ids[i, : len(c)] = torch.tensor(c)
            c_mask[i, : len(c)] = 1
    return Rollouts(p_ids, p_mask, c_ids, c_mask, torch.tensor(rewards), versions, g_size)


# --- the learner ---------------------------------------------------------------------------------
class GRPOLearner:
    """An Echo learner (``get_weights`` / ``update``) doing one GRPO/GSPO optimiser step per batch.

    Args:
        model: a local HF causal-LM folder, or a loaded model (then pass ``tokenizer``).
        tokenizer: the tokenizer (default: loaded from ``model``).
        config: :class:`GRPOConfig`.
        ref_model: the KL reference (``beta > 0``; default: a frozen copy of the starting model).
        threads: torch intra-op threads.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        config: GRPOConfig | None = None,
        ref_model: Any = None,
        threads: int | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self.cfg = config or GRPOConfig()
        torch.manual_seed(self.cfg.seed)
        if isinstance(model, str | Path):
            self.model = AutoModelForCausalLM.from_pretrained(model)
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
        elif tokenizer is None:
            raise ValueError("pass the tokenizer with a model object")
        else:
            self.model = model
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.vocab = int(self.model.config.vocab_size)
        self.model.train()
        self.torch = torch
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay
        )
        self.version = 0
        self.snapshots: dict[int, dict[str, Any]] = {0: self._state()}
        self._old: Any = None  # a model object that takes snapshot weights to score old versions
        self.ref: Any = None
        if self.cfg.beta != 0.0:
            self.ref = ref_model if ref_model is not None else copy.deepcopy(self.model)
            self.ref.eval()
            for p in self.ref.parameters():
                p.requires_grad_(False)
        self.history: list[dict[str, Any]] = []
        self.refused = 0

    # Echo learner protocol
    def _state(self) -> dict[str, Any]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def get_weights(self) -> dict[str, Any]:
        """The current policy, tagged with its version (the number of updates done)."""
        if self.version not in self.snapshots:
            self.snapshots[self.version] = self._state()
        return {"version": self.version, "state": self.snapshots[self.version]}

    def validate(self, data: Any) -> str | None:
        """Why ``data`` is not a usable rollout group, or None when it is."""
        if not isinstance(data, dict):
            return f"a rollout group must be a dict, got {type(data).__name__}"
        missing = {"version", "prompt_ids", "completions"} - set(data)
        if missing:
            return f"rollout group lacks {sorted(missing)}"
        v = data["version"]
        if not isinstance(v, int) or v < 0 or v > self.version:
            return f"version {v!r} was never published (learner is at {self.version})"
        if v not in self.snapshots and v != self.version:
            return (
                f"version {v} is older than the {self.cfg.keep_versions} snapshots kept (raise keep_versions)"
            )
        comps = data["completions"]
        if not isinstance(comps, list) or len(comps) < 2:
            return "a group needs at least 2 completions"
        if not _ids_ok(data["prompt_ids"], self.vocab) or not data["prompt_ids"]:
            return "prompt_ids must be a non-empty list of token ids in the vocabulary"
        for i, c in enumerate(comps):
            if not isinstance(c, dict) or "ids" not in c or "reward" not in c:
                return f"completion {i} must be a dict with 'ids' and 'reward'"
            if not _ids_ok(c["ids"], self.vocab):
                return f"completion {i}: ids must be token ids in [0, {self.vocab})"
            r = c["reward"]
            if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r):
                return f"completion {i}: reward {r!r} is not a finite number"
        return None

    def _old_logps(self, rows: Any, input_ids: Any, attn: Any, keep: int, versions: list[int]) -> Any:
        """Behaviour log-probs recomputed with each row's version snapshot (no grad)."""
        torch = self.torch
        out = torch.zeros((len(rows), keep))
        by_version: dict[int, list[int]] = {}
        for j, r in enumerate(rows):
            by_version.setdefault(versions[r], []).append(j)
        for v, js in by_version.items():
            if v not in self.snapshots:
                raise ValueError(f"no snapshot of version {v} (kept: {sorted(self.snapshots)})")
            if self._old is None:
                self._old = copy.deepcopy(self.model)
                self._old.eval()
            self._old.load_state_dict(self.snapshots[v])
            idx = torch.tensor(js)
            with torch.no_grad():
                out[idx] = per_token_logps(self._old, input_ids[idx], attn[idx], keep, self.cfg.temperature)
        return out

    def loss_and_grad(self, batch: Sequence[RolloutGroup]) -> tuple[float, dict[str, float], Rollouts]:
        """Accumulate the gradient of the loss on ``batch`` into the model (no optimiser step).

        Returns:
            The loss, summed diagnostics (see :func:`grpo_loss`) and the padded batch.
        """
        torch = self.torch
        for g in batch:
            reason = self.validate(g)
            if reason:
                raise ValueError(f"malformed rollout group: {reason}")
        rb = collate(batch, self.pad_id)
        adv = group_advantages(rb.rewards, rb.group_size, self.cfg.scale_rewards)
        n = len(rb)
        total_tokens = float(rb.completion_mask.sum().clamp(min=1))
        eps_hi = self.cfg.epsilon_high if self.cfg.epsilon_high is not None else self.cfg.epsilon
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        sums = {"clipped": 0.0, "tokens": 0.0, "ratio_sum": 0.0, "kl_sum": 0.0}
        loss_total = 0.0
        order = list(range(n))
        for s in range(0, n, self.cfg.micro_batch):
            rows = order[s : s + self.cfg.micro_batch]
            idx = torch.tensor(rows)
            # Trim the micro-batch's padding: shorter rows need not pay for the longest one.
            pm, cm = rb.prompt_mask[idx], rb.completion_mask[idx]
            p_keep = int(pm.sum(1).max())
            c_keep = max(1, int(cm.sum(1).max()))
            p_ids, pm = rb.prompt_ids[idx][:, -p_keep:], pm[:, -p_keep:]
            c_ids, cm = rb.completion_ids[idx][:, :c_keep], cm[:, :c_keep]
            input_ids = torch.cat([p_ids, c_ids], dim=1)
            attn = torch.cat([pm, cm], dim=1)
            logps = per_token_logps(self.model, input_ids, attn, c_keep, self.cfg.temperature)
            if all(rb.versions[r] == self.version for r in rows):
                old = logps.detach()
            else:
                old = self._old_logps(rows, input_ids, attn, c_keep, rb.versions)
                cur = [j for j, r in enumerate(rows) if rb.versions[r] == self.version]
                if cur:
                    old[cur] = logps.detach()[cur]
            ref = None
            if self.ref is not None:
                with torch.no_grad():
                    ref = per_token_logps(self.ref, input_ids, attn, c_keep, self.cfg.temperature)
            loss, info = grpo_loss(
                logps,
                old,
                adv[idx],
                cm,
                epsilon_low=self.cfg.epsilon,
                epsilon_high=eps_hi,
                importance_sampling_level=self.cfg.importance_sampling_level,
                beta=self.cfg.beta,
                ref_logps=ref,
                loss_type=self.cfg.loss_type,
                kl_bias_correction=self.cfg.kl_bias_correction,
                total=n,
                total_tokens=total_tokens,
                micro_batches=-(-n // self.cfg.micro_batch),
                max_completion_length=self.cfg.max_completion_length,
            )
            loss.backward()
            loss_total += float(loss.detach())
            for k in sums:
                sums[k] += info[k]
        return loss_total, sums, rb

    def update(self, batch: Sequence[RolloutGroup]) -> dict[str, Any]:
        """One optimiser step on ``batch`` (rollout groups); returns metrics."""
        torch = self.torch
        t0 = time.perf_counter()
        loss_total, sums, rb = self.loss_and_grad(batch)
        n = len(rb)
        grad_norm = 0.0
        if self.cfg.max_grad_norm > 0:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm))
        self.opt.step()
        self.version += 1
        self.snapshots[self.version] = self._state()
        for old_v in sorted(self.snapshots)[: -self.cfg.keep_versions]:
            del self.snapshots[old_v]
        rewards = rb.rewards
        tok = max(sums["tokens"], 1.0)
        metrics: dict[str, Any] = {
            "loss": loss_total,
            "reward_mean": float(rewards.mean()),
            "reward_std": float(rewards.std()) if n > 1 else 0.0,
            "success_frac": float((rewards >= 1.0).float().mean()),
            "frac_zero_std_groups": float((rewards.view(-1, rb.group_size).std(dim=1) < 1e-8).float().mean()),
            "clip_frac": sums["clipped"] / tok,
            "ratio_mean": sums["ratio_sum"] / tok,
            "kl": sums["kl_sum"] / tok,
            "grad_norm": grad_norm,
            "completion_tokens": sums["tokens"],
            "completions": float(n),
            "train_s": time.perf_counter() - t0,
            "version_lag_max": float(max(self.version - 1 - v for v in rb.versions)),
        }
        # How long the workers took to make these groups (capacity model: mu_i = 1 / rollout_s).
        durations = [float(g.get("gen_s", 0.0)) + float(g.get("env_s", 0.0)) for g in batch]
        if any(durations):
            metrics["rollout_s_mean"] = sum(durations) / len(durations)
            # Per worker (heterogeneous workers: each one's mu_i), when the groups name their worker.
            by_worker: dict[str, list[float]] = {}
            for g, d in zip(batch, durations, strict=True):
                if g.get("worker") is not None:
                    by_worker.setdefault(str(g["worker"]), []).append(d)
            if by_worker:
                metrics["rollout_s_by_worker"] = {w: sum(v) / len(v) for w, v in sorted(by_worker.items())}
        self.history.append({"version": self.version, **metrics})
        return metrics

    # checkpoints
    def save(self, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Write the model (``save_pretrained``), tokenizer, optimiser and learner state to ``path``."""
        torch = self.torch
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        torch.save({"opt": self.opt.state_dict(), "version": self.version}, out / "grpo_state.pt")
        meta = {"version": self.version, "config": asdict(self.cfg), "history": self.history, **(extra or {})}
        (out / "grpo.json").write_text(json.dumps(meta, indent=1))
        return out

    def load_state(self, path: str | Path) -> dict[str, Any]:
        """Restore optimiser, version and history saved by :meth:`save` (the model is loaded by the caller)."""
        torch = self.torch
        p = Path(path)
        st = torch.load(p / "grpo_state.pt", weights_only=False)
        self.opt.load_state_dict(st["opt"])
        self.version = int(st["version"])
        self.snapshots = {self.version: self._state()}
        meta = json.loads((p / "grpo.json").read_text())
        self.history = list(meta.get("history", []))
        return meta


def _ids_ok(ids: Any, vocab: int) -> bool:
    return isinstance(ids, list | tuple) and all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in ids
    )
