"""``lynn train world-model`` and ``lynn train reward-model``.

World model: from ``lynn collect`` transitions (train split, held-out templates removed unless
``all_templates``), build one (prompt, Δ) pair per transition (:mod:`.model`: the retrieved Δ in each
prompt comes from *another* task instance, as it will at test time), then train a LLaMA-style LM with
:func:`lynn.lm.train.train_lm` (transformers' ``Trainer``: progress bar, checkpoints, resume, loss PNG,
``save_pretrained``). ``lynn.lm`` trains on chat demonstrations whose prompt it may cut from the left;
our pairs are written as demonstrations that already fit the context (the page cut by whole lines, the
Δ cut to the reply budget), with a tokenizer trained first on the pairs themselves and handed over as a
fresh initial model (``base``), so nothing in ``lynn.lm`` needed changing.

The output folder: ``worldmodel.json`` (kind, context, reply budget, held-out templates), ``memory.jsonl``
(the training transitions: retrieval and page memory), ``starts.jsonl`` (real start pages of every task
instance seen in the data, any split: what the env resets to), ``lm/`` (the model) and ``reward.json``
when a reward model is trained. ``kind="nearest"``/``"memory"`` write no LM (seconds).
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lynn.config_flags import add_config_flags, config_from_args
from lynn.envs.worldmodel.data import HELDOUT_TEMPLATES, read_transitions, start_pages, training_split
from lynn.envs.worldmodel.delta import END, compute_delta
from lynn.envs.worldmodel.model import (
    CONFIG_FILE,
    CORRECT_SYSTEM,
    MEMORY_FILE,
    MODES,
    REPLY_TOKENS,
    STARTS_FILE,
    WM_SYSTEM,
    correction_prompt,
    correction_text,
    fit_prompt,
    world_prompt,
)
from lynn.lm.train import SIZES

KINDS = ("lm", "memory", "nearest", "copy")
DEV_MEMORY_FILE = "dev_memory.jsonl"
DEV_FILE = "dev.jsonl"


@dataclass
class WorldModelConfig:
    """``lynn train world-model`` options (its flags are these fields).

    Attributes:
        data: ``lynn collect Lynn/LiveWeb-v0`` output folders/files with transitions (train split used for
            training; every split's start pages are recorded for the env).
        out: output folder.
        kind: ``lm`` (a trained LM), ``memory`` (page memory + nearest neighbour), ``nearest``, ``copy``
            (the last three train nothing).
        size: the LM's preset (``lynn.lm.train.SIZES``).
        context: tokens per example.
        reply_tokens: the Δ budget within ``context``.
        epochs: training epochs (they fix the steps).
        max_minutes: cap on training minutes (default none: ``epochs`` fix the steps; a binding cap is
            reported).
        batch_size: examples per optimiser step.
        lr: learning rate.
        seed: seed of the data order and the model's initialisation.
        resume: continue a run cut short in ``out``.
        progress: show a progress bar.
        threads: torch threads (1 is fastest on a loaded 2-core machine).
        all_templates: also train on the held-out templates (else ``heldout`` are held out).
        vocab_size: BPE vocabulary of the LM.
        mode: ``full`` (the LM writes the whole Δ; the retrieved Δ in its prompt is only adapted) or
            ``correct`` (its prompt carries the retrieved Δ *transferred* to the step and the page lines
            near the acted-on element; it writes the correction of that guess: :mod:`.model`).
        dev_every: hold every k-th training task instance (sorted ids) out of the LM's pairs: a train-only
            dev split for choosing options (``dev.jsonl``; ``dev_memory.jsonl`` = the training rows
            without it, the retrieval memory to measure the dev split with). ``memory.jsonl`` keeps every
            training row. 0: none.
        margin: ``correct`` mode: keep a non-empty correction only when the LM gives it at least this many
            nats more log-probability than the empty one (0: the more likely of the two; ``None``: keep
            every correction; ``--keep-all-corrections``). Written to ``worldmodel.json``; chosen on the dev
            split (see BENCHMARKS).
        heldout: the templates held out of training (default :data:`HELDOUT_TEMPLATES`).
    """

    data: list[str] = field(metadata={"nargs": "+", "metavar": "PATH"})
    out: str
    kind: str = field(default="lm", metadata={"choices": KINDS})
    size: str = field(default="base", metadata={"choices": tuple(SIZES)})
    context: int = 1024
    reply_tokens: int = REPLY_TOKENS
    epochs: float = 6.0
    max_minutes: float | None = None  # a cap only: training is ``epochs`` (fixed steps); reported if it binds
    batch_size: int = 8
    lr: float = 2e-3
    seed: int = 0
    resume: bool = False
    progress: bool = True
    threads: int | None = None
    all_templates: bool = False
    vocab_size: int = 4096
    mode: str = field(default="full", metadata={"choices": MODES})
    dev_every: int = 0
    margin: float | None = 0.0
    heldout: list[str] = field(default_factory=lambda: list(HELDOUT_TEMPLATES))


@dataclass
class RewardModelConfig:
    """``lynn train reward-model`` options (its flags are these fields; the training is
    :func:`lynn.envs.worldmodel.reward_model.train_reward_model`, which writes ``reward.json``).

    Attributes:
        data: ``lynn collect Lynn/LiveWeb-v0`` output folders/files with transitions (train split used for
            fitting; the held-out sets are measured).
        out: output folder (``reward.json`` goes in it; a world model's folder may share it).
        seed: seed of the drawn negatives (wrong answers, cut episodes) and of the templates treated as unseen.
        all_templates: also fit on the held-out templates (else they are held out).
    """

    data: list[str] = field(metadata={"nargs": "+", "metavar": "PATH"})
    out: str
    seed: int = 0
    all_templates: bool = False


def cut_reply(text: str, count: Any, budget: int) -> str:
    """``text`` (a Δ ending with ``[End]``) cut after whole lines to fit ``budget`` tokens, closed with ``[End]``."""
    if count(text) <= budget:
        return text
    lines = text.split("\n")[:-1]
    lo, hi = 6, len(lines)  # the header and fields always stay
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count("\n".join(lines[:mid] + [END])) <= budget:
            lo = mid
        else:
            hi = mid
    return "\n".join(lines[:lo] + [END])


def training_pairs(
    rows: list[dict[str, Any]], seed: int = 0, mode: str = "full"
) -> list[tuple[list[dict[str, str]], str, dict]]:
    """(prompt messages, reply, record) per transition; retrieval excludes the transition's own instance
    (as at test time). ``full``: the reply is the true Δ; ``correct``: the correction of the transferred
    retrieved Δ (:func:`lynn.envs.worldmodel.model.correction_text`)."""
    from lynn.envs.worldmodel.baselines import NearestNeighbourModel
    from lynn.envs.worldmodel.delta import apply_delta

    nn = NearestNeighbourModel(rows)
    own: dict[str, list[int]] = {}
    for i, (_f, r) in enumerate(nn.rows):
        own.setdefault(r["task_id"], []).append(i)
    pairs = []
    for r in rows:
        keep = nn.rows
        nn.rows = [x for x in keep if x[1]["task_id"] != r["task_id"]] or keep
        goal = r.get("goal", "")
        try:
            row = nn.neighbour(goal, r["obs"], r["action"])
            if mode == "correct":
                guess = nn.transferred(goal, r["obs"], r["action"], row)
            else:
                guess = nn.adapted(r["obs"], row)
        finally:
            nn.rows = keep
        if mode == "correct":
            guess_obs, _ = apply_delta(r["obs"], guess, r["action"])
            reply = correction_text(r["obs"], guess_obs, r["action"], r["next_obs"], guess)
            prompt = correction_prompt(goal, r["obs"], r["action"], guess.to_text())
        else:
            reply = compute_delta(r["obs"], r["action"], r["next_obs"]).to_text()
            prompt = world_prompt(goal, r["obs"], r["action"], guess.to_text())
        pairs.append((prompt, reply, r))
    random.Random(seed).shuffle(pairs)
    return pairs


def _write_common(
    out: Path, rows: list[dict[str, Any]], train: list[dict[str, Any]], cfg: WorldModelConfig
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / MEMORY_FILE).open("w", encoding="utf-8") as fh:
        for r in train:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    with (out / STARTS_FILE).open("w", encoding="utf-8") as fh:
        for s in start_pages(rows):
            fh.write(json.dumps(s, ensure_ascii=False) + "\n")


def train_world_model(cfg: WorldModelConfig) -> dict[str, Any]:
    """Train (or resume) a world model; returns the summary also written to ``worldmodel.json``."""
    if cfg.kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {cfg.kind!r}")
    if cfg.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {cfg.mode!r}")
    started = time.monotonic()
    rows = read_transitions(*cfg.data)
    train = (
        [r for r in rows if r.get("split") == "train"]
        if cfg.all_templates
        else training_split(rows, cfg.heldout)
    )
    if not train:
        raise ValueError(
            f"no train-split transitions in {cfg.data} (collect some with `lynn collect Lynn/LiveWeb-v0 --split train`)"
        )
    out = Path(cfg.out)
    _write_common(out, rows, train, cfg)
    lm_rows = train
    if cfg.dev_every:
        ids = sorted({r["task_id"] for r in train})
        dev_ids = set(ids[:: cfg.dev_every])
        lm_rows = [r for r in train if r["task_id"] not in dev_ids]
        for name, part in (
            (DEV_MEMORY_FILE, lm_rows),
            (DEV_FILE, [r for r in train if r["task_id"] in dev_ids]),
        ):
            with (out / name).open("w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in part)
    summary: dict[str, Any] = {
        "kind": cfg.kind,
        "transitions": len(train),
        "heldout_templates": [] if cfg.all_templates else list(cfg.heldout),
        "context": cfg.context,
        "reply_tokens": cfg.reply_tokens,
        "mode": cfg.mode,
        "margin": cfg.margin if cfg.mode == "correct" else None,
        "lm_transitions": len(lm_rows),
        "config": asdict(cfg),
    }
    if cfg.kind == "lm":
        summary.update(_train_lm(cfg, lm_rows, out))
        summary["lm"] = "lm"
    summary["minutes"] = (time.monotonic() - started) / 60
    (out / CONFIG_FILE).write_text(json.dumps(summary, indent=1))
    return summary


def _train_lm(cfg: WorldModelConfig, train: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lynn.lm.backends import set_threads
    from lynn.lm.data import Demo, write_demos
    from lynn.lm.prompts import WORLDMODEL
    from lynn.lm.tokenizer import encode_chat, train_tokenizer
    from lynn.lm.train import TrainConfig, model_config, train_lm

    set_threads(cfg.threads)
    t0 = time.monotonic()
    pairs = training_pairs(train, cfg.seed, cfg.mode)
    pairs_minutes = (time.monotonic() - t0) / 60
    init = out / "init"
    if cfg.resume and (init / "tokenizer.json").exists():
        tok = AutoTokenizer.from_pretrained(init)
    else:
        texts = [m["content"] for p, _, _ in pairs for m in p] + [rep for _, rep, _ in pairs]
        tok = train_tokenizer(texts, vocab_size=cfg.vocab_size)
        import torch

        torch.manual_seed(cfg.seed)
        model = AutoModelForCausalLM.from_config(model_config(cfg.size, len(tok), tok))
        init.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(init)
        tok.save_pretrained(init)

    def count_text(t: str) -> int:
        return len(tok(t, add_special_tokens=False)["input_ids"])

    def count_msgs(m: list[dict[str, str]]) -> int:
        return len(encode_chat(tok, m))

    demos = []
    cut = 0
    for prompt, reply, r in pairs:
        rep = cut_reply(reply, count_text, cfg.reply_tokens - 2)
        cut += rep != reply
        budget = cfg.context - count_text(rep) - 4
        msgs = fit_prompt(prompt, count_msgs, budget)
        demos.append(
            Demo(
                [*msgs, {"role": "assistant", "content": rep}],
                WORLDMODEL,
                r["task_id"],
                int(r.get("seed", 0)),
                "train",
                int(r.get("step", 0)),
                "worldmodel",
                True,
            )
        )
    data_dir = out / "pairs"
    if data_dir.exists():
        for f in data_dir.glob("*.jsonl"):
            f.unlink()
    write_demos(data_dir, demos, append=False)
    lm = train_lm(
        TrainConfig(
            data=str(data_dir),
            out=str(out / "lm"),
            size=cfg.size,
            base=str(init),
            epochs=cfg.epochs,
            max_minutes=cfg.max_minutes,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            context=cfg.context,
            seed=cfg.seed,
            resume=cfg.resume,
            progress=cfg.progress,
            only_success=False,
            threads=cfg.threads,
        )
    )
    return {
        "pairs": len(demos),
        "pairs_minutes": pairs_minutes,
        "replies_cut": cut,
        "lm_summary": {
            k: lm.get(k)
            for k in (
                "parameters",
                "steps",
                "epochs_done",
                "minutes",
                "final_loss",
                "loss_png",
                "capped_by_minutes",
            )
        },
        "system": CORRECT_SYSTEM if cfg.mode == "correct" else WM_SYSTEM,
    }


def add_train_parsers(tsub: Any) -> None:
    """Add ``lynn train world-model`` and ``lynn train reward-model`` to the ``lynn train`` subparsers."""
    w = tsub.add_parser(
        "world-model", help="a web world model (Δ writer) on LiveWeb transitions, for Lynn/WebWorldModel-v0"
    )
    add_config_flags(w, WorldModelConfig)
    w.add_argument(
        "--keep-all-corrections", action="store_true", help="correct mode: no margin check (margin None)"
    )
    w.add_argument("--reward", action="store_true", help="also train the reward model into --out")
    w.set_defaults(func=_cmd_world_model)
    r = tsub.add_parser("reward-model", help="the success predictor of imagined web episodes")
    add_config_flags(r, RewardModelConfig)
    r.set_defaults(func=_cmd_reward_model)


def _cmd_world_model(args: Any) -> int:
    cfg = config_from_args(WorldModelConfig, args, **({"margin": None} if args.keep_all_corrections else {}))
    summary = train_world_model(cfg)
    shown = {k: v for k, v in summary.items() if k not in ("config", "system")}
    print(json.dumps(shown, indent=1))
    if args.reward:
        _cmd_reward_model(args)
    return 0


def _cmd_reward_model(args: Any) -> int:
    """``lynn train reward-model`` (and ``lynn train world-model --reward``: its fields of the same names)."""
    from lynn.envs.worldmodel.reward_model import train_reward_model

    cfg = config_from_args(RewardModelConfig, args)
    print(
        json.dumps(
            train_reward_model(list(cfg.data), cfg.out, seed=cfg.seed, all_templates=cfg.all_templates),
            indent=1,
        )
    )
    return 0
