"""The DynaWeb update: per-step rows with group-normalised advantages, expert rows, the clip, and the
loss side by side with TRL 1.16's GRPOTrainer where both apply (single-step groups, no expert)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from lynn.agents.dynaweb.learner import DynaWebLearner, trajectory_rows  # noqa: E402
from lynn.agents.dynaweb.rollouts import Step, Trajectory  # noqa: E402
from lynn.agents.llm.grpo import GRPOConfig  # noqa: E402
from tests.agents.llm import test_grpo  # noqa: E402
from tests.agents.llm.test_grpo import REWARDS, G, _groups, _perturb, _trl  # noqa: E402

tiny = test_grpo.tiny  # the same tiny LLaMA fixture as the GRPO/TRL tests


def _traj(reward: float, n_steps: int, k: int = 0, source: str = "imagined") -> Trajectory:
    steps = [Step([7 + k, 8, 9 + j], [10 + j, 11, 2], f"click('e{j}')") for j in range(n_steps)]
    return Trajectory("shop.product_price.0", steps, reward=reward, source=source)


def test_advantages_are_group_normalised_and_shared_by_every_step():
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    group = [_traj(r, n_steps=1 + i % 3, k=i) for i, r in enumerate(rewards)]
    flat = [0.3] * 4  # a group where every rollout scored the same: no signal
    rows = trajectory_rows([group, [_traj(r, 2) for r in flat]], expert=[_traj(1.0, 3, source="expert")])
    r = torch.tensor(rewards)
    want = ((r - r.mean()) / (r.std() + 1e-4)).tolist()  # unbiased std, TRL's 1e-4
    it = iter(rows)
    for t, a in zip(group, want, strict=True):
        for _ in t.steps:  # every step of a trajectory carries the trajectory's advantage
            row = next(it)
            assert row.advantage == pytest.approx(a, abs=1e-6)
            assert row.source == "imagined"
    for _ in range(4 * 2):
        assert next(it).advantage == 0.0
    expert = list(it)
    assert [x.source for x in expert] == ["expert"] * 3
    assert all(x.advantage == 1.0 for x in expert)
    assert sum(want) == pytest.approx(0.0, abs=1e-5) and max(want) > 0 > min(want)
    with pytest.raises(ValueError, match="at least 2"):
        trajectory_rows([[_traj(1.0, 1)]])


@pytest.mark.parametrize(("level", "beta"), [("sequence", 0.0), ("token", 0.0), ("sequence", 0.04)])
def test_update_equals_trl_on_single_step_groups(tiny, level, beta):
    """One-step trajectories without expert rows are exactly TRL's setting: same loss, same gradient."""
    path, tok = tiny
    groups = _groups(tok)
    tr = _trl(path, tok, groups, level=level, beta=beta, loss_type="grpo", eps_high=None, kl_bc=True)
    inputs = [{"prompt": f"p{i // G}"} for i in range(len(groups) * G)]
    tr.model.train()
    out = tr._generate_and_score_completions(inputs)
    from transformers import AutoModelForCausalLM

    start = AutoModelForCausalLM.from_pretrained(path)
    current = copy.deepcopy(start)
    _perturb(current, 0.05, seed=3)  # the policy has moved away from the reference (KL > 0)
    cur_state = current.state_dict()
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attn = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    tr.model.load_state_dict(cur_state)
    with torch.no_grad():  # on-policy: the behaviour log-probs are the current policy's
        old, _, _ = tr._get_per_token_logps_and_entropies(tr.model, ids, attn, out["completion_ids"].size(1))
    out["old_per_token_logps"] = old
    tr.model.zero_grad()
    trl_loss = tr._compute_loss(tr.model, out)
    trl_loss.backward()
    trl_grads = {n: p.grad.clone() for n, p in tr.model.named_parameters() if p.grad is not None}

    trajs = [
        [Trajectory("t", [Step(g["prompt_ids"], c["ids"], "")], reward=c["reward"]) for c in g["completions"]]
        for g in groups
    ]
    cfg = GRPOConfig(lr=0.0, max_grad_norm=0.0, beta=beta, importance_sampling_level=level, micro_batch=5)
    learner = DynaWebLearner(copy.deepcopy(current), tok, cfg, ref_model=start)
    m = learner.step_rows(trajectory_rows(trajs))
    assert m["loss"] == pytest.approx(float(trl_loss.detach()), rel=1e-5, abs=1e-6)
    assert m["ratio_mean"] == pytest.approx(1.0) and m["clip_frac"] == 0.0
    ours = dict(learner.model.named_parameters())
    for name, g in trl_grads.items():
        assert torch.allclose(ours[name].grad, g, atol=1e-6, rtol=1e-4), name
    assert REWARDS  # the same fixed rewards as tests/agents/llm/test_grpo.py


def _rows(tok):
    g = torch.Generator().manual_seed(5)
    trajs = []
    for r in (1.0, 0.0, 1.0, 0.0):
        steps = [
            Step(
                torch.randint(6, len(tok), (6,), generator=g).tolist(),
                [*torch.randint(6, len(tok), (5,), generator=g).tolist(), tok.eos_token_id],
                "",
            )
            for _ in range(2)
        ]
        trajs.append(Trajectory("t", steps, reward=r))
    expert = [_traj(1.0, 2, source="expert")]
    return trajectory_rows([trajs], expert)


def test_clip_binds_only_when_a_batch_is_reused(tiny):
    """With one gradient step per batch the ratio is 1 (nothing to clip); with several, GSPO clips
    whole replies once their sequence ratio leaves [1 - eps, 1 + eps], and that changes the update."""
    from transformers import AutoModelForCausalLM

    path, tok = tiny
    rows = _rows(tok)

    def run(iterations: int, epsilon: float):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(path)
        cfg = GRPOConfig(lr=0.05, epsilon=epsilon, importance_sampling_level="sequence", micro_batch=4)
        learner = DynaWebLearner(model, tok, cfg, iterations=iterations)
        m = learner.step_rows(rows)
        return m, {k: v.clone() for k, v in learner.model.state_dict().items()}

    m1, _ = run(1, 0.2)
    assert m1["clip_frac"] == 0.0 and m1["ratio_mean"] == pytest.approx(1.0)
    m3, w_clip = run(4, 0.2)
    assert m3["clip_frac"] > 0
    m_free, w_free = run(4, 1e6)  # never clipped
    assert m_free["clip_frac"] == 0.0
    assert any(not torch.equal(w_clip[k], w_free[k]) for k in w_clip)
    assert m3["expert_rows"] == 2 and m3["rows"] == 10


def test_expert_rows_pull_the_policy_towards_the_expert_reply(tiny):
    """An expert row's gradient at ratio 1 is an SFT gradient: one update raises the reply's log-prob."""
    from transformers import AutoModelForCausalLM

    from lynn.agents.llm.grpo import per_token_logps

    path, tok = tiny
    model = AutoModelForCausalLM.from_pretrained(path)
    expert = _traj(1.0, 1, source="expert")
    s = expert.steps[0]
    ids = torch.tensor([s.prompt_ids + s.completion_ids])
    attn = torch.ones_like(ids)

    def logp() -> float:
        with torch.no_grad():
            return float(per_token_logps(model, ids, attn, len(s.completion_ids)).sum())

    before = logp()
    flat = [_traj(0.0, 1, k=i) for i in range(2)]  # a zero-std group: no on-policy signal at all
    learner = DynaWebLearner(model, tok, GRPOConfig(lr=0.01))
    learner.step_rows(trajectory_rows([flat], [expert]))
    assert logp() > before + 0.05
