"""RL on the mixture itself: the memory weight λ of a ranked-format policy as a learned parameter.

A ranked-format policy (``zoo:web-lm``) draws its candidate from ``p = λ·p_kNN + (1 − λ)·p_LM``
(:mod:`lynn.lm.web_memory`). With λ a constant (0.9) the decisions are the memory's, and a gradient on the LM
alone only re-ranks inside the form the memory chose (BENCHMARKS.md, DynaWeb, "Why nothing moves"). Here λ is
a parameter of the policy, one logit per state::

    λ(s) = σ(bias + level[k(s)] + template[t(s)])

- ``bias`` (shared by every state, initialised at ``logit(WebFormat.memory_weight)``) moves with every row;
- ``level[k]``: the kind of memory match, ``h`` (the goal template and the whole history seen in train
  episodes), ``l`` (last reply + page), ``p`` (page only). How far the memory's stored reply transfers
  depends on how specific the match was, in every template alike, so this is the page-kind term;
- ``template[t]``: one offset per goal template (:func:`lynn.lm.web_memory.template_of`; 80 in
  ``zoo:web-lm``'s memory). A template is the unit that held-out test instances share with train ones (each
  test instance is a new instance of a train template), so what is learned on train instances transfers,
  and the failing templates differ in whether the memory or the LM is right.
The offsets start at 0, so the untrained policy is exactly the starting one.

**The row's log-probability** is the mixture's, for the candidate the rollout drew::

    log π(a|s) = log( λ(s)·p_kNN(a) + (1 − λ(s))·p_LM(a)·exp(S(a) − S₀(a)) )

``p_kNN(a)``, ``p_LM(a)`` are the chooser's values at rollout time (:attr:`lynn.lm.web_candidates.Choice.mixture`),
``S(a)`` the LM's log-likelihood of the reply's tokens under the weights being trained and ``S₀(a)`` the same at
rollout time. So at the rollout's weights the row's probability is exactly the probability the policy gave the
candidate, its gradient moves λ by ``σ'·(p_kNN − p_LM)/π`` (towards the memory where the memory liked the
action more than the LM did, in the direction of the advantage), and the LM by its responsibility
``(1 − λ)·p_LM/π`` times ``∇S``. The LM's normaliser over the page's candidates is held at its rollout value
(re-scoring every candidate with gradients would cost one forward pass per candidate; the chosen reply's own
likelihood is the part the token-level rows train too). The row is one "sequence" of one decision, so GSPO's
sequence ratio is ``π/π_old`` of the decision; it goes through :func:`lynn.agents.llm.grpo.grpo_loss` as a
``(B, 1)`` log-prob.

**Exploration (rollouts only).** ``rollout_memory_scale = s < 1`` draws rollouts from the mixture with
``λ·s`` (the greedy validation and ``lynn eval`` use λ): more rollouts leave the memory's form, so fewer groups
are all-equal. The update is **importance-corrected**: each mixture row's advantage is multiplied by
``min(π_old(a)/μ(a), c)`` (``μ``: the probability the rollout drew the candidate with, temperature included;
``c = is_truncation``, V-trace's truncation), and the clipped ratio is ``π/π_old`` as on-policy. Why the
correction in the advantage and not ``μ`` as GSPO's ``π_old``: with ``π_old = μ`` the ratios start far from 1,
and the clip then cuts one direction of the gradient only (the rows the policy already prefers over ``μ``
with positive advantage, and those it already disfavours with negative advantage, get none), which would
push λ down whatever the rewards say. The correction is per decision while the advantage is the trajectory's
(the other decisions' ratios are left out, as token-level ratios leave out the other tokens').

Expert rows stay token rows on the LM: the memory is built from those very expert steps, so on them
``p_kNN`` is right by construction and would pull λ to 1 everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["MixtureParams", "mixture_logps"]


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


class MixtureParams:
    """The learned λ logits (see the module docstring) as torch parameters, and their export to the
    :class:`~lynn.lm.web_memory.MemoryWeights` a chooser reads.

    Args:
        weight: the starting λ (``WebFormat.memory_weight``), unless ``start`` is given.
        templates: the goal templates that get an offset (the memory's).
        start: saved weights to continue from (a ``lynn_mixture.json``).
    """

    def __init__(self, weight: float, templates: Sequence[str], start: Any = None) -> None:
        import torch

        from lynn.lm.web_memory import KEY_LEVELS

        self.torch = torch
        self.levels = list(KEY_LEVELS)
        names = set(templates) | (set(start.template) if start is not None else set())
        self.templates = sorted(names)
        self._t = {t: i for i, t in enumerate(self.templates)}
        b = start.bias if start is not None else _logit(weight)
        lv = [start.level.get(k, 0.0) if start is not None else 0.0 for k in self.levels]
        tv = [start.template.get(t, 0.0) if start is not None else 0.0 for t in self.templates]
        self.bias = torch.nn.Parameter(torch.tensor(float(b)))
        self.level = torch.nn.Parameter(torch.tensor(lv, dtype=torch.float32))
        self.template = torch.nn.Parameter(torch.tensor(tv, dtype=torch.float32))

    def parameters(self) -> list[Any]:
        return [self.bias, self.level, self.template]

    def index(self, goal: str, key: str) -> tuple[int, int]:
        """(level index, template index) of a state; ``-1`` where it has none (adds 0)."""
        from lynn.lm.web_candidates import web_slots
        from lynn.lm.web_memory import template_of

        kind = key.split("\t")[0] if key else ""
        li = self.levels.index(kind) if kind in self.levels else -1
        return li, self._t.get(template_of(goal, web_slots(goal)), -1)

    def logits(self, level_idx: Any, template_idx: Any) -> Any:
        """λ logits of states given by index tensors (``-1``: no offset)."""
        torch = self.torch
        zero = torch.zeros(1)
        lv = torch.cat([self.level, zero])  # index -1 -> the appended 0
        tv = torch.cat([self.template, zero])
        return self.bias + lv[level_idx] + tv[template_idx]

    def to_weights(self) -> Any:
        """The current values as :class:`~lynn.lm.web_memory.MemoryWeights` (what a chooser reads)."""
        from lynn.lm.web_memory import MemoryWeights

        with self.torch.no_grad():
            return MemoryWeights(
                float(self.bias),
                dict(zip(self.levels, self.level.tolist(), strict=True)),
                {t: v for t, v in zip(self.templates, self.template.tolist(), strict=True) if v != 0.0},
            )

    def save(self, folder: str | Path) -> Path:
        from lynn.lm.web_memory import MIXTURE_FILE

        path = Path(folder) / MIXTURE_FILE
        self.to_weights().save(path)
        return path

    def summary(self) -> dict[str, Any]:
        """λ of the shared bias, each key level, and the spread over templates (for the run's history)."""
        with self.torch.no_grad():
            b = float(self.bias)
            t = self.template
            lam = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
            return {
                "lambda_bias": lam(b),
                **{
                    f"lambda_{k}": lam(b + float(v))
                    for k, v in zip(self.levels, self.level.tolist(), strict=True)
                },
                "template_offset_min": float(t.min()) if len(t) else 0.0,
                "template_offset_max": float(t.max()) if len(t) else 0.0,
                "templates_moved": int((t != 0).sum()),
            }


def mixture_logps(
    params: MixtureParams,
    mixtures: Sequence[dict[str, Any]],
    lm_delta: Any,
) -> Any:
    """``(B,)`` log π of mixture rows: ``log(λ·p_kNN + (1 − λ)·p_LM·exp(lm_delta))`` (module docstring).

    Args:
        mixtures: each row's :attr:`~lynn.lm.web_candidates.Choice.mixture` (``p_knn`` None: the memory held
            nothing for the page, so π is the LM's alone there).
        lm_delta: ``(B,)`` ``S − S₀``, the LM's change of the reply's log-likelihood since the rollout.
    """
    torch = params.torch
    idx = [params.index(m["goal"], m["key"]) for m in mixtures]
    li = torch.tensor([i for i, _ in idx], dtype=torch.long)
    ti = torch.tensor([j for _, j in idx], dtype=torch.long)
    lam = torch.sigmoid(params.logits(li, ti))
    has = torch.tensor([m["p_knn"] is not None for m in mixtures], dtype=torch.float32)
    lam = lam * has
    knn = torch.tensor([m["p_knn"] or 0.0 for m in mixtures], dtype=torch.float32)
    plm = torch.tensor([m["p_lm"] for m in mixtures], dtype=torch.float32)
    p = lam * knn + (1 - lam) * plm * torch.exp(lm_delta)
    return torch.log(p.clamp(min=1e-30))
