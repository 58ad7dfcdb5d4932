"""GRPO/GSPO learner (lynn.agents.llm.grpo) side by side with TRL 1.16's GRPOTrainer.

TRL is driven through its own pipeline on the same batch: a ``rollout_func`` hands it fixed prompt and
completion token ids, a reward function fixed rewards; ``_generate_and_score_completions`` computes its
advantages and reference log-probs, ``_compute_loss`` its loss. Our learner gets the same groups as
version-tagged rollouts and recomputes every log-prob itself (old ones from the version snapshot).
Losses, advantages and gradients must agree.
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from lynn.agents.llm.grpo import (  # noqa: E402
    GRPOConfig,
    GRPOLearner,
    collate,
    group_advantages,
    grpo_loss,
    per_token_logps,
)

G = 4
REWARDS = [0.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.0, 0.25, 0.3, 0.3, 0.3, 0.3]  # last group: zero std


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    from transformers import LlamaConfig, LlamaForCausalLM

    from lynn.lm.tokenizer import train_tokenizer

    torch.set_num_threads(1)
    tok = train_tokenizer(
        ["send 0.1 BNB to 0xabc", "deposit 2 wbnb", "query the gas price", "approve the router"] * 5,
        vocab_size=300,
        min_frequency=1,
    )
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    path = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path, tok


def _groups(tok, n_groups: int = 3) -> list[dict]:
    """Fixed rollout groups: prompts of different lengths (left padding), completions of different
    lengths ending in EOS (right padding)."""
    g = torch.Generator().manual_seed(1)
    groups = []
    k = 0
    for i in range(n_groups):
        prompt = torch.randint(6, len(tok), (3 + 2 * i,), generator=g).tolist()
        comps = []
        for _ in range(G):
            n = 2 + (k * 3) % 6
            ids = [*torch.randint(6, len(tok), (n,), generator=g).tolist(), tok.eos_token_id]
            comps.append({"ids": ids, "reward": REWARDS[k]})
            k += 1
        groups.append({"version": 0, "prompt_ids": prompt, "completions": comps, "seed": 100_000 + i})
    return groups


def _perturb(model, scale: float, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)


def _trl(
    path,
    tok,
    groups,
    *,
    level: str,
    beta: float,
    loss_type: str,
    eps_high: float | None,
    kl_bc: bool,
    ga: int = 1,
):
    from datasets import Dataset
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer

    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    flat = [(gr["prompt_ids"], c["ids"]) for gr in groups for c in gr["completions"]]

    def rollout_func(prompts, trainer):
        return {
            "prompt_ids": [p for p, _ in flat],
            "completion_ids": [c for _, c in flat],
            "logprobs": [[0.0] * len(c) for _, c in flat],
        }

    def reward(prompts, completions, **kw):
        return [c["reward"] for gr in groups for c in gr["completions"]]

    n = len(flat)
    args = TRLConfig(
        output_dir=str(path / "trl_out"),
        per_device_train_batch_size=n // ga,
        gradient_accumulation_steps=ga,
        num_generations=G,
        max_completion_length=16,
        beta=beta,
        epsilon=0.2,
        epsilon_high=eps_high,
        importance_sampling_level=level,
        loss_type=loss_type,
        scale_rewards="group",
        use_bias_correction_kl=kl_bc,
        use_cpu=True,
        bf16=False,  # TRL defaults to bf16 autocast; compare in float32
        report_to=[],
    )
    ds = Dataset.from_dict({"prompt": [f"p{i // G}" for i in range(n)]})
    tr = GRPOTrainer(
        model=str(path),
        reward_funcs=reward,
        args=args,
        train_dataset=ds,
        processing_class=tok,
        rollout_func=rollout_func,
    )
    tr.current_gradient_accumulation_steps = ga
    return tr


CASES = [
    ("token", 0.0, "grpo", None, True),
    ("sequence", 0.0, "grpo", None, True),
    ("token", 0.04, "grpo", 0.28, True),
    ("token", 0.04, "grpo", None, False),
    ("sequence", 0.04, "grpo", None, True),
    ("token", 0.04, "bnpo", None, True),
    ("token", 0.04, "dapo", None, True),
    ("token", 0.04, "dr_grpo", None, True),
]


GA_CASES = [("token", 0.04, lt, None, True, 2) for lt in ("grpo", "bnpo", "dapo", "dr_grpo")]


@pytest.mark.parametrize(
    ("level", "beta", "loss_type", "eps_high", "kl_bc", "ga"), [(*c, 1) for c in CASES] + GA_CASES
)
def test_loss_advantages_and_grads_equal_trl(tiny, level, beta, loss_type, eps_high, kl_bc, ga):
    """One micro-batch, and (``ga=2``) TRL's gradient accumulation over two micro-batches of 6
    completions: TRL's own ``split_tensor_dict`` chunks, ``_compute_loss`` on each, gradients summed;
    ours with ``micro_batch=6``. ``bnpo`` is where the two differ from a whole-batch token mean."""
    from trl.trainer.utils import split_tensor_dict

    path, tok = tiny
    groups = _groups(tok)
    tr = _trl(
        path, tok, groups, level=level, beta=beta, loss_type=loss_type, eps_high=eps_high, kl_bc=kl_bc, ga=ga
    )
    inputs = [{"prompt": f"p{i // G}"} for i in range(len(groups) * G)]
    tr.model.train()
    out = tr._generate_and_score_completions(inputs)

    # Advantages: TRL's pipeline vs ours, from the same rewards.
    ours_adv = group_advantages(torch.tensor(REWARDS[: len(inputs)]), G)
    assert torch.allclose(out["advantages"], ours_adv, atol=1e-6)
    assert torch.allclose(ours_adv[8:], torch.zeros(4))  # a zero-std group has no signal

    # The models: reference = start (W0), behaviour = W0 + noise (version 0), current = W0 + other noise.
    from transformers import AutoModelForCausalLM

    start = AutoModelForCausalLM.from_pretrained(path)
    behaviour = copy.deepcopy(start)
    _perturb(behaviour, 0.05, seed=2)
    current_sd = copy.deepcopy(start)
    _perturb(current_sd, 0.05, seed=3)
    cur_state = current_sd.state_dict()

    # TRL: the behaviour log-probs come from TRL's own scorer with the behaviour weights loaded.
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attn = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    keep = out["completion_ids"].size(1)
    tr.model.load_state_dict(behaviour.state_dict())
    with torch.no_grad():
        old, _, _ = tr._get_per_token_logps_and_entropies(tr.model, ids, attn, keep)
    tr.model.load_state_dict(cur_state)
    out["old_per_token_logps"] = old
    tr.model.zero_grad()
    trl_loss = 0.0
    for chunk in split_tensor_dict(out, ga):  # TRL's accumulation: one backward per micro-batch
        part = tr._compute_loss(tr.model, chunk)
        part.backward()
        trl_loss += float(part.detach())
    trl_grads = {n: p.grad.clone() for n, p in tr.model.named_parameters() if p.grad is not None}

    # Ours: the learner holds the behaviour snapshot as version 0 and the current weights as version 1.
    cfg = GRPOConfig(
        beta=beta,
        importance_sampling_level=level,
        loss_type=loss_type,
        epsilon_high=eps_high,
        kl_bias_correction=kl_bc,
        # One TRL batch: 12 completions in 3 micro-batches of ours (only bnpo cares, and it is not run
        # that way: its micro-batch is TRL's); with ga=2 two of 6, TRL's split.
        micro_batch=6 if ga > 1 or loss_type == "bnpo" else 5,
        max_completion_length=16,  # TRL's, above (dr_grpo's constant)
    )
    if ga == 1 and loss_type == "bnpo":
        cfg.micro_batch = 12
    model = AutoModelForCausalLM.from_pretrained(path)
    learner = GRPOLearner(model, tok, cfg, ref_model=start)
    learner.snapshots = {0: {k: v.clone() for k, v in behaviour.state_dict().items()}}
    learner.model.load_state_dict(cur_state)
    learner.version = 1
    loss, sums, _ = learner.loss_and_grad(groups)
    assert loss == pytest.approx(trl_loss, rel=1e-5, abs=1e-6)
    assert sums["clipped"] > 0  # the perturbation is large enough to exercise the clip
    if beta:
        assert sums["kl_sum"] > 0
    ours = dict(learner.model.named_parameters())
    # TRL's fused LM head ties nothing extra; compare every parameter TRL has a gradient for.
    for name, g in trl_grads.items():
        assert torch.allclose(ours[name].grad, g, atol=1e-6, rtol=1e-4), name


def test_pure_loss_clipping_and_kl_by_hand():
    # One token, A > 0: ratio 1.5 clips at 1.2 -> loss -1.2 * A; ratio 0.5 does not clip (min picks 0.5*A).
    adv = torch.tensor([2.0, 2.0])
    mask = torch.ones(2, 1)
    logp = torch.log(torch.tensor([[1.5], [0.5]]))
    old = torch.zeros(2, 1)
    loss, info = grpo_loss(logp, old, adv, mask, epsilon_low=0.2, epsilon_high=0.2)
    assert float(loss) == pytest.approx(-(1.2 * 2 + 0.5 * 2) / 2)
    assert info["clipped"] == 1.0
    # A < 0: ratio 0.5 clips at 0.8 -> -(0.8 * -2); ratio 1.5 is taken as is.
    loss, info = grpo_loss(logp, old, -adv, mask, epsilon_low=0.2, epsilon_high=0.2)
    assert float(loss) == pytest.approx(-(1.5 * -2 + 0.8 * -2) / 2)
    # KL k3 at ref = logp is zero; positive otherwise.
    _, info = grpo_loss(logp, logp, adv, mask, beta=0.1, ref_logps=logp)
    assert info["kl_sum"] == pytest.approx(0.0, abs=1e-7)
    _, info = grpo_loss(logp, logp, adv, mask, beta=0.1, ref_logps=torch.zeros(2, 1))
    assert info["kl_sum"] > 0


def test_sequence_level_ratio_is_geometric_mean():
    logp = torch.tensor([[0.1, 0.3, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the padded token must not count
    loss, _ = grpo_loss(
        logp,
        torch.zeros(1, 3),
        torch.tensor([1.0]),
        mask,
        importance_sampling_level="sequence",
        epsilon_low=10,
        epsilon_high=10,
    )
    assert float(loss) == pytest.approx(-float(torch.exp(torch.tensor(0.2))), rel=1e-6)


def test_advantages_scales():
    r = torch.tensor([0.0, 1.0, 1.0, 1.0])
    a = group_advantages(r, 4)
    assert float(a.sum()) == pytest.approx(0.0, abs=1e-6)
    assert torch.allclose(group_advantages(r, 4, "none"), r - 0.75)
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(r, 3)


def test_collate_layout_and_per_token_logps_match_unpadded(tiny):
    from transformers import AutoModelForCausalLM

    path, tok = tiny
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    groups = _groups(tok, 2)
    rb = collate(groups, tok.pad_token_id)
    assert rb.prompt_mask[:, -1].all() and rb.completion_mask[:, 0].all()  # left / right padded
    ids = torch.cat([rb.prompt_ids, rb.completion_ids], 1)
    attn = torch.cat([rb.prompt_mask, rb.completion_mask], 1)
    with torch.no_grad():
        lp = per_token_logps(model, ids, attn, rb.completion_ids.size(1))
        # Row 0 scored alone, without any padding (RoPE: left padding must not change it).
        p, c = groups[0]["prompt_ids"], groups[0]["completions"][0]["ids"]
        alone = per_token_logps(model, torch.tensor([p + c]), torch.ones(1, len(p) + len(c)), len(c))
    assert torch.allclose(lp[0, : len(c)], alone[0], atol=1e-5)


def test_update_steps_versions_and_validate(tiny):
    from transformers import AutoModelForCausalLM

    path, tok = tiny
    learner = GRPOLearner(
        AutoModelForCausalLM.from_pretrained(path), tok, GRPOConfig(lr=1e-2, keep_versions=2)
    )
    groups = _groups(tok)
    assert learner.get_weights()["version"] == 0
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    m = learner.update(groups)
    assert learner.version == 1 and m["completions"] == 12
    assert "rollout_s_mean" not in m  # the fixed groups carry no worker timings
    assert any(not torch.equal(before[k], v) for k, v in learner.model.state_dict().items())
    # A group from version 0 is still usable (ratio against the kept snapshot); one from the future is not.
    assert learner.validate(groups[0]) is None
    bad = {**groups[0], "version": 5}
    assert "never published" in learner.validate(bad)
    assert "vocabulary" in learner.validate({**groups[0], "prompt_ids": [10**6]})
    nan = copy.deepcopy(groups[0])
    nan["completions"][0]["reward"] = float("nan")
    assert "finite" in learner.validate(nan)
    assert "dict" in learner.validate(["not", "a", "group"])
    with pytest.raises(ValueError, match="malformed rollout group"):
        learner.update([nan])
    learner.update(groups)  # version 2; keep_versions=2 keeps {1, 2}: version 0 is gone
    assert "older than" in learner.validate(groups[0])
    # Worker timings (capacity model: mu = 1 / seconds per group) are averaged over the batch.
    timed = [{**g, "version": 2, "gen_s": 1.0 + i, "env_s": 0.5} for i, g in enumerate(groups)]
    m = learner.update(timed)
    assert m["rollout_s_mean"] == pytest.approx((1.5 + 2.5 + 3.5) / 3)
    assert "rollout_s_by_worker" not in m  # no worker named
    named = [{**g, "version": 3, "worker": w} for g, w in zip(timed, (0, 1, 0), strict=True)]
    m = learner.update(named)
    assert m["rollout_s_by_worker"] == pytest.approx({"0": (1.5 + 3.5) / 2, "1": 2.5})


def test_grpo_raises_reward_of_a_preferred_completion(tiny):
    """A real learning signal: completion A (reward 1) vs B (reward 0) for one prompt; after a few
    updates the policy puts more probability on A."""
    from transformers import AutoModelForCausalLM

    path, tok = tiny
    learner = GRPOLearner(AutoModelForCausalLM.from_pretrained(path), tok, GRPOConfig(lr=3e-3))
    prompt = [7, 8, 9]
    a, b = [10, 11, tok.eos_token_id], [12, 13, tok.eos_token_id]

    def logp(ids):
        with torch.no_grad():
            x = torch.tensor([prompt + ids])
            return float(per_token_logps(learner.model.eval(), x, torch.ones_like(x), len(ids)).sum())

    gap0 = logp(a) - logp(b)
    for _ in range(5):
        group = {
            "version": learner.version,
            "prompt_ids": prompt,
            "completions": [{"ids": a, "reward": 1.0}, {"ids": b, "reward": 0.0}] * 2,
        }
        learner.update([group])
    assert logp(a) - logp(b) > gap0 + 0.5


def test_save_and_resume(tiny, tmp_path):
    from transformers import AutoModelForCausalLM

    path, tok = tiny
    learner = GRPOLearner(AutoModelForCausalLM.from_pretrained(path), tok, GRPOConfig())
    learner.update(_groups(tok))
    learner.save(tmp_path / "ck", extra={"note": "x"})
    again = GRPOLearner(AutoModelForCausalLM.from_pretrained(tmp_path / "ck"), tok, GRPOConfig())
    meta = again.load_state(tmp_path / "ck")
    assert again.version == 1 and meta["note"] == "x" and len(again.history) == 1
    for (k, v), (_, w) in zip(
        learner.model.state_dict().items(), again.model.state_dict().items(), strict=True
    ):
        assert torch.equal(v, w), k


def test_aggregation_rules_by_hand_with_two_micro_batches():
    """TRL's four rules written out by hand on known per-token losses (zero advantage, beta = 1, the
    current policy at the reference: the per-token loss is the KL term, here set directly).

    Micro-batch 1: completions of 1 and 3 tokens; micro-batch 2: one completion of 3 tokens,
    accumulated over k = 2 (sum_i: completion i's token sum, L = max_completion_length):
    grpo = (sum_1/1 + sum_2/3 + sum_3/3) / 3 (TRL's per-micro-batch mean / k, the same when the
    micro-batches are equal, as TRL's always are); bnpo = (sum_1 + sum_2)/4/2 + sum_3/3/2 (each
    micro-batch's token mean / k); dr_grpo = (sum_1 + sum_2 + sum_3) / (3 L); dapo = the token sum
    / 7 (the whole batch's tokens).
    """
    import math

    d = [[0.1, 0.0, 0.0, 0.0], [0.2, 0.3, 0.4, 0.0]], [[0.5, 0.6, 0.7, 0.8]]
    masks = [[1, 0, 0, 0], [1, 1, 1, 0]], [[1, 1, 1, 0]]
    k3 = [[[math.exp(x) - x - 1 for x in row] for row in mb] for mb in d]
    tok = [[v * m for v, m in zip(r, mr, strict=True)] for mb, mmb in zip(k3, masks, strict=True)
           for r, mr in zip(mb, mmb, strict=True)]  # fmt: skip
    sums = [sum(r) for r in tok]  # per completion
    lens = [1, 3, 3]
    L = 10
    expected = {
        # TRL's grpo on equal micro-batches is sum of per-completion means / n; ours uses total=n.
        "grpo": (sums[0] / 1 + sums[1] / 3 + sums[2] / 3) / 3,
        "bnpo": (sums[0] + sums[1]) / 4 / 2 + sums[2] / 3 / 2,
        "dr_grpo": (sums[0] + sums[1] + sums[2]) / (3 * L),
        "dapo": (sums[0] + sums[1] + sums[2]) / sum(lens),
    }
    for loss_type, want in expected.items():
        got = 0.0
        for mb_d, mb_m in zip(d, masks, strict=True):
            logp = torch.zeros(len(mb_d), 4)
            loss, _ = grpo_loss(logp, logp, torch.zeros(len(mb_d)), torch.tensor(mb_m), beta=1.0,
                                ref_logps=torch.tensor(mb_d), loss_type=loss_type, total=3, total_tokens=7.0,
                                micro_batches=2, max_completion_length=L)  # fmt: skip
            got += float(loss)
        assert got == pytest.approx(want, rel=1e-6), loss_type
    # bnpo and dapo agree only with one micro-batch.
    assert expected["bnpo"] != pytest.approx(expected["dapo"])
    with pytest.raises(ValueError, match="max_completion_length"):
        GRPOConfig(loss_type="dr_grpo")


def test_bnpo_without_micro_batches_keeps_the_old_whole_batch_mean_for_old_callers():
    """A caller that passes total_tokens but not micro_batches (written before TRL's bnpo) keeps the
    whole batch's token mean (= dapo); the learner passes micro_batches and gets TRL's bnpo."""
    logp = torch.zeros(2, 3)
    ref = torch.tensor([[0.2, 0.4, 0.0], [0.1, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    kw = dict(beta=1.0, ref_logps=ref, total_tokens=6.0)
    old, _ = grpo_loss(logp, logp, torch.zeros(2), mask, loss_type="bnpo", **kw)
    dapo, _ = grpo_loss(logp, logp, torch.zeros(2), mask, loss_type="dapo", **kw)
    trl_bnpo, _ = grpo_loss(logp, logp, torch.zeros(2), mask, loss_type="bnpo", micro_batches=2, **kw)
    k3 = sum(math.exp(x) - x - 1 for x in (0.2, 0.4, 0.1))
    assert float(old) == pytest.approx(k3 / 6) and float(dapo) == pytest.approx(k3 / 6)
    assert float(trl_bnpo) == pytest.approx(k3 / 3 / 2)


def test_the_trainer_asks_for_an_evaluator_before_it_trains(tmp_path):
    """``eval_heldout`` needs the caller's held-out evaluation (agents do not import eval/): refused up
    front, before any model is loaded or anything written."""
    from lynn.agents.llm.grpo_trainer import GRPOTrainConfig, train_grpo

    cfg = GRPOTrainConfig(model=str(tmp_path / "none"), out=str(tmp_path / "run"), eval_heldout=True)
    with pytest.raises(ValueError, match="evaluate="):
        train_grpo(cfg)
    assert not (tmp_path / "run").exists()


def test_rollouts_use_the_prompt_options_the_base_was_trained_with(tmp_path: Path) -> None:
    """GRPO samples and scores on the base's own prompt: the zoo's EVMQuest LM was trained with literal slots and
    a Done: line, and a rollout policy without them reads a prompt it never saw (14/62 against 61/62 held out)."""
    from lynn.agents.llm.policy import LMPolicy
    from lynn.agents.llm.rollouts import prompt_options
    from lynn.zoo import resolve

    base = resolve("zoo:evm-lm")
    assert prompt_options(base) == {"slots": True, "history": True}
    assert prompt_options(tmp_path) == {
        "slots": False,
        "history": False,
    }  # no lynn_train.json: the plain prompt
    policy = LMPolicy(env_id="Lynn/EVMQuest-v0", generator=object(), **prompt_options(base))
    assert policy.slots and policy.history
