"""Speculative decoding: lossless strict rule (greedy identity, sampling chi-square with power),
MARS superset/θ behaviour, typical acceptance, KV-cache rollback, batching, stops and bad input.

Models are tiny LLaMAs built here: a byte-level target trained for a few seconds on repetitive
EVMQuest/LiveWeb-like text (or on ``tests/lm/prompts.jsonl`` when the lead's real env prompts are
there), a smaller draft trained for less, and small-vocabulary random models for the chi-square.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from lynn.lm import speculative as sd  # noqa: E402
from lynn.lm.speculative import (  # noqa: E402
    DraftModelDrafter,
    PromptLookupDrafter,
    RaggedCache,
    SpecConfig,
    greedy_generate,
    speculative_generate,
)

PROMPTS_FILE = Path(__file__).with_name("prompts.jsonl")
PAD, BOS, EOS = 0, 1, 2
VOCAB = 260  # bytes + 3 specials, rounded
PROMPT_BYTES = 160  # the tail of each prompt that is decoded from (keeps the file fast)
NEW = 24


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: on a loaded 2-core machine two threads spin against each other (~10x slower)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def encode(text: str) -> list[int]:
    return [BOS] + [b + 3 for b in text.encode("utf-8")]


def make_llama(vocab: int, d: int, layers: int, seed: int) -> transformers.LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=2 * d,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


def synthetic_docs(n: int, seed: int) -> list[tuple[str, str]]:
    """(prompt, answer) pairs shaped like EVMQuest instructions and LiveWeb axtrees."""
    rng = random.Random(seed)
    hexd = "0123456789abcdef"
    items = ["Blue Mug", "Red Lamp", "Tea Set", "Desk Fan", "Notebook", "Wool Hat", "Oak Shelf"]
    docs = []
    for i in range(n):
        if i % 2 == 0:
            sym = rng.choice(["TKA", "TKB", "USDL", "WETH"])
            to = "0x" + "".join(rng.choice(hexd) for _ in range(10))
            tok = "0x" + "".join(rng.choice(hexd) for _ in range(10))
            amt = rng.randint(1, 999)
            prompt = (
                f"Task: transfer {amt} {sym} to {to}.\nContracts: {sym} token at {tok}.\n"
                f'Answer:\n```python\ntoken = contract("{tok}")\n'
            )
            answer = f'token.transfer("{to}", {amt})\n```\n'
        else:
            item = rng.choice(items)
            refs = rng.sample(range(2, 60), 4)
            others = rng.sample([x for x in items if x != item], 3)
            lines = [f'- link "Home" [ref=e{refs[0]}]']
            lines += [f'- button "Add {o} to cart" [ref=e{r}]' for o, r in zip(others, refs[1:], strict=True)]
            k = rng.randint(0, len(lines))
            lines.insert(k, f'- button "Add {item} to cart" [ref=e{refs[0] + 60}]')
            prompt = f'Goal: add "{item}" to the cart.\n' + "\n".join(lines) + "\nAction: "
            answer = f'click("e{refs[0] + 60}")\n'
        docs.append((prompt, answer))
    return docs


def load_prompts() -> tuple[list[str], list[str]]:
    """(prompts to decode from, training texts): the lead's real env prompts when present."""
    docs = synthetic_docs(400, seed=0)
    train = [p + a for p, a in docs]
    prompts: list[str] = []
    if PROMPTS_FILE.exists():
        rows = [json.loads(line) for line in PROMPTS_FILE.read_text().splitlines() if line.strip()]
        prompts = [
            r["prompt"] if "prompt" in r else "\n".join(m["content"] for m in r["messages"]) for r in rows
        ]
        train += prompts
    # At least 52 prompts: top up with synthetic ones when the file has fewer (or is missing).
    prompts += [p for p, _ in synthetic_docs(max(0, 52 - len(prompts)), seed=1)]
    return prompts, train


def train(model, texts: list[str], steps: int, seed: int, seq: int = 128, batch: int = 16) -> None:
    rng = random.Random(seed)
    stream: list[int] = []
    for t in texts:
        stream += encode(t) + [EOS]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        starts = [rng.randrange(0, len(stream) - seq - 1) for _ in range(batch)]
        x = torch.tensor([stream[s : s + seq] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


@pytest.fixture(scope="module")
def lm():
    """A trained target, a smaller draft (half its layers), and ≥ 50 encoded prompts."""
    prompts, texts = load_prompts()
    target = make_llama(VOCAB, 64, 2, seed=0)
    train(target, texts, steps=100, seed=0, batch=8)
    # The draft: the target's first layer alone (embeddings, norm and head shared by copy), tuned briefly.
    draft = make_llama(VOCAB, 64, 1, seed=1)
    for name in ("model.embed_tokens", "model.layers.0", "model.norm", "lm_head"):
        draft.get_submodule(name).load_state_dict(target.get_submodule(name).state_dict())
    train(draft, texts, steps=30, seed=1, batch=8)
    ids = [encode(p)[-PROMPT_BYTES:] for p in prompts]
    assert len(ids) >= 50
    # float64: batched and unbatched matmuls round differently; in float32 a near-tie between the
    # top two logits (gap ~1e-6) could flip an argmax and fail an identity test for no real reason.
    return target.double(), draft.double(), ids


@pytest.fixture(scope="module")
def ref(lm):
    """Target-only greedy on all prompts in one ragged batch (checked against batch 1 and HF below)."""
    target, _, ids = lm
    return greedy_generate(target, ids, max_new_tokens=NEW, eos_token_id=None)[0]


def batches(ids, n):
    return [ids[i : i + n] for i in range(0, len(ids), n)]


# ---------------------------------------------------------------------------------------------
# Greedy identity


def test_greedy_baseline_matches_hf_generate(lm, ref):
    """Our target-only loop, batched or not, equals transformers' own greedy generate."""
    target, _, ids = lm
    for p, o in zip(ids[:8], ref[:8], strict=True):
        out, stats = greedy_generate(target, [p], max_new_tokens=NEW, eos_token_id=None)
        assert out == [o]
        assert stats.target_forwards == NEW  # one forward per token, prefill included
    for p, o in zip(ids[:4], ref[:4], strict=True):
        hf = target.generate(
            torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long), max_new_tokens=NEW,
            do_sample=False, pad_token_id=PAD,
        )[0, len(p) :].tolist()  # fmt: skip
        # HF stops at the config's EOS; ours was asked not to stop.
        assert len(hf) >= 8 and hf == o[: len(hf)]


@pytest.mark.parametrize("drafter_kind", ["draft", "lookup"])
@pytest.mark.parametrize("batch", [1, 8])
def test_strict_greedy_identical_to_target_greedy(lm, ref, drafter_kind, batch):
    target, draft, ids = lm
    drafter = DraftModelDrafter(draft) if drafter_kind == "draft" else PromptLookupDrafter()
    got, acc, fwd, toks = [], [], 0, 0
    for chunk in batches(ids, batch):
        out, stats = speculative_generate(target, chunk, drafter, max_new_tokens=NEW, eos_token_id=None)
        got += out
        acc += stats.accepted_lengths
        fwd += stats.target_forwards
        toks += stats.new_tokens
    assert got == ref  # token for token, every prompt
    assert toks == NEW * len(ids)
    # Acceptance is not trivial: drafts are accepted, and the target runs fewer forwards than tokens.
    assert sum(acc) / len(acc) > 0.3
    assert fwd < toks / batch


def test_stops_and_eos_match_greedy(lm):
    """EOS and stop sequences cut speculative and greedy output at the same token."""
    target, draft, ids = lm
    # Stops taken from what greedy really writes on these prompts, so they fire whatever the prompts are.
    free = greedy_generate(target, ids[:16], max_new_tokens=NEW, eos_token_id=None)[0]
    row = free[0]
    stop = [row[NEW // 3 : NEW // 3 + 2]]
    eos = [EOS, free[1][NEW // 2]]
    kw = dict(max_new_tokens=NEW, eos_token_id=eos, stop_sequences=stop)
    want = greedy_generate(target, ids[:16], **kw)[0]
    assert any(len(w) < NEW for w in want)  # the stops do fire
    for drafter in (DraftModelDrafter(draft), PromptLookupDrafter()):
        got = []
        for chunk in batches(ids[:16], 8):
            got += speculative_generate(target, chunk, drafter, **kw)[0]
        assert got == want


def test_adaptive_gamma_fixed_gamma_and_config_errors(lm, ref):
    target, draft, ids = lm
    for cfg in (SpecConfig(gamma=1, adaptive=False), SpecConfig(gamma=8, gamma_max=8, adaptive=False)):
        out, stats = speculative_generate(target, ids[:8], DraftModelDrafter(draft), max_new_tokens=NEW,
                                          eos_token_id=None, config=cfg)  # fmt: skip
        assert out == ref[:8]
        assert max(stats.accepted_lengths) <= cfg.gamma
    # Drafting stops early where the draft is unsure: fewer draft forwards, same output.
    full = speculative_generate(
        target, ids[:8], DraftModelDrafter(draft, min_confidence=0.0), max_new_tokens=NEW, eos_token_id=None
    )
    sure = speculative_generate(target, ids[:8], DraftModelDrafter(draft, min_confidence=0.6), max_new_tokens=NEW,
                                eos_token_id=None)  # fmt: skip
    assert full[0] == sure[0] == ref[:8]
    assert sure[1].draft_forwards < full[1].draft_forwards
    with pytest.raises(ValueError, match="rule"):
        SpecConfig(rule="lenient")
    with pytest.raises(ValueError, match="gamma"):
        SpecConfig(gamma=0)
    with pytest.raises(ValueError, match="non-empty"):
        speculative_generate(target, [[]], PromptLookupDrafter(), max_new_tokens=4, eos_token_id=None)
    with pytest.raises(ValueError, match="min_ngram"):
        PromptLookupDrafter(max_ngram=1, min_ngram=2)


def test_prompt_lookup_copies_latest_match():
    d = PromptLookupDrafter(max_ngram=3)
    assert d.lookup([5, 6, 7, 8, 9, 5, 6, 7, 1, 2, 5, 6, 7], 3) == [1, 2, 5]  # latest of two matches
    assert d.lookup([5, 6, 7, 8, 9, 5, 6, 7], 10) == [8, 9, 5, 6, 7]
    assert d.lookup([1, 2, 3], 4) == []  # no earlier occurrence of any suffix n-gram
    assert d.lookup([4, 1, 2, 3, 4], 2) == [1, 2]  # falls back to a 1-gram


# ---------------------------------------------------------------------------------------------
# KV-cache rollback


def test_rollback_gives_fresh_forward_logits(lm):
    """After ragged rejections (and a compaction), next logits equal a fresh forward to 1e-5."""
    target, _, ids = lm
    rows = [ids[0][:30], ids[1][:7], ids[2][:19]]
    rng = random.Random(0)
    with torch.inference_mode():
        cache = RaggedCache(target, len(rows))
        cache.feed(rows)
        kept = [list(r) for r in rows]
        compacted = False
        for step in range(12):
            blocks = [[rng.randrange(3, VOCAB) for _ in range(rng.randint(1, 6))] for _ in rows]
            cache.feed(blocks, logits="all")
            for i, b in enumerate(blocks):
                keep = rng.randint(0, len(b) - 1) if step % 3 else len(b)  # reject often, ragged
                cache.truncate(i, len(kept[i]) + keep)
                kept[i] += b[:keep]
            width = cache.width
            cache.finish_rollback()
            compacted |= cache.width < width
            assert cache.tokens == kept
        assert compacted  # holes were gathered away at least once
        nxt = [rng.randrange(3, VOCAB) for _ in rows]
        z = cache.feed([[t] for t in nxt])
        for i, t in enumerate(nxt):
            fresh = target(torch.tensor([kept[i] + [t]])).logits[0, -1]
            assert torch.allclose(z[i], fresh, atol=1e-5), (z[i] - fresh).abs().max()


def test_draft_cache_rollback_matches_fresh_drafter(lm):
    """A drafter whose cache was rolled back proposes what a fresh drafter proposes (tokens and q)."""
    _, draft, ids = lm
    ctx = [ids[3][:40], ids[4][:25]]
    used = DraftModelDrafter(draft)
    used.reset(ctx)
    g = torch.Generator().manual_seed(0)
    first = used.propose(ctx, [5, 5], temperature=0.0, top_p=1.0, generator=g)
    # Row 0: two of five accepted then a correction; row 1: all five plus a bonus token.
    new_ctx = [ctx[0] + first.tokens[0][:2] + [7], ctx[1] + first.tokens[1] + [9]]
    for temp in (0.0, 0.8):
        fresh = DraftModelDrafter(draft)
        fresh.reset(new_ctx)
        a = used.propose(
            new_ctx, [4, 4], temperature=temp, top_p=1.0, generator=torch.Generator().manual_seed(1)
        )
        b = fresh.propose(
            new_ctx, [4, 4], temperature=temp, top_p=1.0, generator=torch.Generator().manual_seed(1)
        )
        assert a.tokens == b.tokens
        if temp > 0:
            for qa, qb in zip(a.probs, b.probs, strict=True):
                assert torch.allclose(qa, qb, atol=1e-5)
    assert used.cache.tokens[0][: len(new_ctx[0])] == new_ctx[0]


# ---------------------------------------------------------------------------------------------
# Strict sampling is lossless: chi-square against the exact distribution, with power


def chi2_pvalue(observed: torch.Tensor, expected: torch.Tensor) -> float:
    """Pearson chi-square p-value; cells with expected < 5 are pooled into one."""
    small = expected < 5
    obs = torch.cat([observed[~small], observed[small].sum().reshape(1)])
    exp = torch.cat([expected[~small], expected[small].sum().reshape(1)])
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    stat = float(((obs - exp) ** 2 / exp).sum())
    dof = len(exp) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))  # fmt: skip


SMALL_V = 6


def peaked(seed: int, layers: int, scale: float):
    m = make_llama(SMALL_V, 32, layers, seed)
    with torch.no_grad():
        m.lm_head.weight.mul_(scale)  # sharpen: random but far from uniform, and far from the other model
    return m


def exact_pairs(target, prompt, temperature=1.0, top_p=1.0):
    """Exact law of new tokens 2 and 3, marginalised over token 1, under the sampling processing."""

    def law(ids):
        return sd._probs(target(torch.tensor(ids)).logits[:, -1].double(), temperature, top_p)

    with torch.inference_mode():
        p1 = law([prompt])[0]
        p2 = law([prompt + [a] for a in range(SMALL_V)])  # (a, b)
        p3 = law([prompt + [a, b] for a in range(SMALL_V) for b in range(SMALL_V)]).reshape(
            SMALL_V, SMALL_V, SMALL_V
        )
    return (p1[:, None, None] * p2[:, :, None] * p3).sum(0).reshape(-1)  # (b, c)


@pytest.fixture(scope="module")
def small():
    target, draft = peaked(10, 2, 6.0), peaked(11, 1, 6.0)
    prompt = [1, 2, 3, 4, 1, 2, 3, 5, 1, 2]  # repetitive, so prompt lookup always finds a match
    return target, draft, prompt, exact_pairs(target, prompt)


def sample_pairs(target, drafter, prompt, n, seed, temperature=1.0, top_p=1.0):
    out, stats = speculative_generate(
        target, [prompt] * n, drafter, max_new_tokens=4, eos_token_id=None, temperature=temperature,
        top_p=top_p, seed=seed, config=SpecConfig(gamma=2, adaptive=False),
    )  # fmt: skip
    counts = torch.zeros(SMALL_V * SMALL_V, dtype=torch.float64)
    for o in out:
        counts[o[1] * SMALL_V + o[2]] += 1
    return counts, stats


def _accept_always(v):
    """A deliberately broken rule: keeps every draft token (outputs the draft's law)."""
    k = len(v.draft)
    return k, sd._next_token(sd._probs(v.logits[k], v.temperature, v.top_p), v), []


def _resample_from_p(v):
    """A subtler broken rule: the right acceptance test, but resamples from p instead of the residual."""
    P = sd._probs(v.logits, v.temperature, v.top_p)
    for j, d in enumerate(v.draft):
        q = float(v.q[j, d]) if v.q is not None else 1.0
        if sd._uniform(v.gen) >= min(1.0, float(P[j, d]) / q):
            return j, sd._sample(P[j], v.gen), []
    return len(v.draft), sd._sample(P[len(v.draft)], v.gen), []


N_SAMPLES = 1200


@pytest.mark.parametrize("drafter_kind", ["draft", "lookup"])
def test_strict_sampling_is_lossless_and_the_test_has_power(small, monkeypatch, drafter_kind):
    target, draft, prompt, exact = small
    make = (lambda: DraftModelDrafter(draft)) if drafter_kind == "draft" else PromptLookupDrafter
    counts, stats = sample_pairs(target, make(), prompt, N_SAMPLES, seed=123)
    # Both drafted positions see accepts and rejects (the residual path is exercised).
    assert 0 < stats.mean_accepted() < 2
    assert chi2_pvalue(counts, exact * N_SAMPLES) > 1e-3
    for name, broken in (("always", _accept_always), ("from_p", _resample_from_p)):
        if drafter_kind == "lookup" and name == "from_p":
            continue  # with a point-mass q, residual and p differ only by one token: too subtle here
        monkeypatch.setitem(sd._RULE_FUNCS, "strict", broken)
        bad, _ = sample_pairs(target, make(), prompt, N_SAMPLES, seed=123)
        assert chi2_pvalue(bad, exact * N_SAMPLES) < 1e-6, name
        monkeypatch.setitem(sd._RULE_FUNCS, "strict", sd._rule_strict)


def test_strict_sampling_is_lossless_with_temperature_and_top_p(small):
    """Lossless for the processed law too: temperature 0.7 and nucleus 0.9 on target and draft."""
    target, draft, prompt, _ = small
    exact = exact_pairs(target, prompt, 0.7, 0.9)
    counts, stats = sample_pairs(target, DraftModelDrafter(draft), prompt, N_SAMPLES, 7, 0.7, 0.9)
    assert 0 < stats.mean_accepted() < 2
    assert chi2_pvalue(counts, exact * N_SAMPLES) > 1e-3
    assert counts[exact == 0].sum() == 0  # nothing outside the nucleus, ever


# ---------------------------------------------------------------------------------------------
# MARS and typical


def _verify(logits, draft, rule, temperature=0.0, top_p=1.0, seed=None, q=None, **cfg):
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    v = sd._Verify(logits, draft, q, temperature, top_p, gen, SpecConfig(rule=rule, **cfg))
    return sd._RULE_FUNCS[rule](v)


def test_greedy_variants_accept_a_superset_of_strict():
    g = torch.Generator().manual_seed(0)
    relaxed = {"mars-greedy": 0, "typical-greedy": 0}
    for i in range(400):
        z = torch.randn(5, 8, generator=g) * (3.0 if i % 2 else 0.5) + (2.0 if i % 3 else -4.0)
        draft = torch.randint(0, 8, (4,), generator=g).tolist()
        # Bias drafts towards the target's top-2 so that acceptance is frequent.
        top = z.topk(2, -1).indices
        draft = [int(top[j, (i + j) % 2]) if (i + j) % 3 else d for j, d in enumerate(draft)]
        n_strict, _, _ = _verify(z, draft, "strict")
        for rule in relaxed:
            n, _, _ = _verify(z, draft, rule)
            assert n >= n_strict
            relaxed[rule] += n > n_strict
    assert all(v > 0 for v in relaxed.values())  # and strictly more, sometimes


def test_mars_ratio_variants():
    z = torch.tensor([[-3.0, -3.1, -9.0], [10.0, 9.5, 0.0], [2.0, -1.0, -5.0]])
    _, logit = sd.mars_ratio(z, "logit")
    _, prob = sd.mars_ratio(z, "prob")
    _, auto = sd.mars_ratio(z, "auto")
    assert logit[0] > 1  # the reference's quirk: negative logits always "relax"
    assert torch.allclose(prob, torch.exp(torch.tensor([-0.1, -0.5, -3.0])))
    assert torch.allclose(auto, torch.stack([prob[0], logit[1], logit[2]]))
    assert bool((prob <= 1).all()) and bool((auto <= 1).all())
    shifted = sd.mars_ratio(z - 100.0, "prob")[1]
    assert torch.allclose(shifted, prob)  # p2/p1 does not care about a logit offset
    # A -inf second logit (one token left by the nucleus or a constraint): no second choice, in
    # every mode; the reference's -inf / (z1 + 1e-10) would be +inf for z1 < 0.
    one = torch.tensor([[-2.0, float("-inf"), float("-inf")], [3.0, float("-inf"), float("-inf")]])
    for how in ("logit", "prob", "auto"):
        assert sd.mars_ratio(one, how)[1].tolist() == [float("-inf")] * 2


# ---------------------------------------------------------------------------------------------
# The references' rules, side by side: expected values worked out by hand from the reference code
# (5SSjw/MARS mars/model/utils.py evaluate_posterior; FasterDecoding/Medusa medusa/model/utils.py
# evaluate_posterior with fast=True), not from ours.


def test_mars_reference_is_strict_in_greedy_decoding():
    # r = 9.5 / 10 = 0.95 > 0.9 and the draft is the top-2 token: the reference's greedy path has no
    # logits processor, so it compares with the argmax and rejects; mars-greedy (ours) accepts.
    z = torch.tensor([[10.0, 9.5, 0.0], [1.0, 5.0, 0.0]])
    assert _verify(z, [1], "mars") == (0, 0, [])
    assert _verify(z, [1], "mars-greedy") == (1, 1, [0])


def test_mars_reference_takes_the_ratio_after_top_p():
    # The reproduction: z = [20, 18.5, 0, 0], top_p 0.8. softmax gives p1 = 1/(1+e^-1.5) =
    # 0.8176 >= 0.8, so the nucleus is {0}: processed logits [20, -inf, -inf, -inf], the ratio
    # -inf / 20 < 0.9, no relaxation; the strict test sees p(1) = 0 and always rejects, and the
    # correction can only be token 0.
    z = torch.tensor([[20.0, 18.5, 0.0, 0.0], [20.0, 18.5, 0.0, 0.0]])
    for seed in range(50):
        assert _verify(z, [1], "mars", temperature=1.0, top_p=0.8, seed=seed) == (0, 0, [])
    # Without the nucleus the ratio is 18.5 / 20 = 0.925 > 0.9: token 1 is accepted outright.
    assert _verify(z, [1], "mars", temperature=1.0, top_p=1.0, seed=0)[:3:2] == (1, [0])
    # Temperature scales both logits: 9.25 / 10 at T = 2, the same ratio, still relaxed.
    assert _verify(z, [1], "mars", temperature=2.0, top_p=1.0, seed=0)[:3:2] == (1, [0])


def test_mars_reference_rejects_outside_the_top2_when_relaxed():
    # r = 9.5 / 10 = 0.95 > 0.9: the relaxation triggers; token 2 (p = e^9 / (e^10 + e^9.5 + e^9 + 1)
    # = 0.186) is not in the top-2, so the reference rejects it outright (no min(1, p/q) test),
    # and its correction is sampled from the processed distribution p itself.
    z = torch.tensor([[10.0, 9.5, 9.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    p = torch.softmax(z[0], -1)
    counts = torch.zeros(4)
    n_seeds = 1500
    for seed in range(n_seeds):
        n, corr, hits = _verify(z, [2], "mars", temperature=1.0, seed=seed)
        assert n == 0 and hits == []
        counts[corr] += 1
    assert torch.allclose(counts / n_seeds, p, atol=0.04)  # 0.506 / 0.307 / 0.186 / 0.000
    # Below the threshold (r = 5 / 10) the strict test runs: with a point-mass proposal it accepts
    # token 2 with probability p(2) = e^5 / (e^10 + 2 e^5) = 0.0066; with q(2) = p(2) always.
    z2 = torch.tensor([[10.0, 5.0, 5.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    q = torch.softmax(z2[:1], -1)
    assert all(_verify(z2, [2], "mars", temperature=1.0, seed=s, q=q)[0] == 1 for s in range(20))


def test_mars_never_accepts_a_banned_token():
    # The issue's +inf case: a constraint leaves one allowed token and z1 < 0. The reference's
    # z2 / (z1 + 1e-10) = -inf / -2 = +inf would relax and accept the banned top-2 index.
    inf = float("-inf")
    z = torch.tensor([[-2.0, inf, inf, inf], [-2.0, inf, inf, inf]])
    for rule, temp in (("mars", 1.0), ("mars-greedy", 0.0)):
        for how in ("logit", "auto"):
            for seed in range(20):
                assert _verify(z, [1], rule, temperature=temp, seed=seed, mars_ratio=how) == (0, 0, [])


def test_typical_reference_is_strict_in_greedy_decoding():
    # p = [0.5, 0.4, 0.1]: Medusa's greedy path compares with the argmax, so the 0.4 token is
    # rejected. typical-greedy (ours) tests it on the T = 1 law: H = -sum p ln(p + 1e-5) = 0.9433,
    # min(0.09, 0.3 e^-H = 0.1168) = 0.09 < 0.4, accepted.
    z = torch.log(torch.tensor([[0.5, 0.4, 0.1], [0.2, 0.7, 0.1]]))
    assert _verify(z, [1], "typical") == (0, 0, [])
    assert _verify(z, [1], "typical-greedy") == (1, 1, [])


def _medusa_threshold(p: list[float], eps: float = 0.09, delta: float = 0.3) -> float:
    """Medusa's threshold written out from its code: min(eps, delta * exp(sum p ln(p + 1e-5)))."""
    import math

    h = -sum(x * math.log(x + 1e-5) for x in p)
    return min(eps, delta * math.exp(-h))


def test_typical_reference_when_sampling_keeps_tokens_above_the_threshold_and_corrects_with_argmax():
    rows = [
        [0.26, 0.24, 0.2, 0.17, 0.08, 0.05],  # H = 1.668: threshold 0.3 e^-H = 0.0566 < 0.09
        [0.26, 0.24, 0.2, 0.17, 0.08, 0.05],
        [0.05, 0.15, 0.6, 0.1, 0.05, 0.05],
    ]
    assert _medusa_threshold(rows[0]) == pytest.approx(0.0566, abs=1e-4)
    z = torch.log(torch.tensor(rows))
    # Token 4 (p = 0.08 > 0.0566) is kept, token 5 (p = 0.05 < 0.0566) is not: the correction is
    # the argmax of that position (Medusa's fast=True), whatever the seed.
    for seed in range(30):
        assert _verify(z, [4, 5], "typical", temperature=1.0, seed=seed) == (1, 0, [])
    # Both kept: the bonus token is the argmax of the last position (token 2), not a sample.
    for seed in range(30):
        assert _verify(z, [4, 4], "typical", temperature=1.0, seed=seed) == (2, 2, [])
    # T = 0.5 sharpens the law to p^2 / sum p^2 before the test: token 4 has 0.0064 / 0.2030 = 0.0315,
    # under that law's threshold (0.0680), and is rejected.
    sq = [x * x / sum(y * y for y in rows[0]) for x in rows[0]]
    assert sq[4] == pytest.approx(0.0315, abs=1e-4) and sq[4] < _medusa_threshold(sq)
    assert _verify(z, [4], "typical", temperature=0.5, seed=0) == (0, 0, [])


def test_mars_and_typical_references_are_greedy_in_greedy_decoding(lm, ref):
    target, draft, ids = lm
    for rule in ("mars", "typical"):
        o, s = speculative_generate(target, ids[:8], DraftModelDrafter(draft), max_new_tokens=NEW, eos_token_id=None,
                                    config=SpecConfig(rule=rule))  # fmt: skip
        assert o == ref[:8] and s.mars_positions == []


def test_mars_greedy_differs_from_greedy_only_at_logged_positions(lm, ref):
    target, draft, ids = lm
    cfg = SpecConfig(rule="mars-greedy", theta=0.9)
    out: list[list[int]] = []
    positions: set[tuple[int, int]] = set()
    ids = ids[:24]
    for b, chunk in enumerate(batches(ids, 8)):
        o, s = speculative_generate(target, chunk, DraftModelDrafter(draft), max_new_tokens=NEW, eos_token_id=None,
                                    config=cfg)  # fmt: skip
        out += o
        positions |= {(8 * b + r, p) for r, p in s.mars_positions}
    assert positions, "MARS never relaxed: the test would be vacuous"
    n_diff = 0
    with torch.inference_mode():
        for r, (p, o) in enumerate(zip(ids, out, strict=True)):
            z = target(torch.tensor([p + o])).logits[0, len(p) - 1 : len(p) + len(o) - 1]
            top2, ratio = sd.mars_ratio(z, cfg.mars_ratio)
            for pos, tok in enumerate(o):
                if (r, pos) in positions:
                    assert tok == int(top2[pos, 1]) and float(ratio[pos]) > cfg.theta
                else:
                    assert tok == int(top2[pos, 0])  # greedy given MARS's own prefix
            if o != ref[r]:
                n_diff += 1
                first = next(i for i, (a, c) in enumerate(zip(o, ref[r], strict=True)) if a != c)
                assert (r, first) in positions
    assert n_diff > 0
    # θ ≥ 1: the ratio never exceeds it, so MARS is exactly strict.
    for b, chunk in enumerate(batches(ids[:16], 8)):
        o, s = speculative_generate(target, chunk, DraftModelDrafter(draft), max_new_tokens=NEW, eos_token_id=None,
                                    config=SpecConfig(rule="mars-greedy", theta=1.0))  # fmt: skip
        assert s.mars_positions == []
        assert o == ref[8 * b : 8 * b + 8]


def test_typical_greedy_tokens_pass_the_typical_threshold(lm):
    target, draft, ids = lm
    cfg = SpecConfig(rule="typical-greedy")
    out, stats = speculative_generate(target, ids[:8], DraftModelDrafter(draft), max_new_tokens=NEW,
                                      eos_token_id=None, config=cfg)  # fmt: skip
    assert stats.mean_accepted() > 0
    with torch.inference_mode():
        for p, o in zip(ids[:8], out, strict=True):
            z = target(torch.tensor([p + o])).logits[0, len(p) - 1 : len(p) + len(o) - 1]
            P = torch.softmax(z, -1)
            H = -(P * (P + 1e-5).log()).sum(-1)  # Medusa's entropy
            thr = torch.clamp(cfg.typical_delta * torch.exp(-H), max=cfg.typical_epsilon)
            for pos, tok in enumerate(o):
                assert tok == int(z[pos].argmax()) or float(P[pos, tok]) > float(thr[pos]) - 1e-6


# ---------------------------------------------------------------------------------------------
# The benchmark runs end to end (lynn bench specdec), on demo models trained for two steps


def test_speculation_ceiling_is_gamma_plus_one_only_for_free_drafts_and_flat_verification():
    from lynn.bench.specdec import ceiling

    flat = {k: 0.01 for k in range(1, 7)}
    assert ceiling(flat, 0.0, 5) == pytest.approx(6.0)  # a GPU-like verify and a free draft
    # a CPU-like verify whose cost grows with k and a draft at 40% of the target: below 2x
    cpu = {1: 0.0069, 6: 0.0105}
    assert ceiling(cpu, 0.0029, 5) == pytest.approx(6 * 0.0069 / (5 * 0.0029 + 0.0105))
    assert ceiling(cpu, 0.0029, 5) < 2


def test_ceiling_sweep_prints_a_row_per_target_shape(capsys, monkeypatch):
    from lynn.bench import specdec

    monkeypatch.setattr(specdec, "SWEEP_SHAPES", {"t1": (32, 1, 64, 2), "t2": (64, 2, 128, 4)})
    assert specdec.main(["--ceiling-sweep", "--threads", "1"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("| t1", "| t2"))]
    assert [r.split("|")[1].strip() for r in rows] == ["t1", "t2"]
    assert all(float(r.split("|")[-2].split("x")[0]) > 0 for r in rows)


def test_bench_specdec_smoke(tmp_path, capsys):
    from lynn.bench import specdec

    code = specdec.main(
        ["--demo", str(tmp_path / "demo"), "--demo-steps", "2", "--demo-docs", "200", "--n-prompts", "3", "--max-new-tokens", "6",
         "--methods", "strict", "--out", str(tmp_path / "out"), "--forward-costs", "--gamma", "3"]
    )  # fmt: skip
    assert code == 0
    report = json.loads((tmp_path / "out" / "specdec.json").read_text())
    costs = report["forward_costs"]
    assert sorted(costs["target_s"]) == ["1", "2", "3", "4"] and costs["draft_s"] > 0
    # (no upper bound: under load a 4-token forward can time below a 1-token one, and the ceiling past 4)
    assert all(v > 0 for v in costs["target_s"].values()) and costs["ceiling_draft"]["3"] > 0
    rows = {(r["method"], r["batch"]): r for r in report["rows"]}
    assert set(rows) == {
        ("greedy (HF generate)", 1), ("greedy (ours)", 1), ("ours strict, draft", 1),
        ("ours strict, prompt lookup", 1), ("greedy (HF generate)", 8), ("greedy (ours)", 8),
        ("ours strict, draft", 8), ("ours strict, prompt lookup", 8),
    }  # fmt: skip
    for r in rows.values():  # every method here is lossless: the same tokens as greedy
        assert r["same_as_greedy"] == 1.0 and r["new_tokens"] > 0
    assert rows[("ours strict, draft", 1)]["draft_forwards_per_token"] > 0
    assert "| ours strict, draft | 1 |" in (tmp_path / "out" / "specdec.md").read_text()
    assert "× greedy" in capsys.readouterr().out
