"""``lynn train lm``: a tiny target learns the demonstrations, saves/loads, resumes; a draft is distilled."""

from __future__ import annotations

import json
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


def test_a_run_cut_by_max_minutes_still_anneals(evm_demos: Path, tmp_path: Path) -> None:
    """With a time budget far below the planned epochs, the cosine decay is fitted into the budget: the run
    stops at the budget and its learning rate has come down (it used to stop near the peak, never annealed)."""
    peak = 3e-3
    summary = train_lm(
        TrainConfig(
            data=str(evm_demos),
            out=str(tmp_path / "cut"),
            size="tiny",
            epochs=400,
            batch_size=2,
            lr=peak,
            max_minutes=0.25,
            progress=False,
            threads=1,
        )
    )
    assert summary["steps"] < summary["planned_steps"] / 4  # cut by the clock
    assert summary["minutes"] >= 0.9 * 0.25  # ... and only by the clock: it used its budget
    assert summary["final_lr"] is not None and summary["final_lr"] < 0.35 * peak, summary["final_lr"]


def test_budget_schedule_is_transformers_cosine_until_the_clock_binds() -> None:
    import torch
    from transformers.optimization import get_cosine_schedule_with_warmup

    from lynn.lm.train import _cosine_lambda

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    ref = get_cosine_schedule_with_warmup(opt, 50, 1000).lr_lambdas[0]
    ours = _cosine_lambda(50, 1000)
    assert max(abs(ref(s) - ours(s)) for s in range(1001)) < 1e-12
    half_spent = _cosine_lambda(50, 1000, spent=lambda: 0.5)  # the clock is ahead of the steps
    assert half_spent(10) == pytest.approx(ref(500)) and half_spent(900) == pytest.approx(ref(900))
    assert _cosine_lambda(50, 1000, spent=lambda: 1.2)(10) == pytest.approx(0.0, abs=1e-12)
