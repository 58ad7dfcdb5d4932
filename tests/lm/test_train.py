"""``lynn train lm``: a tiny target learns the demonstrations, saves/loads, resumes; a draft is distilled."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lynn.lm.train import SIZES, TrainConfig, model_config, train_lm


def test_target_learns_saves_and_loads(tiny_lm: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    summary = json.loads((tiny_lm / "lynn_train.json").read_text())
    losses = [loss for _, loss in summary["loss_history"]]
    assert len(losses) >= 3 and losses[-1] < 0.5 * losses[0]  # it learned, not just ran
    assert summary["role"] == "target" and summary["dropped_too_long"] == 0
    assert (tiny_lm / "loss.png").stat().st_size > 1000
    model = AutoModelForCausalLM.from_pretrained(tiny_lm)
    tok = AutoTokenizer.from_pretrained(tiny_lm)
    assert model.config.vocab_size == len(tok) and tok.chat_template
    assert sum(p.numel() for p in model.parameters()) == summary["parameters"]


def test_trained_target_reproduces_a_training_reply(tiny_lm: Path, evm_demos: Path) -> None:
    """Greedy decoding of a training prompt gives (nearly) the demonstrated reply: the loss mask and the
    chat template used at training time are the ones used at generation time."""
    from lynn.lm.backends import TransformersGenerator
    from lynn.lm.data import read_demos

    demo = next(d for d in read_demos(evm_demos) if d.task_id == "query_gas_price")
    gen = TransformersGenerator(tiny_lm, threads=1)
    out = gen.generate([demo.messages[:-1]], max_new_tokens=120)[0]
    want = demo.messages[-1]["content"]
    same = sum(a == b for a, b in zip(out.text, want, strict=False))
    assert same >= 0.8 * len(want), (out.text, want)


def test_resume_continues_from_the_checkpoint(evm_demos: Path, tmp_path: Path) -> None:
    cfg = TrainConfig(
        data=str(evm_demos), out=str(tmp_path), size="tiny", epochs=1, progress=False, threads=1
    )
    first = train_lm(cfg)
    assert list((tmp_path / "checkpoints").glob("checkpoint-*"))
    cfg.epochs, cfg.resume = 2, True
    second = train_lm(cfg)
    assert second["steps"] == 2 * first["steps"]
    steps = [step for step, _ in second["loss_history"]]
    assert steps == sorted(set(steps)) and steps[-1] > first["steps"]  # one history, continued


def test_draft_is_distilled_on_the_target_outputs(tiny_lm: Path, evm_demos: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    s = train_lm(
        TrainConfig(
            data=str(evm_demos),
            out=str(tmp_path),
            size="tiny",
            role="draft",
            teacher=str(tiny_lm),
            epochs=1,
            progress=False,
            threads=1,
        )
    )
    assert s["role"] == "draft"
    assert (
        AutoTokenizer.from_pretrained(tmp_path).get_vocab()
        == AutoTokenizer.from_pretrained(tiny_lm).get_vocab()
    )


def test_draft_preset_is_at_most_an_eighth_of_small() -> None:
    from transformers import AutoModelForCausalLM

    from lynn.lm.tokenizer import train_tokenizer

    tok = train_tokenizer(["abc def"] * 3, vocab_size=300, min_frequency=1)
    n = {
        size: sum(
            p.numel() for p in AutoModelForCausalLM.from_config(model_config(size, 4096, tok)).parameters()
        )
        for size in ("draft", "small")
    }
    assert n["small"] >= 20e6 and n["draft"] <= n["small"] / 8
    assert set(SIZES) >= {"tiny", "small", "draft"}


def test_bad_options_are_clear(evm_demos: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="teacher"):
        train_lm(TrainConfig(data=str(evm_demos), out=str(tmp_path), role="draft"))
    with pytest.raises(ValueError, match="unknown size"):
        train_lm(TrainConfig(data=str(evm_demos), out=str(tmp_path), size="huge"))
    with pytest.raises(FileNotFoundError, match="lynn collect"):
        train_lm(TrainConfig(data=str(tmp_path / "nothing"), out=str(tmp_path)))


def _weights(folder: Path) -> dict:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).state_dict()


def test_fixed_steps_are_reproducible_and_a_capped_run_resumes_to_the_same_weights(
    evm_demos: Path, tmp_path: Path
) -> None:
    """Same data, seed and steps give the same weights; a run stopped by ``max_minutes`` says so, keeps its
    checkpoint, and ``resume`` takes it on to the weights of the uncut run (one model over several runs)."""
    import torch

    def cfg(out: str, **kw: object) -> TrainConfig:
        return TrainConfig(
            data=str(evm_demos),
            out=str(tmp_path / out),
            size="tiny",
            steps=6,
            batch_size=4,
            lr=3e-3,
            progress=False,
            threads=1,
            **kw,
        )

    a, _ = train_lm(cfg("a")), train_lm(cfg("b"))
    assert a["steps"] == a["planned_steps"] == 6 and a["complete"] and not a["capped_by_minutes"]
    assert a["cpu_minutes"] > 0
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    other_seed = train_lm(cfg("s", seed=1))
    assert other_seed["steps"] == 6
    ws = _weights(tmp_path / "s")
    assert not all(torch.equal(wa[k], ws[k]) for k in wa)  # the seed matters: the test can fail

    cut = train_lm(cfg("c", max_minutes=1e-6))  # the cap binds after the first step
    assert cut["capped_by_minutes"] and not cut["complete"] and cut["steps"] < 6
    summary = json.loads((tmp_path / "c" / "lynn_train.json").read_text())
    assert summary["capped_by_minutes"]
    done = train_lm(cfg("c", resume=True))
    assert done["complete"] and done["steps"] == 6 and done["resumed_from_step"] == cut["steps"]
    wc = _weights(tmp_path / "c")
    worst = max(float((wa[k] - wc[k]).abs().max()) for k in wa)
    assert worst < 1e-6, worst


def test_epochs_resolve_to_steps(evm_demos: Path, tmp_path: Path) -> None:
    s = train_lm(
        TrainConfig(
            data=str(evm_demos),
            out=str(tmp_path),
            size="tiny",
            epochs=0.5,
            batch_size=4,
            progress=False,
            threads=1,
        )
    )
    assert s["planned_steps"] == s["steps"] == math.ceil(math.ceil(s["examples"] / 4) * 0.5)


def _choice_demos(path: Path) -> None:
    """Demos where the expert's reply is a long copy of the goal's name on two of three prompts and the short,
    frequent ``answer "done"`` on the third: the likely-but-wrong short reply is every long step's negative."""
    import random

    from lynn.lm.data import Demo, write_demos

    rng = random.Random(0)
    words = ["alpha", "bravo", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"]
    demos = []
    for i in range(96):
        name = " ".join(rng.sample(words, 3))
        other = " ".join(rng.sample(words, 3))
        finish = i % 3 == 0
        goal = "finish now" if finish else f"open {name}"
        reply = 'answer "done"' if finish else f'click link "{name}"'
        wrong = [f'click link "{name}"'] if finish else ['answer "done"', f'click link "{other}"']
        user = f'Goal: {goal}\nElements:\nlink "{name}"\nlink "{other}"'
        demos.append(
            Demo(
                [
                    {"role": "system", "content": "web"},
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": reply},
                ],
                "Lynn/LiveWeb-v0",
                f"t{i}",
                0,
                "train",
                0,
                "expert",
                True,
                {"negatives": wrong},
            )
        )
    write_demos(path / "demos.jsonl", demos, append=False)


def _choice_accuracy(model_dir: Path, data: Path) -> float:
    from lynn.lm.backends import TransformersGenerator
    from lynn.lm.data import read_demos
    from lynn.lm.web_candidates import score_replies

    gen = TransformersGenerator(model_dir, threads=1)
    hits = []
    for d in read_demos(data):
        replies = [d.messages[-1]["content"], *d.extra["negatives"]]
        sc = score_replies(gen.model, gen.tokenizer, d.messages[:-1], replies)
        hits.append(max(range(len(sc)), key=sc.__getitem__) == 0)
    return sum(hits) / len(hits)


def test_choice_loss_fits_the_decision_the_policy_takes(tmp_path: Path) -> None:
    """With ``choice_loss`` the expert's reply outscores the listed wrong replies (the policy's argmax rule) on
    nearly every step; the token loss alone, same seed and steps, prefers the short frequent reply more often."""
    _choice_demos(tmp_path)

    def run(out: str, weight: float) -> dict:
        return train_lm(
            TrainConfig(
                data=str(tmp_path / "demos.jsonl"),
                out=str(tmp_path / out),
                size="tiny",
                steps=60,
                batch_size=8,
                lr=3e-3,
                progress=False,
                threads=1,
                choice_loss=weight,
                choice_negatives=2,
            )
        )

    plain, choice = run("plain", 0.0), run("choice", 1.0)
    assert plain["steps"] == choice["steps"] == 60
    acc_plain = _choice_accuracy(tmp_path / "plain", tmp_path / "demos.jsonl")
    acc_choice = _choice_accuracy(tmp_path / "choice", tmp_path / "demos.jsonl")
    assert acc_choice >= 0.9, (acc_plain, acc_choice)
    assert acc_choice > acc_plain, (acc_plain, acc_choice)


def test_packed_choice_rows_score_each_reply_as_if_it_followed_the_prompt_alone(tmp_path: Path) -> None:
    """The choice loss's packed row (prompt, own reply, wrong replies under a block mask) gives every reply
    the summed log-likelihood :func:`score_replies` gives it at act time, and the loss is that group's
    cross-entropy plus the own reply's token loss."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from lynn.lm.data import read_demos
    from lynn.lm.tokenizer import encode_example, train_tokenizer
    from lynn.lm.train import _choice_replies, _choice_trainer, _Collator
    from lynn.lm.web_candidates import score_replies

    _choice_demos(tmp_path)
    demos = read_demos(tmp_path / "demos.jsonl")[:4]
    tok = train_tokenizer([m["content"] for d in demos for m in d.messages], vocab_size=300)
    tok.save_pretrained(str(tmp_path / "tok"))
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok")
    torch.manual_seed(0)
    model = LlamaForCausalLM(model_config("tiny", len(tok), tok)).eval()
    exs = []
    for d in demos:
        ex = encode_example(tok, d.messages, 256)
        ex["choices"] = _choice_replies(tok, d.messages, d.extra["negatives"])
        exs.append(ex)
    batch = _Collator(tok.pad_token_id)(exs)
    want = []
    for d in demos:
        sc = score_replies(model, tok, d.messages[:-1], [d.messages[-1]["content"], *d.extra["negatives"]])
        want.append(torch.log_softmax(torch.tensor(sc), 0)[0])
    trainer = _choice_trainer(object, 1.0)
    loss = trainer.compute_loss(trainer.__new__(trainer), model, dict(batch))
    plain = _Collator(tok.pad_token_id)._pad(exs)
    with torch.no_grad():
        nll = model(**plain).loss  # mean token loss of the own replies
    expected = nll + (-torch.stack(want)).mean()
    assert abs(float(loss) - float(expected)) < 1e-4, (float(loss), float(expected))


def test_choice_sample_draws_a_seeded_subset_anew_each_time() -> None:
    from lynn.lm.train import _Collator

    ex = {"input_ids": [1, 2, 3, 4], "labels": [-100, -100, 3, 4], "choices": [[10 + i] for i in range(12)]}
    a, b = _Collator(0, sample=3, seed=0), _Collator(0, sample=3, seed=0)
    first = [a._draw(ex)["choices"] for _ in range(4)]
    assert first == [b._draw(ex)["choices"] for _ in range(4)]  # same seed, same draws
    assert all(len(c) == 3 and all(x in ex["choices"] for x in c) for c in first)
    assert len({str(c) for c in first}) > 1  # a fresh draw each time the demo is batched
