"""LMPolicy with a ranked-format LiveWeb model: the prompt, the valid-by-construction choice, old models.

A tiny untrained LLaMA (built here in a second) stands in for a trained model: whatever it scores, the
action it sends must parse and name an element of the page.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lynn.envs.liveweb.actions import parse_action
from lynn.lm.web_candidates import RankedChooser, candidates, learn_format, score_replies, top_units
from lynn.lm.web_ranker import action_ref, parse_page

STEPS = [
    json.loads(line)
    for line in (Path(__file__).parents[2] / "lm" / "fixtures" / "liveweb_steps.jsonl").open()
]


def _obs(s: dict, last: str | None = None) -> dict:
    return {
        "goal": s["goal"],
        "axtree": s["axtree"],
        "url": s["url"],
        "title": s["title"],
        "last_action": last,
    }


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    from lynn.lm.tokenizer import train_tokenizer
    from lynn.lm.train import model_config

    torch.manual_seed(0)
    train = [s for s in STEPS if s["split"] == "train"]
    fmt = learn_format(train, k=20)
    texts = [s["goal"] + "\n" + s["axtree"][:2000] for s in STEPS] + ['click link "x"', 'answer "y"']
    tok = train_tokenizer(texts, vocab_size=512)
    model = AutoModelForCausalLM.from_config(model_config("tiny", len(tok), tok))
    out = tmp_path_factory.mktemp("webtiny")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "lynn_train.json").write_text(json.dumps({"context": 640}))
    (out / "lynn_web.json").write_text(json.dumps(dataclasses.asdict(fmt)))
    return out


def test_scores_match_a_plain_forward(tiny: Path) -> None:
    """The cached, batched scoring equals the log-likelihood from one full forward per reply."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.lm.tokenizer import encode_chat

    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    tok = AutoTokenizer.from_pretrained(tiny)
    msgs = [{"role": "user", "content": 'Goal: buy a lamp\nElements:\nlink "Lamp"'}]
    replies = ['click link "Lamp"', 'answer "done"', "go_back"]
    got = score_replies(model, tok, msgs, replies)
    prompt = encode_chat(tok, msgs, add_generation_prompt=True)
    for r, g in zip(replies, got, strict=True):
        full = encode_chat(tok, [*msgs, {"role": "assistant", "content": r}], add_generation_prompt=False)
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([full])).logits[0].float(), -1)
        want = sum(float(logp[i - 1, full[i]]) for i in range(len(prompt), len(full)))
        assert g == pytest.approx(want, abs=1e-3)


def test_every_chosen_action_parses_and_names_a_page_element(tiny: Path) -> None:
    from lynn.agents.llm import LMPolicy

    agent = LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(tiny))
    assert agent.web_prompt == "ranked"
    for s in STEPS[:12]:
        agent.reset(seed=0)
        action = agent.act(_obs(s), {})
        parse_action(action)  # raises on an unparsable action
        ref = action_ref(action)
        if action.split("(")[0] not in ("goto", "send_msg_to_user", "go_back"):
            assert ref in {e.ref for e in parse_page(s["axtree"])}
        assert agent.replies[0][-1]  # the reply is kept as history
    assert agent.prompt_tokens > 0


def test_history_follows_the_episode(tiny: Path) -> None:
    from lynn.agents.llm import LMPolicy

    agent = LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(tiny))
    agent.reset(seed=0)
    s = STEPS[0]
    a1 = agent.act(_obs(s), {})
    agent.act(_obs(s, last=a1), {})
    assert len(agent.replies[0]) == 2
    agent.act(_obs(s, last=None), {})  # a new episode
    assert len(agent.replies[0]) == 1


def test_old_models_keep_the_cut_prompt(tiny: Path, tmp_path: Path) -> None:
    """A model folder without lynn_web.json loads with the old renderer; ranked needs the format file."""
    import shutil

    from lynn.agents.llm import LMPolicy

    old = tmp_path / "old"
    shutil.copytree(tiny, old)
    (old / "lynn_web.json").unlink()
    agent = LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(old))
    assert agent.web_prompt == "cut" and agent.chooser is None
    assert "Page:\n" in agent.messages(_obs(STEPS[0]))[-1]["content"]
    with pytest.raises(ValueError, match="lynn_web.json"):
        LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(old), web_prompt="ranked")
    forced = LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(tiny), web_prompt="cut")
    assert forced.chooser is None


def test_multi_part_answers_are_page_spans(tiny: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.lm.web_candidates import WebFormat, answer_spans

    fmt = WebFormat(**json.loads((tiny / "lynn_web.json").read_text()))
    ch = RankedChooser(AutoModelForCausalLM.from_pretrained(tiny), AutoTokenizer.from_pretrained(tiny), fmt)
    s = STEPS[0]
    obs = _obs(s)
    units = top_units(obs, [], fmt)
    msgs = [{"role": "user", "content": "x"}]
    reply, action = ch._extend(msgs, units, "1", -1e9)  # any extension beats -inf: it must add page spans
    text = action[len("send_msg_to_user(") + 1 : -2]
    spans = set(answer_spans(units))
    parts = [p for chunk in text.split("; ") for p in chunk.split(", ")]
    assert len(parts) >= 2 and all(p in spans or p == "1" for p in parts)
    parse_action(action)
    assert reply.startswith("answer ")
    assert any(r == reply for r, _ in [(reply, action)])
    assert candidates(obs, units, fmt)  # the candidate set itself is not empty


def _demo_steps(fmt_steps: list[dict]) -> list[dict]:
    from lynn.lm.web_candidates import reply_for

    out = []
    for s in fmt_steps:
        obs = {**_obs(s), "goal": s["goal"]}
        out.append({**s, "obs": obs, "reply": reply_for(s["action"], obs)})
    return [s for s in out if s["reply"]]


def test_mined_negatives_are_the_miners_best_scored_wrong_candidates(tiny: Path) -> None:
    """``ranked_demos(negatives=n, miner=...)`` keeps, per step, the n wrong candidate replies the miner scores
    highest (the mistakes it would make), never the expert's own reply; without a miner a seeded draw."""
    from lynn.lm.backends import TransformersGenerator
    from lynn.lm.web_candidates import WebFormat, ranked_demos, render_ranked

    gen = TransformersGenerator(tiny, threads=1)
    fmt = WebFormat(**json.loads((tiny / "lynn_web.json").read_text()))
    steps = _demo_steps([s for s in STEPS if s["split"] == "train"][:6])
    mined = ranked_demos(steps, fmt, negatives=3, miner=(gen.model, gen.tokenizer))
    drawn = ranked_demos(steps, fmt, negatives=3)
    assert len(mined) == len(steps) and ranked_demos(steps, fmt, negatives=3)[0].extra == drawn[0].extra
    for st, d in zip(steps, mined, strict=True):
        units = top_units(st["obs"], st["replies"], fmt)
        wrong = [r for r, _ in candidates(st["obs"], units, fmt) if r != st["reply"]]
        negs = d.extra["negatives"]
        assert len(negs) == 3 and st["reply"] not in negs and set(negs) <= set(wrong)
        msgs = render_ranked(st["obs"], st["replies"], fmt, units)
        sc = dict(zip(wrong, score_replies(gen.model, gen.tokenizer, msgs, wrong), strict=True))
        assert min(sc[n] for n in negs) >= max(sc[w] for w in wrong if w not in negs) - 1e-4
    assert any(a.extra != b.extra for a, b in zip(mined, drawn, strict=True))


def test_a_dagger_round_labels_the_learners_own_states_on_train_instances(tiny: Path, tmp_path: Path) -> None:
    """``python -m lynn.agents.llm.web_dagger_round`` rolls the model out on train instances only and records, at each state
    it visited, the expert's label beside the action the learner executed."""
    from lynn.agents.llm.web_dagger_round import main
    from lynn.lm.web_dagger import read_records

    out = tmp_path / "round1.jsonl"
    assert main(["--model", str(tiny), "--out", str(out), "--limit", "2", "--max-steps", "2"]) == 0
    recs = read_records(out)
    assert recs and {r["split"] for r in recs} == {"train"} and len({r["task_id"] for r in recs}) == 2
    for r in recs:
        assert r["action"] and r["executed"] and r["source"] == "dagger"
        parse_action(r["action"])
    assert [r["history"] for r in recs if r["step"] == 1] == [
        [r["executed"]]
        for r in recs
        if r["step"] == 0 and any(x["episode"] == r["episode"] and x["step"] == 1 for x in recs)
    ]


def test_memory_weight_zero_is_the_lm_alone(tiny: Path, tmp_path: Path) -> None:
    """``memory_weight=0`` (DynaWeb's LM-alone start) decides as the same LM without an action memory."""
    import shutil

    from lynn.agents.llm import LMPolicy
    from lynn.lm.web_candidates import reply_for
    from lynn.lm.web_memory import MEMORY_FILE, ActionMemory

    mixed = tmp_path / "mixed"
    shutil.copytree(tiny, mixed)
    train = [
        {**s, "obs": _obs(s), "reply": reply_for(s["action"], _obs(s))}
        for s in STEPS
        if s["split"] == "train"
    ]
    ActionMemory.build(train, min_episodes=1).save(mixed / MEMORY_FILE)
    fmt = json.loads((mixed / "lynn_web.json").read_text())
    (mixed / "lynn_web.json").write_text(json.dumps({**fmt, "memory_weight": 0.9}))
    default = LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(mixed))
    alone = LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(mixed), memory_weight=0)
    plain = LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(tiny))
    assert default.chooser.fmt.memory_weight == 0.9 and alone.chooser.fmt.memory_weight == 0.0
    steps = [s for s in STEPS if s["split"] == "train"][:4]
    acts = {name: [] for name in ("default", "alone", "plain")}
    for s in steps:
        for name, agent in (("default", default), ("alone", alone), ("plain", plain)):
            agent.reset(seed=0)
            acts[name].append(agent.act(_obs(s), {}))
    assert acts["alone"] == acts["plain"]
    assert (
        acts["default"] != acts["plain"]
    )  # the memory (0.9) recalls the expert's replies the tiny LM misses
    with pytest.raises(ValueError, match="memory_weight"):
        LMPolicy(env_id="Lynn/LiveWeb-v0", model=str(tiny), web_prompt="cut", memory_weight=0)
