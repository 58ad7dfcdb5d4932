"""Batched speculative decoding on transformers causal LMs: strict, MARS and typical verification.

What is ours, and why no library does it:

- **Batched, ragged acceptance.** Hugging Face's assisted generation (``generate(assistant_model=…)``,
  ``prompt_lookup_num_tokens=…``) runs at batch size 1 only, and its defaults waste work on CPU (20
  assistant tokens on a constant schedule, cut by a confidence threshold; FIELD-NOTES measured 1.12x over greedy at 2.9
  tokens per target forward). A policy acting for a whole vector env needs several prompts at once,
  each row accepting a different number of draft tokens per step.
- **Verification rules.** No library ships MARS (margin-aware verification, arXiv 2601.15498) on
  transformers models; its reference code lives inside EAGLE-3's tree decoder and relaxes only the
  sampling path. Medusa's typical acceptance lives inside Medusa's heads. vLLM has speculative
  decoding with rejection sampling, but it is a GPU engine (not installable on CPU here).

Design:

- :class:`RaggedCache` — one :class:`~transformers.DynamicCache` for the whole batch. No row is
  padded to line up with the others: every row's tokens are appended at the end of the cache, and a 2-D
  attention mask marks each cache column valid or a hole, with explicit per-row position ids. A
  rejection turns the row's rejected columns into holes (and crops the columns that are holes for
  every row with ``DynamicCache.crop``, which takes a negative count in transformers 5.x); when
  holes pass half of the cache it is compacted with one gather. Why not per-row caches: one batched
  forward per step is what makes batch 8 cheaper than eight batch-1 runs. Why not left padding with
  re-alignment: re-aligning shifts every row's whole cache each step, a hole mask costs nothing.
  Padding is always at the *end* of a fed block, so no query is ever fully masked (no NaN keys or
  values, which a later 0-weight attention would still turn into NaN).
- :class:`Drafter` — ``propose(contexts, counts, …)`` sees each row's full context; a drafter with
  a cache (:class:`DraftModelDrafter`) rolls it back to the longest common prefix itself, so the
  loop never has to tell it what was accepted. :class:`PromptLookupDrafter` copies the continuation
  of the latest earlier occurrence of the context's last n-gram (a point-mass proposal).
- :func:`speculative_generate` — prefill, then per step: draft up to γ tokens per row, verify all
  rows in ONE target forward, accept per row by the rule, roll both caches back, adapt γ per row
  (+2 after full acceptance, −1 after a rejection, within ``[gamma_min, gamma_max]``; a draft
  model may also stop early where it is unsure, ``DraftModelDrafter(min_confidence=…)``).
  :func:`greedy_generate` is the target-only baseline on the same cache code.

Rules (see :class:`SpecConfig`): ``strict`` is lossless — greedy output equals target-only greedy
token for token, and sampling uses Leviathan/Chen rejection sampling (accept with min(1, p/q), else
resample from norm(max(0, p − q)); a prompt-lookup proposal is a point mass, so q = 1 at the
proposed token). ``mars`` and ``typical`` are lossy by design and are the references' rules:

- ``mars`` is ``5SSjw/MARS``'s ``evaluate_posterior``: greedy decoding is strict matching; when
  sampling, the target's top-2 *processed* logits (tempered, top-p filtered) give ``r = z2 / z1``; if
  ``r > θ`` a draft token in that top-2 is accepted outright and one outside it is rejected, else
  the strict test runs. One deliberate difference: on a strict rejection we resample from
  ``norm(max(0, p − q))`` (lossless), where the reference zeroes only the rejected token's mass
  (EAGLE-style), which is not. A second one: where the second-best processed logit is −inf (the
  nucleus or a constraint keeps one token) there is no relaxation (the reference's ``−inf / z1`` is
  +inf for z1 < 0 and would accept a filtered token).
- ``typical`` is ``FasterDecoding/Medusa``'s ``evaluate_posterior`` with its default ``fast=True``:
  greedy decoding is strict matching; when sampling a draft token x is kept while
  ``p_T(x) > min(ε, δ·exp(−H(p_T)))`` and the correction or bonus token is the target's argmax.

Our variants have their own names: ``mars-greedy`` and ``typical-greedy`` are the same rules when
sampling and also relax in greedy decoding (MARS's top-2 test on the raw logits; the typical test
on the T = 1 distribution, the argmax always kept); the references have no such mode.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

__all__ = [
    "DraftModelDrafter",
    "Drafter",
    "Proposal",
    "PromptLookupDrafter",
    "RaggedCache",
    "SpecConfig",
    "SpecStats",
    "greedy_generate",
    "speculative_generate",
]

RULES = ("strict", "mars", "typical", "mars-greedy", "typical-greedy")
MARS_RATIOS = ("auto", "logit", "prob")


@dataclass
class SpecConfig:
    """Verification rule and draft-length schedule.

    Attributes:
        rule: ``"strict"`` (lossless), ``"mars"`` (the reference's margin-aware rule: relaxes only
            when sampling), ``"typical"`` (Medusa's typical acceptance, ``fast=True``: only when
            sampling, argmax correction), or our variants ``"mars-greedy"`` / ``"typical-greedy"``
            (the same when sampling, and relaxed in greedy decoding too); see the module docstring.
        gamma: Initial number of draft tokens per row and step.
        adaptive: Grow γ by 2 after a step where every draft token was accepted, shrink it by 1
            after a rejection (per row, within ``[gamma_min, gamma_max]``); else γ stays fixed.
        gamma_min: Lower bound of the adaptive γ.
        gamma_max: Upper bound of the adaptive γ.
        theta: MARS threshold: relax where the target's top-2 ratio ``r > theta``. With the
            ``"auto"`` and ``"prob"`` ratios ``r ≤ 1``, so any ``theta >= 1`` makes MARS exactly
            strict (with ``"logit"`` only when all top logits are positive).
        mars_ratio: How MARS measures the margin between the top-1 and top-2 logits z1 ≥ z2 (the
            processed logits when sampling). ``"logit"`` is the reference's ``z2 / (z1 + 1e-10)``;
            it is only meaningful for z1 > 0: when z1 < 0 the ratio is ≥ 1 (the reference then
            relaxes everywhere, a quirk), and it changes when a constant is added to all logits
            although the distribution does not. ``"prob"`` is ``p2 / p1 = exp(z2 − z1)``: in
            [0, 1], 1 exactly at a tie, shift-invariant, so sound for any logits — but θ = 0.9
            then means a logit margin below 0.105, stricter than the paper's setting.
            ``"auto"`` (default) is the reference's ``z2 / z1`` where it is sound (z1 > 0) and
            ``p2 / p1`` where it is not (z1 ≤ 0), so θ keeps the paper's meaning on typical LLM
            logits and never relaxes everywhere on negative ones; pass ``"logit"`` for the
            reference's formula everywhere. In every mode a −inf second logit means no relaxation.
        typical_epsilon: Medusa's ε (``posterior_threshold``).
        typical_delta: Medusa's δ (``posterior_alpha``, √ε by default there).
    """

    rule: str = "strict"
    gamma: int = 5
    adaptive: bool = True
    gamma_min: int = 1
    gamma_max: int = 16
    theta: float = 0.9
    typical_epsilon: float = 0.09
    typical_delta: float = 0.3
    mars_ratio: str = "auto"

    def __post_init__(self) -> None:
        if self.rule not in _RULE_FUNCS:
            raise ValueError(f"SpecConfig.rule={self.rule!r}: pass one of {sorted(_RULE_FUNCS)}")
        if self.mars_ratio not in MARS_RATIOS:
            raise ValueError(f"SpecConfig.mars_ratio={self.mars_ratio!r}: pass one of {MARS_RATIOS}")
        if not 1 <= self.gamma_min <= self.gamma <= self.gamma_max:
            raise ValueError(
                f"SpecConfig needs 1 <= gamma_min <= gamma <= gamma_max, got "
                f"gamma_min={self.gamma_min}, gamma={self.gamma}, gamma_max={self.gamma_max}"
            )


@dataclass
class SpecStats:
    """Counters of one generation call.

    Attributes:
        target_forwards: Target forward calls (a batched forward counts once), prefill included.
        draft_forwards: Draft-model forward calls (0 for prompt lookup).
        new_tokens: Tokens returned, summed over rows.
        accepted_lengths: Draft tokens accepted per row and verification step (the bonus or
            correction token from the target is not counted; a step where the drafter proposed
            nothing, e.g. no prompt-lookup match, counts as 0).
        mars_positions: ``(row, position)`` where MARS accepted the target's top-2 token although
            it was not the argmax; ``position`` indexes the row's new tokens (0 = first).
        wall_s: Seconds spent in the call.
    """

    target_forwards: int = 0
    draft_forwards: int = 0
    new_tokens: int = 0
    accepted_lengths: list[int] = field(default_factory=list)
    mars_positions: list[tuple[int, int]] = field(default_factory=list)
    wall_s: float = 0.0

    def mean_accepted(self) -> float:
        """Mean draft tokens accepted per verification step (0.0 when there was none)."""
        return sum(self.accepted_lengths) / len(self.accepted_lengths) if self.accepted_lengths else 0.0

    def forwards_per_token(self) -> float:
        """Target forwards per new token (batched forwards count once, tokens of all rows count)."""
        return self.target_forwards / self.new_tokens if self.new_tokens else 0.0


# --------------------------------------------------------------------------------------------
# The ragged batched KV cache


def _inference(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` under ``torch.inference_mode`` (cache tensors may only be edited there)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.inference_mode():
            return fn(*args, **kwargs)

    return wrapper


class RaggedCache:
    """A batched KV cache where each row holds a different number of tokens.

    Columns of the underlying :class:`~transformers.DynamicCache` are shared by all rows; a
    boolean mask says which columns are valid for which row, and each row keeps its own position
    counter, so holes left by rejected tokens are invisible to attention and to RoPE.

    Args:
        model: The causal LM whose cache this is (any transformers model that takes
            ``attention_mask``, ``position_ids`` and ``cache``/``past_key_values``).
        batch_size: Number of rows.
        pad_token_id: Filler id for the tail of ragged blocks (never attended to by a valid token).
    """

    def __init__(self, model: PreTrainedModel, batch_size: int, pad_token_id: int = 0) -> None:
        import torch
        from transformers import DynamicCache

        self.model = model
        self.device = model.device
        self.pad_token_id = pad_token_id
        self.cache = DynamicCache(config=model.config)
        self.mask = torch.zeros((batch_size, 0), dtype=torch.bool, device=self.device)
        self.cols: list[list[int]] = [[] for _ in range(batch_size)]  # cache column of each token
        self.tokens: list[list[int]] = [[] for _ in range(batch_size)]  # tokens whose K/V are cached
        self.forwards = 0

    @property
    def width(self) -> int:
        """Number of cache columns (valid ones and holes)."""
        return self.mask.shape[1]

    @_inference
    def feed(self, new: Sequence[Sequence[int]], *, logits: str = "last") -> torch.Tensor:
        """Append ``new[i]`` to row i in one forward and return logits.

        Args:
            new: Per row, the tokens to append (ragged; every row at least one token).
            logits: ``"last"``: a ``(B, V)`` tensor, the logits after each row's last new token
                (the LM head runs on at most B positions, not on whole prompts); ``"all"``: a
                ``(B, T, V)`` tensor, T = the longest block, row i valid on ``[:len(new[i])]``.

        Returns:
            Logits as described (float32, or float64 for a float64 model).
        """
        import torch

        lens = [len(x) for x in new]
        if len(new) != len(self.tokens) or min(lens, default=0) < 1:
            raise ValueError(
                f"feed needs one non-empty token list per row ({len(self.tokens)} rows), got {lens}"
            )
        T, B, L = max(lens), len(new), self.width
        ids = torch.tensor([list(t) + [self.pad_token_id] * (T - len(t)) for t in new], dtype=torch.long)
        new_mask = torch.arange(T)[None, :] < torch.tensor(lens)[:, None]
        # Filler positions continue the row's count; they are masked, so their value is moot.
        pos = torch.tensor([len(t) for t in self.tokens])[:, None] + torch.arange(T)[None, :]
        ids, new_mask, pos = ids.to(self.device), new_mask.to(self.device), pos.to(self.device)
        mask = torch.cat([self.mask, new_mask], dim=1)
        kwargs: dict[str, Any] = {}
        if logits == "last":
            keep = sorted({n - 1 for n in lens})
            kwargs["logits_to_keep"] = torch.tensor(keep, dtype=torch.long, device=self.device)
        elif logits != "all":
            raise ValueError(f"logits={logits!r}: pass 'last' or 'all'")
        out = _forward(self.model, ids, mask.long(), pos, self.cache, **kwargs)
        self.forwards += 1
        self.mask = mask
        for i, toks in enumerate(new):
            self.cols[i].extend(range(L, L + lens[i]))
            self.tokens[i].extend(toks)
        z = out.logits
        if z.dtype not in (torch.float32, torch.float64):
            z = z.float()  # half-precision logits: decide in float32
        if logits == "last":
            where = {n: j for j, n in enumerate(keep)}
            z = z[
                torch.arange(B, device=z.device), torch.tensor([where[n - 1] for n in lens], device=z.device)
            ]
        self._crop_trailing()
        return z

    @_inference
    def truncate(self, row: int, keep: int) -> None:
        """Keep only row ``row``'s first ``keep`` cached tokens (the rest become holes)."""
        if keep < len(self.tokens[row]):
            drop = self.cols[row][keep:]
            self.mask[row, drop] = False
            del self.cols[row][keep:]
            del self.tokens[row][keep:]

    @_inference
    def finish_rollback(self) -> None:
        """Crop columns that are holes in every row, and compact when holes dominate."""
        self._crop_trailing()
        self._maybe_compact()

    @_inference
    def sync(self, row: int, context: Sequence[int]) -> list[int]:
        """Roll row ``row`` back to its longest common prefix with ``context``; return what is missing.

        At least the context's last token is always returned (rolled back if it was cached), since
        the caller needs the logits after it.
        """
        have = self.tokens[row]
        n = min(len(have), len(context) - 1)
        m = 0
        # Contexts grow at the end, so the common prefix is almost always all of the shorter one;
        # check that first, fall back to a scan.
        if list(context[:n]) == have[:n]:
            m = n
        else:
            while m < n and have[m] == context[m]:
                m += 1
        self.truncate(row, m)
        return list(context[m:])

    @_inference
    def select(self, rows: Sequence[int]) -> None:
        """Keep only the given rows (in that order), e.g. when others have finished."""
        import torch

        idx = torch.tensor(list(rows), dtype=torch.long, device=self.device)
        self.cache.batch_select_indices(idx)
        self.mask = self.mask[idx]
        self.cols = [self.cols[r] for r in rows]
        self.tokens = [self.tokens[r] for r in rows]
        self._crop_trailing()

    def _crop_trailing(self) -> None:
        last = max((c[-1] + 1 for c in self.cols if c), default=0)
        extra = self.width - last
        if extra > 0:
            self.cache.crop(-extra)
            self.mask = self.mask[:, :last]

    def _maybe_compact(self) -> None:
        import torch
        from transformers.cache_utils import DynamicLayer

        longest = max((len(c) for c in self.cols), default=0)
        if self.width < 64 or self.width <= 2 * longest:
            return
        layers = [layer for layer in self.cache.layers if type(layer) is DynamicLayer]
        if len(layers) != len(self.cache.layers):
            return  # sliding-window/linear layers keep other state: leave them alone
        B = len(self.cols)
        idx = torch.zeros((B, longest), dtype=torch.long)
        for i, c in enumerate(self.cols):
            if c:
                idx[i, : len(c)] = torch.tensor(c)
                idx[i, len(c) :] = c[-1]  # duplicates of a valid column, masked below
        idx = idx.to(self.device)
        for layer in layers:
            keys, values = layer.keys, layer.values
            if not layer.is_initialized or keys is None or values is None or keys.numel() == 0:
                continue
            _, H, _, D = keys.shape
            g = idx[:, None, :, None].expand(B, H, longest, D)
            layer.keys = keys.gather(2, g)
            g = idx[:, None, :, None].expand(B, H, longest, values.shape[-1])
            layer.values = values.gather(2, g)
        mask = torch.zeros((B, longest), dtype=torch.bool, device=self.device)
        for i, c in enumerate(self.cols):
            mask[i, : len(c)] = True
            self.cols[i] = list(range(len(c)))
        self.mask = mask


def _forward(model: PreTrainedModel, ids, mask, pos, cache, **kwargs):
    # transformers 5.x names the argument `cache`; older models still take `past_key_values`.
    try:
        return model(
            input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, **kwargs
        )
    except TypeError:
        return model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            past_key_values=cache,
            use_cache=True,
            **kwargs,
        )


# --------------------------------------------------------------------------------------------
# Sampling helpers


def _probs(z: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """The sampling distribution for logits ``z`` (..., V): softmax(z / T), then nucleus filtering."""
    import torch

    p = torch.softmax(z / temperature, dim=-1)
    if top_p < 1.0:
        sp, si = p.sort(dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p (the top token always survives).
        drop = (sp.cumsum(-1) - sp) >= top_p
        sp = sp.masked_fill(drop, 0.0)
        p = torch.zeros_like(p).scatter(-1, si, sp)
        p = p / p.sum(-1, keepdim=True)
    return p


def _sample(p: torch.Tensor, gen: torch.Generator | None) -> int:
    import torch

    return int(torch.multinomial(p, 1, generator=gen).item())


def _uniform(gen: torch.Generator | None) -> float:
    import torch

    return float(torch.rand((), generator=gen, device=gen.device if gen is not None else None).item())


# --------------------------------------------------------------------------------------------
# Drafters


@dataclass
class Proposal:
    """Draft tokens for each row, and (for model drafters when sampling) the draft distributions.

    Attributes:
        tokens: Per row, up to the requested number of draft tokens.
        probs: Per row, a ``(len(tokens[i]), V)`` tensor of the distributions the tokens were
            sampled from, or ``None`` for a deterministic/point-mass proposal (prompt lookup, or
            any drafter when decoding greedily).
    """

    tokens: list[list[int]]
    probs: list[torch.Tensor | None]


class Drafter(Protocol):
    """Proposes up to k tokens per row.

    The loop calls :meth:`reset` with the batch's prompts, then :meth:`propose` each step with each
    active row's full context (prompt + accepted tokens), and :meth:`select` when rows finish.
    A drafter with state must reconcile it with ``contexts`` itself (e.g. roll a cache back to the
    common prefix); nothing else tells it what was accepted.
    """

    forwards: int

    def reset(self, prompts: list[list[int]]) -> None:
        """Start a new batch."""
        ...

    def propose(
        self,
        contexts: list[list[int]],
        counts: list[int],
        *,
        temperature: float,
        top_p: float,
        generator: torch.Generator | None,
    ) -> Proposal:
        """Propose up to ``counts[i]`` tokens for row i (fewer, or none, is allowed)."""
        ...

    def select(self, rows: list[int]) -> None:
        """Keep only the given rows (indices into the current batch, in order)."""
        ...


class DraftModelDrafter:
    """Drafts with a smaller causal LM sharing the target's tokenizer, on its own ragged KV cache.

    Greedy decoding drafts the draft model's argmax; sampling drafts from its tempered, nucleus-
    filtered distribution and reports it as q for the rejection test. Its cache is rolled back to
    the longest common prefix with each new context, so rejected drafts cost no recomputation.

    Args:
        model: The draft model (same vocabulary ids as the target).
        pad_token_id: Filler id for ragged blocks.
        min_confidence: A row stops drafting after a token the draft gave probability below this
            (its own argmax probability when greedy); the batch stops when every row has. 0 = off:
            the adaptive γ alone sets the length. Like HF's ``assistant_confidence_threshold``
            (same default, 0.4), it saves draft forwards where the draft is unsure and likely to
            be rejected: on the demo models it cut draft forwards per token from 1.44 to 0.88 at
            the same acceptance (``lynn bench specdec --draft-confidence``).
    """

    def __init__(self, model: PreTrainedModel, pad_token_id: int = 0, min_confidence: float = 0.4) -> None:
        self.model = model
        self.pad_token_id = pad_token_id
        self.min_confidence = min_confidence
        self.cache: RaggedCache | None = None
        self.forwards = 0

    def reset(self, prompts: list[list[int]]) -> None:
        """Start a new batch with an empty cache."""
        self.cache = RaggedCache(self.model, len(prompts), self.pad_token_id)

    def select(self, rows: list[int]) -> None:
        """Drop finished rows from the cache."""
        assert self.cache is not None
        self.cache.select(rows)

    @_inference
    def propose(
        self,
        contexts: list[list[int]],
        counts: list[int],
        *,
        temperature: float,
        top_p: float,
        generator: torch.Generator | None,
    ) -> Proposal:
        """Up to ``max(counts)`` draft forwards (the first one also catches up with the context)."""
        import torch

        if self.cache is None:
            raise RuntimeError("DraftModelDrafter.propose before reset()")
        cache = self.cache
        B = len(contexts)
        new = [cache.sync(i, ctx) for i, ctx in enumerate(contexts)]
        cache.finish_rollback()
        tokens: list[list[int]] = [[] for _ in range(B)]
        probs: list[list[torch.Tensor]] = [[] for _ in range(B)]
        live = [c > 0 for c in counts]
        while any(live):
            z = cache.feed(new)
            self.forwards += 1
            p = _probs(z, temperature, top_p) if temperature > 0 else None
            if p is not None:
                nxt = torch.multinomial(p, 1, generator=generator).squeeze(-1).tolist()
                conf = p.gather(-1, torch.tensor(nxt, device=p.device)[:, None]).squeeze(-1).tolist()
            else:
                top = torch.softmax(z, -1).max(-1) if self.min_confidence > 0 else None
                nxt = z.argmax(-1).tolist()
                conf = top.values.tolist() if top is not None else [1.0] * B
            for i in range(B):
                if live[i]:
                    tokens[i].append(nxt[i])
                    if p is not None:
                        probs[i].append(p[i])
                    live[i] = len(tokens[i]) < counts[i] and conf[i] >= self.min_confidence
            new = [[t] for t in nxt]
        return Proposal(
            tokens=tokens,
            probs=[torch.stack(q) if q else None for q in probs] if temperature > 0 else [None] * B,
        )


class PromptLookupDrafter:
    """Prompt lookup: copy what followed the latest earlier occurrence of the context's last n-gram.

    Tries n from ``max_ngram`` down to ``min_ngram``; the proposal is deterministic (q is a point
    mass). LiveWeb actions copy element refs and text from the axtree, EVM scripts copy addresses
    and amounts from the instruction, so matches are frequent.

    Args:
        max_ngram: Longest suffix n-gram to match.
        min_ngram: Shortest suffix n-gram to match.
    """

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(
                f"PromptLookupDrafter needs 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}"
            )
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.forwards = 0

    def reset(self, prompts: list[list[int]]) -> None:
        """Nothing to reset (stateless)."""

    def select(self, rows: list[int]) -> None:
        """Nothing to select (stateless)."""

    def lookup(self, context: Sequence[int], count: int) -> list[int]:
        """Up to ``count`` tokens following the latest earlier match of the context's suffix."""
        import numpy as np

        if count <= 0:
            return []
        ctx = np.asarray(context, dtype=np.int64)
        L = len(ctx)
        for n in range(min(self.max_ngram, L - 1), self.min_ngram - 1, -1):
            suffix = ctx[L - n :]
            # Windows starting at s = 0..L-n-1 (the suffix itself, at L-n, is excluded).
            win = np.lib.stride_tricks.sliding_window_view(ctx[: L - 1], n)
            hits = np.flatnonzero((win == suffix).all(axis=1))
            if len(hits):
                s = int(hits[-1]) + n
                return ctx[s : s + count].tolist()
        return []

    def propose(
        self,
        contexts: list[list[int]],
        counts: list[int],
        *,
        temperature: float,
        top_p: float,
        generator: torch.Generator | None,
    ) -> Proposal:
        """Look each row up independently."""
        return Proposal(
            tokens=[self.lookup(c, k) for c, k in zip(contexts, counts, strict=True)],
            probs=[None] * len(contexts),
        )


# --------------------------------------------------------------------------------------------
# Verification rules. Each takes the target's logits at the row's k+1 verified positions, the k
# draft tokens and their draft distributions; returns (accepted count n, next token, MARS hits).


@dataclass
class _Verify:
    logits: torch.Tensor  # (k+1, V) float32
    draft: list[int]
    q: torch.Tensor | None  # (k, V) or None (point mass)
    temperature: float
    top_p: float
    gen: torch.Generator | None
    config: SpecConfig


def _next_token(p_or_z: torch.Tensor, v: _Verify) -> int:
    """The target's own token from a distribution (sampling) or logits (greedy)."""
    if v.temperature > 0:
        return _sample(p_or_z, v.gen)
    return int(p_or_z.argmax().item())


def _strict_step(v: _Verify, j: int, p: torch.Tensor | None) -> tuple[bool, int]:
    """Strict test of draft token j: (accepted, the token emitted: ``d`` if accepted, else the correction)."""
    import torch

    d = v.draft[j]
    if v.temperature <= 0:
        top = int(v.logits[j].argmax().item())
        return (True, d) if d == top else (False, top)
    assert p is not None
    pd = float(p[d])
    if v.q is None:  # point mass: accept with p(d); residual = p without d
        if _uniform(v.gen) < pd:
            return True, d
        res = p.clone()
        res[d] = 0.0
    else:
        qd = float(v.q[j, d])
        # A drafter that proposes a token it gave q = 0 has ratio p/q = inf: accept iff p allows it.
        if (pd > 0.0 and qd <= 0.0) or (qd > 0.0 and _uniform(v.gen) < min(1.0, pd / qd)):
            return True, d
        res = torch.clamp(p - v.q[j], min=0.0)
    s = float(res.sum())
    return False, _sample(res / s if s > 0 else p, v.gen)


def _rule_strict(v: _Verify) -> tuple[int, int, list[int]]:
    if v.temperature <= 0:  # the hot path: one argmax over all verified positions
        top = v.logits.argmax(-1).tolist()
        n = next((j for j, d in enumerate(v.draft) if d != top[j]), len(v.draft))
        return n, top[n], []
    P = _probs(v.logits, v.temperature, v.top_p) if v.temperature > 0 else None
    for j in range(len(v.draft)):
        ok, corr = _strict_step(v, j, None if P is None else P[j])
        if not ok:
            return j, int(corr), []
    k = len(v.draft)
    return k, _next_token(P[k] if P is not None else v.logits[k], v), []


def _processed_logits(z: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Logits after the sampling processors: ``z / T`` with tokens outside the nucleus at −inf.

    The counterpart of the reference's ``logits_processor`` (transformers' temperature and top-p
    warpers); tokens a constraint banned are −inf in ``z`` already and stay so.
    """
    import torch

    zt = z / temperature
    if top_p >= 1.0:
        return zt
    keep = _probs(z, temperature, top_p) > 0
    return torch.where(keep, zt, torch.full_like(zt, float("-inf")))


def mars_ratio(z: torch.Tensor, how: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Top-2 token ids and the MARS margin ratio for logits ``z`` (..., V).

    Args:
        z: Logits as the rule sees them: the processed ones (tempered, top-p filtered, constrained)
            when sampling, the raw (constrained) ones in ``mars-greedy``'s greedy path.
        how: ``"logit"`` (the reference's ``z2 / (z1 + 1e-10)``), ``"prob"`` (p2/p1 = exp(z2 − z1))
            or ``"auto"`` (z2/z1 where z1 > 0, p2/p1 where z1 ≤ 0); see :class:`SpecConfig` for why.

    Returns:
        ``(top2_ids (..., 2), ratio (...))``. Where the second-best logit is −inf (the nucleus or a
        constraint leaves one token) the ratio is −inf: there is no second choice to relax to. The
        reference computes ``-inf / z1`` there, which is +inf when z1 < 0 and would accept a
        filtered token; ours never does.
    """
    import torch

    vals, ids = z.topk(2, dim=-1)
    z1, z2 = vals[..., 0], vals[..., 1]
    prob = torch.exp(z2 - z1)
    if how == "prob":
        r = prob
    else:
        logit = z2 / (z1 + 1e-10)
        r = logit if how == "logit" else torch.where(z1 > 0, logit, prob)
    r = torch.where(torch.isfinite(z2), r, torch.full_like(r, float("-inf")))
    return ids, r


def _rule_mars(v: _Verify) -> tuple[int, int, list[int]]:
    """The reference's MARS (``5SSjw/MARS`` ``evaluate_posterior``) on a chain of draft tokens.

    Greedy: plain strict matching (the reference has no logits processor there). Sampling: at each
    position the top-2 of the *processed* logits give the ratio; above θ a draft token in that top-2
    is accepted outright and one outside it is rejected (the correction is sampled from the
    processed distribution, as the reference's ``sample_p``); at or below θ the strict test runs
    (with the lossless residual ``max(0, p − q)``, where the reference zeroes only the rejected
    token's mass).
    """
    if v.temperature <= 0 and v.config.rule == "mars":
        return _rule_strict(v)
    if v.temperature > 0:
        P = _probs(v.logits, v.temperature, v.top_p)
        zr = _processed_logits(v.logits, v.temperature, v.top_p)
    else:  # mars-greedy: the relaxation on the raw logits, the correction the argmax
        P, zr = None, v.logits
    ids, r = mars_ratio(zr, v.config.mars_ratio)
    hits: list[int] = []
    for j, d in enumerate(v.draft):
        top1, top2 = int(ids[j, 0]), int(ids[j, 1])
        if float(r[j]) > v.config.theta:
            if d in (top1, top2):
                if d != top1:
                    hits.append(j)
                continue  # accepted outright, as in the reference (no rejection test)
            return j, _next_token(P[j] if P is not None else v.logits[j], v), hits
        ok, corr = _strict_step(v, j, None if P is None else P[j])
        if not ok:
            return j, int(corr), hits
    k = len(v.draft)
    return k, _next_token(P[k] if P is not None else v.logits[k], v), hits


def typical_threshold(p: torch.Tensor, epsilon: float, delta: float) -> torch.Tensor:
    """Medusa's typical-acceptance threshold ``min(ε, δ·exp(−H(p)))`` for distributions ``p`` (..., V).

    The entropy is Medusa's ``−Σ p·log(p + 1e-5)``.
    """
    import torch

    H = -(p * torch.log(p + 1e-5)).sum(-1)
    return torch.clamp(delta * torch.exp(-H), max=epsilon)


def _rule_typical(v: _Verify) -> tuple[int, int, list[int]]:
    """Medusa's typical acceptance (``FasterDecoding/Medusa`` ``evaluate_posterior``, ``fast=True``).

    Greedy: plain strict matching. Sampling: a draft token x is kept while ``p(x) > min(ε, δ·exp(−H))``
    with p = softmax(z / T) (no top-p, as Medusa); the correction or bonus token is the target's
    argmax (Medusa's default ``fast=True``). ``typical-greedy`` (ours) also runs the test in greedy
    decoding, on the T = 1 distribution, and keeps the argmax as well.
    """
    if v.temperature <= 0 and v.config.rule == "typical":
        return _rule_strict(v)
    import torch

    P = torch.softmax(v.logits / (v.temperature if v.temperature > 0 else 1.0), dim=-1)
    thr = typical_threshold(P, v.config.typical_epsilon, v.config.typical_delta)
    top = v.logits.argmax(-1).tolist()
    greedy_variant = v.temperature <= 0
    for j, d in enumerate(v.draft):
        if float(P[j, d]) > float(thr[j]) or (greedy_variant and d == top[j]):
            continue
        return j, top[j], []
    k = len(v.draft)
    return k, top[k], []


_RULE_FUNCS: dict[str, Callable[[_Verify], tuple[int, int, list[int]]]] = {
    "strict": _rule_strict,
    "mars": _rule_mars,
    "typical": _rule_typical,
    "mars-greedy": _rule_mars,
    "typical-greedy": _rule_typical,
}


# --------------------------------------------------------------------------------------------
# Generation loops


def _stop_at(out: list[int], start: int, eos: set[int], stops: list[list[int]], limit: int) -> int | None:
    """Length to cut ``out`` at if a stop condition holds at a position ≥ ``start``, else None."""
    for n in range(start + 1, min(len(out), limit) + 1):
        if out[n - 1] in eos:
            return n
        for s in stops:
            if s and n >= len(s) and out[n - len(s) : n] == s:
                return n
    return limit if len(out) >= limit else None


def _check_inputs(input_ids: list[list[int]], max_new_tokens: int) -> None:
    if not input_ids or any(len(p) == 0 for p in input_ids):
        raise ValueError("input_ids must be a non-empty list of non-empty token lists (no padding)")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")


def _eos_set(eos_token_id: int | list[int] | None) -> set[int]:
    if eos_token_id is None:
        return set()
    return {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id)


def _generator(seed: int | None, device: Any) -> torch.Generator:
    """The sampling generator, on the model's device (torch samples only with a same-device one)."""
    import torch

    g = torch.Generator(device=device)
    if seed is None:
        g.seed()
    else:
        g.manual_seed(seed)
    return g


def _run(
    target: PreTrainedModel,
    input_ids: list[list[int]],
    drafter: Drafter | None,
    *,
    max_new_tokens: int,
    eos_token_id: int | list[int] | None,
    temperature: float,
    top_p: float,
    seed: int | None,
    config: SpecConfig,
    pad_token_id: int,
    stop_sequences: list[list[int]] | None,
    constraint: Any = None,
) -> tuple[list[list[int]], SpecStats]:
    import time

    import torch

    t0 = time.perf_counter()
    _check_inputs(input_ids, max_new_tokens)
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    eos = _eos_set(eos_token_id)
    stops = [list(s) for s in (stop_sequences or []) if s]
    gen = _generator(seed, target.device)
    rule = _RULE_FUNCS[config.rule]
    stats = SpecStats()
    outs: list[list[int]] = [[] for _ in input_ids]
    if max_new_tokens == 0:
        return outs, stats
    active = list(range(len(input_ids)))  # original row of each cache row
    gammas = [config.gamma] * len(input_ids)
    cache = RaggedCache(target, len(input_ids), pad_token_id)
    if drafter is not None:
        drafter.reset([list(p) for p in input_ids])
        d_forwards0 = drafter.forwards

    # A decoding constraint (lynn.lm.constraints) masks the target's logits at every position it
    # decides, so strict verification reproduces *constrained* greedy decoding exactly.
    rows_c = [constraint.for_prompt_ids(p) for p in input_ids] if constraint is not None else None

    def masked(z_row: torch.Tensor, r: int, generated: list[int]) -> torch.Tensor:
        if rows_c is None:
            return z_row
        from lynn.lm.constraints import mask_logits

        return mask_logits(z_row, rows_c[r].banned(constraint.text_of(generated)))

    with torch.inference_mode():
        z = cache.feed([list(p) for p in input_ids])
        if rows_c is not None:
            z = torch.stack([masked(z[r], r, []) for r in range(len(input_ids))])
        if temperature > 0:
            first = torch.multinomial(_probs(z, temperature, top_p), 1, generator=gen).squeeze(-1).tolist()
        else:
            first = z.argmax(-1).tolist()
        for r, t in enumerate(first):
            outs[r].append(t)

        def prune() -> None:
            keep = []
            for ci, r in enumerate(active):
                cut = _stop_at(outs[r], 0, eos, stops, max_new_tokens)
                if cut is not None:
                    del outs[r][cut:]
                else:
                    keep.append(ci)
            if len(keep) < len(active):
                if keep:
                    cache.select(keep)
                    if drafter is not None:
                        drafter.select(keep)
                active[:] = [active[ci] for ci in keep]

        prune()
        while active:
            contexts = [list(input_ids[r]) + outs[r] for r in active]
            if drafter is None:
                z = cache.feed([[outs[r][-1]] for r in active])
                if rows_c is not None:
                    z = torch.stack([masked(z[ci], r, outs[r]) for ci, r in enumerate(active)])
                if temperature > 0:
                    nxts = (
                        torch.multinomial(_probs(z, temperature, top_p), 1, generator=gen)
                        .squeeze(-1)
                        .tolist()
                    )
                else:
                    nxts = z.argmax(-1).tolist()
                for ci, r in enumerate(active):
                    outs[r].append(nxts[ci])
                prune()
                continue
            # Never draft past max_new_tokens (the target adds one token of its own per step).
            counts = [min(gammas[r], max_new_tokens - len(outs[r]) - 1) for r in active]
            prop = drafter.propose(contexts, counts, temperature=temperature, top_p=top_p, generator=gen)
            drafts = [list(prop.tokens[ci][: counts[ci]]) for ci in range(len(active))]
            blocks = [cache.sync(ci, contexts[ci]) + drafts[ci] for ci in range(len(active))]
            cache.finish_rollback()
            z = cache.feed(blocks, logits="all")
            for ci, r in enumerate(active):
                k = len(drafts[ci])
                b = len(blocks[ci])
                q = prop.probs[ci]
                zv = z[ci, b - k - 1 : b]
                if rows_c is not None:
                    zv = torch.stack([masked(zv[j], r, outs[r] + drafts[ci][:j]) for j in range(k + 1)])
                v = _Verify(zv, drafts[ci], q[:k] if q is not None else None,
                            temperature, top_p, gen, config)  # fmt: skip
                n, nxt, hits = rule(v)
                base = len(outs[r])
                stats.mars_positions.extend((r, base + j) for j in hits)
                outs[r].extend(drafts[ci][:n])
                outs[r].append(nxt)
                stats.accepted_lengths.append(n)
                # Cached now: context + drafts; valid: context + accepted drafts (nxt is fed next).
                cache.truncate(ci, len(contexts[ci]) + n)
                if config.adaptive and k > 0:
                    g = gammas[r] + 2 if n == k else gammas[r] - 1
                    gammas[r] = max(config.gamma_min, min(config.gamma_max, g))
            cache.finish_rollback()
            prune()

    stats.mars_positions = [(r, p) for r, p in stats.mars_positions if p < len(outs[r])]
    stats.target_forwards = cache.forwards
    stats.draft_forwards = (drafter.forwards - d_forwards0) if drafter is not None else 0
    stats.new_tokens = sum(len(o) for o in outs)
    stats.wall_s = time.perf_counter() - t0
    return outs, stats


def speculative_generate(
    target: PreTrainedModel,
    input_ids: list[list[int]],
    drafter: Drafter,
    *,
    max_new_tokens: int,
    eos_token_id: int | list[int] | None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int | None = None,
    config: SpecConfig | None = None,
    pad_token_id: int = 0,
    stop_sequences: list[list[int]] | None = None,
    constraint: Any = None,
) -> tuple[list[list[int]], SpecStats]:
    """Speculative decoding of a ragged batch of prompts.

    Args:
        target: The target causal LM (its output is what strict decoding reproduces).
        input_ids: Prompts as token lists, no padding, any lengths.
        drafter: A :class:`DraftModelDrafter`, :class:`PromptLookupDrafter` or any :class:`Drafter`.
        max_new_tokens: Most tokens generated per row.
        eos_token_id: Id(s) that end a row (kept in its output), or None.
        temperature: 0 for greedy decoding, else the sampling temperature.
        top_p: Nucleus mass for sampling (1.0 = off).
        seed: Seed of the sampling generator (None = random).
        config: Rule and γ schedule (default :class:`SpecConfig`).
        pad_token_id: Filler id for ragged blocks (any valid id; never attended to).
        stop_sequences: A row stops once its new tokens end with one of these id sequences
            (kept in its output).
        constraint: A decoding constraint such as :class:`lynn.lm.constraints.HexCopyConstraint`
            (applied to the target's logits at every decided position; strict stays lossless with
            respect to constrained greedy).

    Returns:
        ``(new tokens per row, stats)``; rows are in the order of ``input_ids``.
    """
    return _run(
        target, input_ids, drafter, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id,
        temperature=temperature, top_p=top_p, seed=seed, config=config or SpecConfig(),
        pad_token_id=pad_token_id, stop_sequences=stop_sequences, constraint=constraint,
    )  # fmt: skip


def greedy_generate(
    target: PreTrainedModel,
    input_ids: list[list[int]],
    *,
    max_new_tokens: int,
    eos_token_id: int | list[int] | None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int | None = None,
    pad_token_id: int = 0,
    stop_sequences: list[list[int]] | None = None,
    constraint: Any = None,
) -> tuple[list[list[int]], SpecStats]:
    """Target-only decoding (one target forward per token) on the same ragged-cache code.

    The reference for the identity tests and the baseline of the benchmark; arguments as in
    :func:`speculative_generate`.
    """
    return _run(
        target, input_ids, None, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id,
        temperature=temperature, top_p=top_p, seed=seed, config=SpecConfig(),
        pad_token_id=pad_token_id, stop_sequences=stop_sequences, constraint=constraint,
    )  # fmt: skip
