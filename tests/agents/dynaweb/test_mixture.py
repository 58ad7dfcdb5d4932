"""RL on the mixture (lynn.agents.dynaweb.mixture): the learned memory weight λ gets the mixture's gradient and
moves with the advantage, the exploration knob changes the rollout distribution as documented, the learned λ
round-trips through a model folder and is what the chooser then mixes with."""

from __future__ import annotations

import math
from collections import Counter

import pytest

torch = pytest.importorskip("torch")

from lynn.agents.dynaweb.learner import DynaWebLearner, Row  # noqa: E402
from lynn.agents.dynaweb.mixture import MixtureParams, mixture_logps  # noqa: E402
from lynn.agents.llm.grpo import GRPOConfig  # noqa: E402
from lynn.lm.web_candidates import web_slots  # noqa: E402
from lynn.lm.web_memory import MemoryWeights, mix, template_of  # noqa: E402
from tests.agents.dynaweb.test_train import ranked_policy as ranked_policy  # noqa: E402  (fixture)
from tests.agents.llm import test_grpo  # noqa: E402

tiny = test_grpo.tiny

GOAL = "What is the price of Cobalt Eco Mouse?"
TEMPLATE = template_of(GOAL, web_slots(GOAL))  # the memory's template id of GOAL


def _mix(p_knn: float | None, p_lm: float, behaviour: float, key: str = "h\tx") -> dict:
    return {
        "p_knn": p_knn,
        "p_lm": p_lm,
        "weight": 0.9,
        "behaviour_weight": 0.9,
        "behaviour": behaviour,
        "key": key,
        "goal": GOAL,
    }


def test_the_row_probability_is_the_mixture_and_lambda_gets_its_gradient():
    tmpl = TEMPLATE
    params = MixtureParams(0.9, [tmpl])
    rows = [_mix(0.95, 0.05, 0.9), _mix(None, 0.3, 0.3)]
    lp = mixture_logps(params, rows, torch.zeros(2))
    assert math.exp(float(lp[0].detach())) == pytest.approx(0.9 * 0.95 + 0.1 * 0.05, rel=1e-5)
    assert math.exp(float(lp[1].detach())) == pytest.approx(0.3, rel=1e-5)  # no memory match: the LM's alone
    lp[0].backward()
    # d log π / d logit = σ'(x)(p_kNN − p_LM)/π > 0 for an action the memory liked more
    want = 0.9 * 0.1 * (0.95 - 0.05) / (0.9 * 0.95 + 0.1 * 0.05)
    assert float(params.bias.grad) == pytest.approx(want, rel=1e-4)
    assert float(params.template.grad[0]) == pytest.approx(want, rel=1e-4)
    assert float(params.level.grad[0]) == pytest.approx(want, rel=1e-4)  # "h" level
    assert float(params.level.grad[1]) == 0.0


def _rows(tok, advantage_memory_action: float) -> list[Row]:
    prompt = tok("page", add_special_tokens=False)["input_ids"][:3] or [5, 6, 7]
    reply = [10, 11, 2]
    mem = Row(prompt, reply, advantage_memory_action, "imagined", _mix(0.95, 0.05, 0.9))
    lm = Row(prompt, reply, -advantage_memory_action, "imagined", _mix(0.0, 0.6, 0.1))
    return [mem, lm]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_lambda_moves_in_the_direction_of_the_advantage(tiny, sign):
    """The memory's action did well (sign +1) -> λ rises; it did badly (−1) -> λ falls."""
    from transformers import AutoModelForCausalLM

    path, tok = tiny
    model = AutoModelForCausalLM.from_pretrained(path)
    params = MixtureParams(0.9, [TEMPLATE])
    learner = DynaWebLearner(model, tok, GRPOConfig(lr=1e-3, seed=0), mixture=params, mixture_lr=0.1)
    b0 = float(params.bias)
    w0 = {k: v.clone() for k, v in model.state_dict().items()}
    m = learner.step_rows(_rows(tok, sign))
    assert m["mixture_rows"] == 2
    assert (float(params.bias) - b0) * sign > 0.05  # Adam's first step: about lr in the advantage's direction
    assert (float(params.template[0])) * sign > 0.05
    assert any(not torch.equal(w0[k], v) for k, v in model.state_dict().items())  # the LM moves too


def test_importance_weight_corrects_an_explored_draw(tiny):
    """An LM action drawn with μ = 0.5 that the policy gives π ≈ 0.06 enters with weight π/μ; one with a
    larger ratio is truncated at c."""
    from transformers import AutoModelForCausalLM

    path, tok = tiny
    params = MixtureParams(0.9, [])
    learner = DynaWebLearner(
        AutoModelForCausalLM.from_pretrained(path), tok, GRPOConfig(seed=0), mixture=params, is_truncation=1.5
    )
    rows = [
        Row([5, 6], [10, 2], 1.0, "imagined", _mix(0.0, 0.6, 0.5)),
        Row([5, 6], [10, 2], 1.0, "imagined", _mix(1.0, 0.1, 0.2)),
    ]
    m = learner.step_rows(rows)
    want = ((0.1 * 0.6) / 0.5 + 1.5) / 2  # the second: (0.9 + 0.01)/0.2 = 4.55 -> 1.5
    assert m["is_weight_mean"] == pytest.approx(want, rel=1e-4)


def test_exploration_scale_lowers_lambda_in_the_draw_only():
    counts = Counter({'click link "*"': 3})
    forms = ['click link "*"', 'fill textbox "Search" = "L1"']
    scores = [math.log(0.2), math.log(0.8)]
    pi = [math.exp(x) for x in mix(scores, forms, counts, 0.9)]
    mu = [math.exp(x) for x in mix(scores, forms, counts, 0.9 * 0.5)]
    assert pi[0] == pytest.approx(0.9 + 0.1 * 0.2) and mu[0] == pytest.approx(0.45 + 0.55 * 0.2)
    assert mu[1] > pi[1]  # the LM's favourite is drawn more often while exploring


def test_learned_weights_round_trip_and_drive_the_chooser(tmp_path, ranked_policy, web_data):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.lm.web_candidates import RankedChooser, load_steps
    from lynn.lm.web_memory import MIXTURE_FILE, ActionMemory

    mem = ActionMemory.load(ranked_policy / "lynn_memory.json.gz")
    params = MixtureParams(0.5, mem.templates())
    with torch.no_grad():
        params.bias.fill_(-8.0)  # λ ≈ 0: the LM alone
    params.save(ranked_policy)
    back = MemoryWeights.load(ranked_policy / MIXTURE_FILE)
    assert back.bias == -8.0 and set(back.level) == {"h", "l", "p"}
    again = MixtureParams(0.9, mem.templates(), start=back)  # zero offsets are not written
    assert float(again.bias) == -8.0 and set(again.templates) == set(mem.templates())
    tok = AutoTokenizer.from_pretrained(ranked_policy)
    model = AutoModelForCausalLM.from_pretrained(ranked_policy)
    learned = RankedChooser.from_folder(model, tok, ranked_policy)
    assert learned.weights is not None
    st = next(s for s in load_steps([str(web_data["train"])]) if s["replies"])
    c = learned.decide(st["obs"], st["replies"], temperature=1.0, rng=__import__("random").Random(0))
    assert c.mixture is not None and c.mixture["weight"] < 1e-3
    (ranked_policy / MIXTURE_FILE).unlink()
    plain = RankedChooser.from_folder(model, tok, ranked_policy)
    assert (
        plain.weights is None and plain.decide(st["obs"], st["replies"]).mixture is None
    )  # default unchanged
