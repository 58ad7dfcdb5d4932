"""``lynn train lm``: a LLaMA-style causal LM trained in-repo on demonstrations, and its draft.

The **target** is trained on ``lynn collect`` demonstrations (loss on the assistant's reply only) with
transformers' ``Trainer``: its progress bar, checkpoints and ``resume_from_checkpoint`` are used as
they are; we add only the data encoding (:func:`lynn.lm.tokenizer.encode_example`), a wall-clock cap
(``max_minutes``), a loss-curve PNG and a ``lynn_train.json`` summary.

Training is reproducible: a run is a fixed number of optimiser steps (``steps``, or ``epochs`` resolved to
steps), the learning-rate schedule is a function of the step alone, and the same data, seed and steps give
the same weights. ``max_minutes`` is only a cap: when it binds the run stops at a checkpoint, the summary
says so (``capped_by_minutes``), and ``resume=True`` continues the same schedule to the same result, so one
model can be trained over several runs. The **draft** (for speculative
decoding) is distilled at the sequence level: the target's greedy replies to the training prompts
replace the demonstrations' replies, and the draft shares the target's tokenizer (speculative decoding
needs one vocabulary).

Any local Hugging Face causal-LM folder can stand in for an in-repo model (``--base`` fine-tunes one;
:mod:`lynn.lm.backends` loads one).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Model presets: hidden size, layers, heads, MLP width, default context, default vocabulary.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 64, "layers": 2, "heads": 4, "mlp": 192, "context": 640, "vocab": 1024},
    # ~0.49M parameters at a 4096 vocabulary: at most 1/8 of `base` (4.3M), 1/40 of `small` (21M).
    "draft": {"hidden": 80, "layers": 2, "heads": 4, "mlp": 224, "context": 768, "vocab": 4096},
    # ~1.2M parameters (about half of them the tied embedding): EVMQuest compact scripts on a loaded 2-core
    # machine (a third of `base`'s compute per token, head dim 32 where `draft` has 20).
    "mid": {"hidden": 128, "layers": 4, "heads": 4, "mlp": 352, "context": 640, "vocab": 4096},
    "base": {"hidden": 256, "layers": 4, "heads": 8, "mlp": 704, "context": 768, "vocab": 4096},
    "small": {"hidden": 512, "layers": 6, "heads": 8, "mlp": 1408, "context": 1024, "vocab": 4096},
}
SUMMARY_FILE = "lynn_train.json"


@dataclass
class TrainConfig:
    """``lynn train lm`` options.

    Attributes:
        data: ``demos*.jsonl`` file or folder (train instances only; see :mod:`lynn.lm.data`).
        out: output folder (``save_pretrained`` model + tokenizer, ``checkpoints/``, ``loss.png``).
        size: preset in :data:`SIZES`.
        role: ``target`` (trained on the demonstrations) or ``draft`` (distilled from ``teacher``).
        teacher: the target folder a draft learns from (its tokenizer is reused); a zoo name works
            (``zoo:evm-lm``, checked against its card).
        base: fine-tune this local HF causal LM (and its tokenizer) instead of a fresh model (or a zoo name).
        epochs: passes over the data, resolved to ``ceil(examples / batch_size * epochs)`` steps (used
            when ``steps`` is not given).
        steps: optimiser steps of the whole run (the schedule's length; a resumed run goes on to it).
        max_minutes: a cap on this run's training time: when it binds, the run stops at a checkpoint and the
            summary's ``capped_by_minutes`` is true (``resume`` continues it to ``steps``).
        batch_size: examples per optimiser step.
        lr: peak learning rate (linear warm-up 5%, cosine decay).
        context: max tokens per example (default: the preset's).
        vocab_size: BPE vocabulary (default: the preset's).
        seed: seeds data order and initialisation.
        resume: continue from the newest checkpoint in ``out/checkpoints``.
        progress: show the progress bar.
        only_success: train only on steps of successful episodes.
        minimal_abi: train on EVMQuest replies whose ABI JSON is cut to what web3 reads
            (:func:`lynn.lm.prompts.minimal_abi`): the model then writes the short form itself.
        threads: torch threads (default ``LYNN_TORCH_THREADS`` or torch's own).
        compact: train on EVMQuest replies in the compact script form
            (:func:`lynn.envs.evmquest.compact.compact_script`: ``abi("Contract", "fn")`` instead of inline
            ABI JSON; the agent's parser expands it back). The form reads the env's ABIs, so the caller
            passes ``train_lm(cfg, reply_transform=compact_reply)`` (``lynn train lm --compact`` does).
        choice_loss: weight of the multiple-choice loss (0: plain next-token loss). A demonstration whose
            ``extra["negatives"]`` lists wrong replies at that step (LiveWeb's candidate actions, see
            :mod:`lynn.lm.web_candidates`) adds the cross-entropy of the expert's reply among itself and
            ``choice_negatives`` of them, each scored by its summed log-likelihood: the very score the policy
            takes the best candidate by, so training fits the decision the agent makes, not only the reply's
            tokens (a model trained on the tokens alone learns that short replies are likely and answers
            before it has navigated). Negatives are taken in the listed order (hardest first when mined).
        choice_negatives: wrong replies per demonstration in the multiple-choice loss (-1: all it lists, e.g.
            the step's whole candidate set). A demonstration with ``extra["choice_only"]`` (a step of a
            multi-part answer, :func:`lynn.lm.web_candidates.ranked_demos`) enters this loss only.
        slots: EVMQuest literal slots (:mod:`lynn.lm.slots`): the task line's literals are masked in prompt
            and reply, so the model writes ``@A1`` where it would copy 40 hex digits; recorded in the summary,
            which is how :class:`lynn.agents.llm.LMPolicy` knows to mask and unmask at act time.
        history: EVMQuest: each prompt gets the ``Done:`` line of its episode's earlier steps
            (:func:`lynn.lm.prompts.with_evm_history`), rebuilt from the demonstrations of steps 0..k-1 of the
            same task and seed that precede it; recorded in the summary for the policy, like ``slots``.
    """

    data: str
    out: str
    size: str = field(default="small", metadata={"help": f"model preset: {' | '.join(SIZES)}"})
    role: str = field(default="target", metadata={"choices": ("target", "draft")})
    teacher: str | None = None
    base: str | None = None
    epochs: float = 3.0
    steps: int | None = None
    max_minutes: float | None = None
    batch_size: int = 8
    lr: float = 1e-3
    context: int | None = None
    vocab_size: int | None = None
    seed: int = 0
    resume: bool = False
    progress: bool = True
    only_success: bool = True
    threads: int | None = None
    minimal_abi: bool = False
    compact: bool = False
    choice_loss: float = 0.0
    choice_negatives: int = 4
    choice_sample: bool = field(
        default=False,
        metadata={"help": "draw choice_negatives of a demo's wrong replies afresh each time it is batched"},
    )
    slots: bool = False
    history: bool = False


def model_config(size: str, vocab_size: int, tokenizer: Any) -> Any:
    from transformers import LlamaConfig

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    s = SIZES[size]
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=s["hidden"],
        intermediate_size=s["mlp"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["heads"],
        max_position_embeddings=max(2048, s["context"]),
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


class _Collator:
    """Right-pads ``input_ids``/``labels`` of a batch (training pads right; generation pads left).

    A batch whose examples carry ``choices`` (the multiple-choice loss; wrong replies' tokens) is packed
    instead: one row per example holds its prompt, its own reply and then each wrong reply, every reply
    attending to the prompt and to itself only (a 4D mask) and numbered from the prompt's end
    (``position_ids``), so each reply is scored exactly as if it followed the prompt alone. ``score_src``/
    ``score_tgt``/``score_seg`` say, per reply token, which position's logits predict it, the token, and
    the reply it belongs to (0: the example's own; -1: padding); ``nll`` weights each example's own-reply
    loss (0.0 for a choice-only example).
    """

    def __init__(self, pad_id: int, sample: int = -1, seed: int = 0) -> None:
        self.pad_id, self.sample, self.seed = pad_id, sample, seed
        self.drawn: dict[int, int] = {}

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        if any(b.get("choices") for b in batch):
            if self.sample >= 0:
                batch = [self._draw(b) for b in batch]
            return self._pack(batch)
        return self._pad(batch)

    def _draw(self, b: dict[str, Any]) -> dict[str, Any]:
        import random
        import zlib

        choices = b.get("choices") or []
        if len(choices) <= self.sample:
            return b
        key = zlib.crc32(bytes(str(b["input_ids"]), "ascii"))
        k = self.drawn.get(key, 0)
        self.drawn[key] = k + 1
        rng = random.Random(f"{self.seed}/{key}/{k}")
        return {**b, "choices": rng.sample(choices, self.sample)}

    def _pad(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        n = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), n), self.pad_id, dtype=torch.long)
        labels = torch.full((len(batch), n), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), n), dtype=torch.long)
        for i, b in enumerate(batch):
            k = len(b["input_ids"])
            ids[i, :k] = torch.tensor(b["input_ids"])
            labels[i, :k] = torch.tensor(b["labels"])
            mask[i, :k] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    def _pack(self, batch: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        rows, poss, srcs, tgts, segs, spans = [], [], [], [], [], []
        for b in batch:
            n_prompt = next(i for i, x in enumerate(b["labels"]) if x != -100)
            prompt = list(b["input_ids"][:n_prompt])
            replies = [list(b["input_ids"][n_prompt:]), *[list(c) for c in b.get("choices") or []]]
            row, pos, src, tgt, seg, span = list(prompt), list(range(n_prompt)), [], [], [], []
            for r_i, r in enumerate(replies):
                start = len(row)
                for j, t in enumerate(r):
                    src.append(n_prompt - 1 if j == 0 else start + j - 1)
                    tgt.append(t)
                    seg.append(r_i)
                row += r
                pos += [n_prompt + j for j in range(len(r))]
                span.append((start, len(r)))
            rows.append(row)
            poss.append(pos)
            srcs.append(src)
            tgts.append(tgt)
            segs.append(seg)
            spans.append((n_prompt, span))
        n, k = max(map(len, rows)), max(map(len, srcs))
        B = len(batch)
        ids = torch.full((B, n), self.pad_id, dtype=torch.long)
        pos_t = torch.zeros((B, n), dtype=torch.long)
        allow = torch.zeros((B, n, n), dtype=torch.bool)
        src_t = torch.zeros((B, k), dtype=torch.long)
        tgt_t = torch.zeros((B, k), dtype=torch.long)
        seg_t = torch.full((B, k), -1, dtype=torch.long)
        causal = torch.ones((n, n), dtype=torch.bool).tril()
        for i in range(B):
            m = len(rows[i])
            ids[i, :m] = torch.tensor(rows[i])
            pos_t[i, :m] = torch.tensor(poss[i])
            n_prompt, span = spans[i]
            allow[i, :n_prompt, :n_prompt] = causal[:n_prompt, :n_prompt]
            for start, length in span:
                allow[i, start : start + length, :n_prompt] = True
                allow[i, start : start + length, start : start + length] = causal[:length, :length]
            allow[i, m:, 0] = True  # padding rows attend somewhere (their outputs are never read)
            c = len(srcs[i])
            src_t[i, :c] = torch.tensor(srcs[i])
            tgt_t[i, :c] = torch.tensor(tgts[i])
            seg_t[i, :c] = torch.tensor(segs[i])
        mask = torch.zeros((B, 1, n, n))
        mask.masked_fill_(~allow.unsqueeze(1), torch.finfo(torch.float32).min)
        return {
            "input_ids": ids,
            "position_ids": pos_t,
            "attention_mask": mask,
            "score_src": src_t,
            "score_tgt": tgt_t,
            "score_seg": seg_t,
            "nll": torch.tensor([float(b.get("nll", 1.0)) for b in batch]),
        }


def _choice_replies(tokenizer: Any, messages: list[dict[str, str]], negatives: list[str]) -> list[list[int]]:
    """The wrong replies' tokens (with the end-of-turn token), as they follow the example's prompt.

    The replies are encoded in one batch as ``reply + end-of-turn`` text (a chat template per reply costs
    seconds per thousand, and a LiveWeb step has ~50); the first is checked against the template's own
    encoding, and a template where the two differ falls back to one template call per reply."""
    from lynn.lm.tokenizer import encode_chat

    head = encode_chat(tokenizer, messages[:-1], add_generation_prompt=True)

    def slow(neg: str) -> list[int]:
        full = encode_chat(
            tokenizer, [*messages[:-1], {"role": "assistant", "content": neg}], add_generation_prompt=False
        )
        return full[len(head) :]

    marker = "\x00"
    text = tokenizer.apply_chat_template(
        [*messages[:-1], {"role": "assistant", "content": marker}],
        tokenize=False,
        add_generation_prompt=False,
    )
    end = text[text.rindex(marker) + 1 :]
    fast = tokenizer([n + end for n in negatives], add_special_tokens=False)["input_ids"]
    if list(fast[0]) != slow(negatives[0]):
        return [slow(n) for n in negatives]
    return [list(f) for f in fast]


def _choice_trainer(base: Any, weight: float) -> Any:
    """A ``Trainer`` subclass whose loss is the next-token loss on each example's own reply plus ``weight``
    times the multiple-choice cross-entropy of that reply among the example's wrong replies, each scored by
    its summed log-likelihood (the score :func:`lynn.lm.web_candidates.score_replies` ranks candidates by).

    Why packed rows (:class:`_Collator`): a candidate set is tens of short replies after one long prompt
    (LiveWeb: ~400 prompt tokens, ~50 replies of ~12). A row per reply repeats the prompt per reply; one
    row of prompt + replies with a block mask costs about two prompts, which is what lets the loss take a
    step's *whole* candidate set — the decision the policy makes — instead of a few negatives."""
    import torch

    class ChoiceTrainer(base):
        def compute_loss(
            self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, **kw: Any
        ) -> Any:
            if "score_src" not in inputs:
                return super().compute_loss(model, inputs, return_outputs=return_outputs, **kw)
            src, tgt, seg = inputs.pop("score_src"), inputs.pop("score_tgt"), inputs.pop("score_seg")
            nll_w = inputs.pop("nll")
            out = model(**inputs, use_cache=False)
            logits = out.logits.float()
            picked = logits.gather(1, src.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
            tok = torch.log_softmax(picked, -1).gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
            valid = seg >= 0
            tok = tok * valid
            n_seg = int(seg.max()) + 1
            scores = torch.zeros((seg.shape[0], n_seg), dtype=tok.dtype, device=tok.device)
            scores = scores.scatter_add(1, seg.clamp(min=0), tok)
            present = torch.zeros_like(seg).scatter_add(1, seg.clamp(min=0), valid.long())[:, :n_seg] > 0
            scores = scores.masked_fill(~present, -1e9)
            own = seg == 0
            w = nll_w.to(tok.dtype).unsqueeze(-1)
            nll = -(tok * own * w).sum() / (own * w).sum().clamp(min=1)
            choice = torch.nn.functional.cross_entropy(
                scores, torch.zeros(len(scores), dtype=torch.long, device=scores.device)
            )
            loss = nll + weight * choice
            return (loss, out) if return_outputs else loss

    return ChoiceTrainer


def _with_history(demos: list[Any]) -> list[Any]:
    """EVMQuest demonstrations with their ``Done:`` lines: the summaries of the replies of steps 0..k-1 of the
    same task and seed, read in file order (an episode's steps are written in order; a step 0 starts anew).
    A step whose earlier steps are missing is dropped (its history is unknown)."""
    from dataclasses import replace

    from lynn.lm.prompts import EVMQUEST, evm_action_summary, with_evm_history

    done: dict[tuple[str, int], list[str]] = {}
    out = []
    for d in demos:
        if d.env_id != EVMQUEST:
            out.append(d)
            continue
        key = (d.task_id, int(d.seed))
        earlier = done.get(key, []) if d.step else []
        if len(earlier) < d.step:
            continue
        history = earlier[: d.step]
        out.append(replace(d, messages=with_evm_history(d.messages, history)))
        done[key] = [*history, evm_action_summary(d.messages[-1]["content"])]
    return out


def _distill_replies(teacher_dir: str, demos: list[Any], context: int, progress: bool) -> list[Any]:
    """The demonstrations with their replies replaced by the teacher's greedy replies."""
    from lynn.lm.backends import TransformersGenerator

    gen = TransformersGenerator(teacher_dir)
    prompts = [d.messages[:-1] for d in demos]
    max_new = min(context, 1 + max(len(gen.tokenizer(d.messages[-1]["content"])["input_ids"]) for d in demos))
    outs = gen.generate(prompts, max_new_tokens=max_new, temperature=0.0, batch_size=16, progress=progress)
    distilled = []
    for d, o in zip(demos, outs, strict=True):
        msgs = [*d.messages[:-1], {"role": "assistant", "content": o.text}]
        distilled.append(type(d)(**{**asdict(d), "messages": msgs, "source": f"distilled:{teacher_dir}"}))
    return distilled


def _fit(tokenizer: Any, demo: Any, context: int) -> list[dict[str, str]]:
    """A web demonstration's page cut exactly as :class:`lynn.agents.llm.LMPolicy` cuts it when acting."""
    from lynn.lm.prompts import LIVEWEB, WEB_REPLY_BUDGET, WORLDMODEL, fit_web_messages
    from lynn.lm.tokenizer import encode_chat

    if demo.env_id not in (LIVEWEB, WORLDMODEL):
        return demo.messages
    budget = context - WEB_REPLY_BUDGET
    prompt = fit_web_messages(demo.messages[:-1], lambda m: len(encode_chat(tokenizer, m)) <= budget)
    return [*prompt, demo.messages[-1]]


def _loss_png(history: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(h["step"], h["loss"]) for h in history if "loss" in h and "step" in h]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if pts:
        ax.plot(*zip(*pts, strict=True), lw=1.5)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("training loss (assistant tokens)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def train_lm(cfg: TrainConfig, reply_transform: Any = None) -> dict[str, Any]:
    """Train (or resume) a target or draft model; returns the summary also written to ``lynn_train.json``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

    from lynn.lm.backends import set_threads
    from lynn.lm.data import read_demos
    from lynn.lm.tokenizer import chat_texts, encode_example, train_tokenizer

    set_threads(cfg.threads)

    if cfg.role not in ("target", "draft"):
        raise ValueError("role must be 'target' or 'draft'")
    if cfg.role == "draft" and not cfg.teacher:
        raise ValueError("a draft is distilled from a target: pass teacher=DIR (--teacher)")
    from lynn import zoo

    # "zoo:NAME" -> the checked folder (a zoo card's command distils the zoo's target: --teacher zoo:evm-lm)
    teacher, base = zoo.resolve(cfg.teacher), zoo.resolve(cfg.base)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    preset = SIZES.get(cfg.size)
    if preset is None:
        raise ValueError(f"unknown size {cfg.size!r}; choose one of {', '.join(SIZES)}")
    context = cfg.context or preset["context"]
    demos = read_demos(cfg.data, split="train", only_success=cfg.only_success)
    if not demos:
        raise ValueError(f"no training demonstrations in {cfg.data}")
    if cfg.compact:
        from dataclasses import replace

        from lynn.lm.prompts import EVMQUEST

        if reply_transform is None:
            raise ValueError(
                "compact=True needs reply_transform=lynn.envs.evmquest.compact.compact_reply "
                "(lynn.lm imports no env module; lynn train lm --compact passes it)"
            )
        demos = [
            replace(d, messages=[*d.messages[:-1], reply_transform(d.messages[-1])])
            if d.env_id == EVMQUEST
            else d
            for d in demos
        ]
    if cfg.history:
        demos = _with_history(demos)
    if cfg.slots:
        from dataclasses import replace

        from lynn.lm.prompts import EVMQUEST
        from lynn.lm.slots import mask_messages

        demos = [
            replace(d, messages=mask_messages(d.messages)[0]) if d.env_id == EVMQUEST else d for d in demos
        ]
    if cfg.minimal_abi:
        from dataclasses import replace

        from lynn.lm.prompts import minimal_abi

        demos = [
            replace(
                d,
                messages=[
                    *d.messages[:-1],
                    {"role": "assistant", "content": minimal_abi(d.messages[-1]["content"])},
                ],
            )
            for d in demos
        ]

    tok_src = teacher if cfg.role == "draft" else base
    if tok_src:
        tokenizer = AutoTokenizer.from_pretrained(tok_src)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if not tokenizer.chat_template:
            from lynn.lm.tokenizer import CHAT_TEMPLATE

            tokenizer.chat_template = CHAT_TEMPLATE
    elif cfg.resume and (out / "tokenizer.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(out)
    else:
        tokenizer = train_tokenizer(chat_texts(demos), vocab_size=cfg.vocab_size or preset["vocab"])
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(str(out))  # a run cut short resumes with this very vocabulary
    if cfg.role == "draft" and teacher:  # (a draft without a teacher was refused above)
        demos = _distill_replies(teacher, demos, context, cfg.progress)

    examples, dropped = [], 0
    for d in demos:
        msgs = _fit(tokenizer, d, context)
        ex: dict[str, Any] | None = encode_example(tokenizer, msgs, context)  # + choices, nll below
        if ex is None:
            dropped += 1
        else:
            negs = [n for n in d.extra.get("negatives", []) if n != msgs[-1]["content"]]
            if cfg.choice_negatives >= 0 and not cfg.choice_sample:
                negs = negs[: cfg.choice_negatives]
            if cfg.choice_loss > 0 and negs:
                ex["choices"] = _choice_replies(tokenizer, msgs, negs)
                ex["nll"] = 0.0 if d.extra.get("choice_only") else 1.0
            elif d.extra.get("choice_only"):
                continue  # a step of a longer answer: no reply to learn without the choice loss
            examples.append(ex)
    if not examples:
        raise ValueError(
            f"every demonstration is longer than the context ({context} tokens); raise --context"
        )
    random.shuffle(examples)

    if base and cfg.role == "target":
        model = AutoModelForCausalLM.from_pretrained(base)
    else:
        model = AutoModelForCausalLM.from_config(model_config(cfg.size, len(tokenizer), tokenizer))
    n_params = sum(p.numel() for p in model.parameters())

    started, cpu0 = time.monotonic(), time.process_time()
    budget_s = None if cfg.max_minutes is None else cfg.max_minutes * 60
    steps_per_epoch = math.ceil(len(examples) / cfg.batch_size)
    planned_steps = int(cfg.steps) if cfg.steps else max(1, math.ceil(steps_per_epoch * cfg.epochs))
    warmup = max(1, int(0.05 * planned_steps))
    capped: dict[str, int | None] = {"at": None}

    class _Cap(TrainerCallback):
        """Stops the run (with a checkpoint) once ``max_minutes`` of training time are spent. The schedule is
        not touched: it depends on the step alone, so a capped run resumed later ends where an uncut one does."""

        t0 = time.monotonic()

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            self.t0 = time.monotonic()  # the cap is training time: tokenizer and encoding are not in it
            return control

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            if (
                budget_s is not None
                and time.monotonic() - self.t0 > budget_s
                and state.global_step < planned_steps
            ):
                control.should_training_stop = True
                control.should_save = True
                capped["at"] = int(state.global_step)
            return control

    args = TrainingArguments(
        output_dir=str(out / "checkpoints"),
        per_device_train_batch_size=cfg.batch_size,
        max_steps=planned_steps,
        learning_rate=cfg.lr,
        lr_scheduler_type="cosine",
        warmup_steps=warmup,
        weight_decay=0.01,
        max_grad_norm=1.0,
        logging_steps=max(1, min(20, steps_per_epoch // 4)),
        save_strategy="steps",
        save_steps=max(50, steps_per_epoch),
        save_total_limit=2,
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        seed=cfg.seed,
        data_seed=cfg.seed,
        disable_tqdm=not cfg.progress,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        train_sampling_strategy="group_by_length",  # batches of similar length: padding to a long axtree costs 5x a short script
    )
    trainer = (_choice_trainer(Trainer, cfg.choice_loss) if cfg.choice_loss > 0 else Trainer)(
        model=model,
        args=args,
        train_dataset=examples,
        data_collator=_Collator(
            tokenizer.pad_token_id, cfg.choice_negatives if cfg.choice_sample else -1, cfg.seed
        ),
        callbacks=[_Cap()],
    )
    ckpts = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    resume_from = ckpts[-1] if cfg.resume and ckpts else None
    resumed_from = int(resume_from.name.split("-")[-1]) if resume_from else 0
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    minutes = (time.monotonic() - started) / 60
    cpu_minutes = (time.process_time() - cpu0) / 60

    model.config.use_cache = True
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    history = trainer.state.log_history
    losses = [h["loss"] for h in history if "loss" in h]
    _loss_png(history, out / "loss.png", f"{cfg.role} · {cfg.size} · {n_params / 1e6:.2f}M params")
    summary = {
        "role": cfg.role,
        "size": cfg.size,
        "parameters": n_params,
        "examples": len(examples),
        "dropped_too_long": dropped,
        "context": context,
        "vocab_size": len(tokenizer),
        "epochs_done": float(trainer.state.epoch or 0),
        "steps": int(trainer.state.global_step),
        "planned_steps": planned_steps,
        "complete": int(trainer.state.global_step) >= planned_steps,
        "capped_by_minutes": capped["at"] is not None,
        "resumed_from_step": resumed_from,
        "final_lr": next(
            (float(h["learning_rate"]) for h in reversed(history) if "learning_rate" in h), None
        ),
        "minutes": minutes,
        "cpu_minutes": cpu_minutes,
        "final_loss": float(losses[-1]) if losses else float("nan"),
        "loss_history": [(h["step"], h["loss"]) for h in history if "loss" in h],
        "config": asdict(cfg),
        "out": str(out),
        "loss_png": str(out / "loss.png"),
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    return summary
