"""RankedChooser's decisions as an RL learner sees them: sampling from the policy's own distribution, and
the token ids that carry exactly the log-likelihood the chooser ranked the reply by (recorded real pages,
``fixtures/liveweb_steps.jsonl``)."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from lynn.lm.web_candidates import RankedChooser, learn_format, reply_for, score_replies
from lynn.lm.web_memory import ActionMemory

STEPS = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "liveweb_steps.jsonl").open()]


def _step(s: dict) -> dict:
    obs = {"goal": s["goal"], "axtree": s["axtree"], "url": s["url"], "title": s["title"]}
    return dict(s, obs=obs, reply=reply_for(s["action"], obs))


TRAIN = [_step(s) for s in STEPS if s["split"] == "train"]


@pytest.fixture(scope="module")
def chooser(tiny_lm: Path) -> RankedChooser:
    from lynn.lm.backends import TransformersGenerator

    gen = TransformersGenerator(str(tiny_lm), threads=1)
    fmt = dataclasses.replace(learn_format(TRAIN, k=20), slots=True, show_options=True, memory_weight=0.5)
    return RankedChooser(gen.model, gen.tokenizer, fmt, memory=ActionMemory.build(TRAIN, min_episodes=1))


def test_greedy_decision_is_choose_and_its_ids_carry_the_score_it_was_ranked_by(
    chooser: RankedChooser,
) -> None:
    import torch

    from lynn.agents.llm.grpo import per_token_logps

    for s in TRAIN[:6]:
        c = chooser.decide(s["obs"], s["replies"])
        assert (c.reply, c.action) == chooser.choose(s["obs"], s["replies"])
        assert c.index == max(range(len(c.probs)), key=lambda i: c.probs[i])
        assert abs(sum(c.probs) - 1.0) < 1e-9
        prompt, completion = c.token_ids(chooser.tokenizer)
        assert chooser.tokenizer.decode(completion).startswith(c.shown)
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            lp = per_token_logps(chooser.model, ids, torch.ones_like(ids), len(completion))
        want = score_replies(chooser.model, chooser.tokenizer, c.messages, [c.shown])[0]
        assert float(lp.sum()) == pytest.approx(want, abs=1e-3)


def test_sampling_draws_candidates_as_often_as_the_policy_weighs_them(
    chooser: RankedChooser, monkeypatch: pytest.MonkeyPatch
) -> None:
    scored: dict[str, list[float]] = {}
    score = chooser._score

    def once(msgs: list[dict[str, str]], replies: list[str]) -> list[float]:  # the same page is scored once
        key = json.dumps([msgs, replies])
        if key not in scored:
            scored[key] = score(msgs, replies)
        return scored[key]

    monkeypatch.setattr(chooser, "_score", once)
    s = next(
        x for x in TRAIN if len(chooser.decide(x["obs"], x["replies"], 1.0, random.Random(0)).probs) >= 5
    )
    n = 400
    rng = random.Random(7)
    draws = [chooser.decide(s["obs"], s["replies"], 1.0, rng) for _ in range(n)]
    probs = draws[0].probs
    counts = Counter(d.index for d in draws)
    for i, p in enumerate(probs):  # 4 standard deviations of a binomial frequency
        assert abs(counts[i] / n - p) <= 4 * (p * (1 - p) / n) ** 0.5 + 1e-9
    assert chooser.decide(s["obs"], s["replies"], 1.0, random.Random(7)).index == draws[0].index  # seeded
    # a lower temperature sharpens the same distribution towards the greedy candidate
    cold = chooser.decide(s["obs"], s["replies"], 0.25, random.Random(0)).probs
    best = max(range(len(probs)), key=lambda i: probs[i])
    assert cold[best] > probs[best]
