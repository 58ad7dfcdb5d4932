"""Speculative decoding vs plain greedy and Hugging Face assisted generation, same models, same prompts.

One run on CPU over the same target, draft and prompts (``--target DIR --draft DIR --prompts FILE``,
one JSON object a line with ``"prompt"``: a string, or ``"messages"``: chat messages): target-only
greedy (HF ``generate``, and ours), HF ``generate(assistant_model=draft)`` with its defaults and
tuned, HF ``generate(prompt_lookup_num_tokens=k)``, and ours (:mod:`lynn.lm.speculative`) strict
with the draft model and with prompt lookup at batch 1 and batch 8, MARS and typical. Reported:
tokens/s, the ratio to greedy at the same batch size (HF ``generate``), the ratio to HF assisted
generation, mean accepted draft tokens per verification, target forwards per token (counted by a
forward hook, the same way for every method) and the share of prompts whose output equals greedy.

``--forward-costs`` adds why the wall-clock ratios are what they are on this machine: the measured
time of one cached target forward over k = 1 … γ+1 new tokens and of one draft forward, and from them
the *ceiling* of strict draft-model speculative decoding, ``(γ+1)·t_target(1) / (γ·t_draft +
t_target(γ+1))`` — its speed over greedy if every draft token were accepted. Speculative decoding
pays off where a k-token verification costs about what a 1-token forward does and the draft is
nearly free (a memory-bound GPU forward); on a CPU running small models both terms grow, and a
ceiling below a goal means no drafter or acceptance rule can reach it with that pair of models.

Without model directories, ``--demo DIR`` first trains a tiny byte-level-BPE target and a draft on
synthetic EVMQuest/LiveWeb-like text (a minute or two) and writes them, with prompts, under DIR.

Run: ``lynn bench specdec --target models/evm-lm --draft models/evm-lm-draft --prompts p.jsonl`` or
``.venv/bin/python benchmarks/bench_specdec.py`` (same flags); ``--out`` gets ``specdec.json`` and
``specdec.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lynn.errors import UsageError

__all__ = ["add_arguments", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's flags (shared by ``lynn bench specdec`` and benchmarks/bench_specdec.py)."""
    parser.add_argument("--target", help="target model directory (save_pretrained, with its tokenizer)")
    parser.add_argument("--draft", help="draft model directory (same tokenizer)")
    parser.add_argument("--prompts", help='JSONL, one {"prompt": str} or {"messages": [...]} a line')
    parser.add_argument("--demo", metavar="DIR", help="train tiny demo models and prompts into DIR first")
    parser.add_argument("--demo-steps", type=int, default=300, help="training steps of the demo target")
    parser.add_argument("--demo-docs", type=int, default=2000, help="synthetic documents the demo trains on")
    parser.add_argument("--n-prompts", type=int, default=16, help="prompts used (the first N)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--max-prompt-tokens", type=int, default=512, help="keep the last N prompt tokens")
    parser.add_argument("--gamma", type=int, default=5, help="our initial draft length")
    parser.add_argument("--lookup-k", type=int, default=10, help="HF prompt_lookup_num_tokens")
    parser.add_argument("--theta", type=float, default=0.9, help="MARS threshold")
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="our speculative rows sample at this temperature (0 = greedy; the references' MARS and typical "
        "relax only when sampling); HF rows stay greedy",
    )
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus of our sampling rows")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed of our rows")
    parser.add_argument(
        "--draft-confidence", type=float, default=0.4, help="our draft stops below this probability (0 = off)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="rounds (methods take turns; best wall kept)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = torch's default)")
    parser.add_argument("--device", default="cpu", help="torch device of both models (e.g. cuda)")
    parser.add_argument("--raw", action="store_true", help="encode prompts as-is (no chat template)")
    parser.add_argument("--methods", help="comma-separated subset of method labels (substring match)")
    parser.add_argument("--out", default="results/bench/specdec", help="where specdec.json/.md go")
    parser.add_argument(
        "--forward-costs", action="store_true", help="also time k-token target/draft forwards and the ceiling"
    )
    parser.add_argument(
        "--ceiling-sweep",
        action="store_true",
        help="only print the ceiling for untrained targets of growing size against the draft preset "
        "(forward costs do not depend on the weights), then exit",
    )


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` like ``lynn bench specdec`` and run the benchmark."""
    from lynn.bench import main as bench_main

    return bench_main(__name__, argv)


# --------------------------------------------------------------------------------------------
# Demo models (so that the benchmark runs on a fresh machine without trained models)


def _demo_corpus(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    hexd = "0123456789abcdef"
    items = ["Blue Mug", "Red Lamp", "Tea Set", "Desk Fan", "Notebook", "Wool Hat", "Oak Shelf", "Green Pen"]
    docs = []
    for i in range(n):
        if i % 2 == 0:
            sym = rng.choice(["TKA", "TKB", "USDL", "WETH"])
            to = "0x" + "".join(rng.choice(hexd) for _ in range(40))
            tok = "0x" + "".join(rng.choice(hexd) for _ in range(40))
            amt = rng.randint(1, 99999)
            prompt = (
                f"Instruction: transfer {amt} {sym} to {to}.\nContracts:\n  {sym}: {tok}\n"
                "Write one python block that calls the contracts.\n"
            )
            answer = f'```python\ntoken = contract("{tok}")\ntoken.transfer("{to}", {amt})\n```'
        else:
            item = rng.choice(items)
            refs = rng.sample(range(2, 200), 6)
            others = rng.sample([x for x in items if x != item], 4)
            lines = [f'- link "Home" [ref=e{refs[0]}]', f'- searchbox "Search" [ref=e{refs[1]}]']
            lines += [f'- button "Add {o} to cart" [ref=e{r}]' for o, r in zip(others, refs[2:], strict=True)]
            ref = rng.randint(200, 400)
            lines.insert(rng.randint(1, len(lines)), f'- button "Add {item} to cart" [ref=e{ref}]')
            prompt = f'Goal: add "{item}" to the cart.\nPage:\n' + "\n".join(lines) + "\n"
            answer = f'click("e{ref}")'
        docs.append((prompt, answer))
    return docs


def build_demo(out: Path, steps: int, seed: int = 0, n_docs: int = 2000) -> tuple[Path, Path, Path]:
    """Train a tiny target and a 4x smaller draft on synthetic env-like chats; write them and prompts."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    docs = _demo_corpus(max(n_docs, 20), seed)
    texts = [f"<|user|>{p}<|assistant|>{a}<|end|>" for p, a in docs]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    specials = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>"]
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=512, special_tokens=specials))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<|pad|>", eos_token="<|end|>")
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'user' %}<|user|>{{ m['content'] }}"
        "{% else %}<|assistant|>{{ m['content'] }}<|end|>{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    stream: list[int] = []
    for t in texts:
        stream += tok(t)["input_ids"]

    def make(d: int, layers: int, s: int) -> Any:
        torch.manual_seed(s)
        cfg = LlamaConfig(
            vocab_size=len(tok), hidden_size=d, intermediate_size=3 * d, num_hidden_layers=layers,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
        )  # fmt: skip
        return LlamaForCausalLM(cfg)

    def fit(model: Any, n: int, s: int) -> float:
        rng = random.Random(s)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
        model.train()
        loss = float("nan")
        for _ in range(n):
            starts = [rng.randrange(0, len(stream) - 129) for _ in range(8)]
            x = torch.tensor([stream[a : a + 128] for a in starts])
            out = model(input_ids=x, labels=x)
            opt.zero_grad()
            out.loss.backward()
            opt.step()
            loss = float(out.loss.detach())
        model.eval()
        return loss

    paths = []
    for name, d, layers, n in (("target", 128, 4, steps), ("draft", 64, 1, max(1, steps // 2))):
        t0 = time.perf_counter()
        model = make(d, layers, seed + len(paths))
        loss = fit(model, n, seed + len(paths))
        model.generation_config.pad_token_id = tok.pad_token_id
        model.save_pretrained(out / name)
        tok.save_pretrained(out / name)
        params = sum(p.numel() for p in model.parameters())
        print(
            f"demo {name}: {params / 1e6:.2f}M params, {n} steps, loss {loss:.2f}, {time.perf_counter() - t0:.0f}s"
        )
        paths.append(out / name)
    prompts = out / "prompts.jsonl"
    with prompts.open("w") as f:
        for p, _ in _demo_corpus(64, seed + 1):
            f.write(json.dumps({"prompt": p}) + "\n")
    return paths[0], paths[1], prompts


# --------------------------------------------------------------------------------------------
# Methods


@dataclass
class Row:
    """One method's figures."""

    method: str
    batch: int
    prompts: int
    new_tokens: int
    seconds: float
    tokens_per_s: float
    target_forwards: int
    forwards_per_token: float
    draft_forwards_per_token: float
    mean_accepted: float | None
    accepted_is_estimate: bool
    same_as_greedy: float
    vs_greedy: float = 0.0
    vs_hf_assisted: float | None = None


class _ForwardCounter:
    def __init__(self, model: Any) -> None:
        self.n = 0
        self.handle = model.register_forward_hook(self._hook)

    def _hook(self, *_: Any) -> None:
        self.n += 1


def _trim(out: list[int], eos: set[int], limit: int) -> list[int]:
    for i, t in enumerate(out[:limit]):
        if t in eos:
            return out[: i + 1]
    return out[:limit]


def _hf_generate(target: Any, prompts: list[list[int]], pad: int, eos: set[int], new: int, **kw: Any):
    import torch

    L = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (L - len(p)) + p for p in prompts], device=target.device)
    mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts], device=target.device)
    out = target.generate(
        input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False, pad_token_id=pad,
        eos_token_id=sorted(eos) or None, **kw,
    )  # fmt: skip
    return [_trim(row[L:].tolist(), eos, new) for row in out], None


def _methods(args: argparse.Namespace, target: Any, draft: Any, pad: int, eos: set[int]) -> list[tuple]:
    from lynn.lm.speculative import DraftModelDrafter, PromptLookupDrafter, SpecConfig
    from lynn.lm.speculative import greedy_generate as ours_greedy
    from lynn.lm.speculative import speculative_generate as ours_spec

    new = args.max_new_tokens
    eos_ids = sorted(eos) or None

    def hf(**kw: Any):
        return lambda ps: _hf_generate(target, ps, pad, eos, new, **kw)

    def greedy(ps: list[list[int]]):
        return ours_greedy(target, ps, max_new_tokens=new, eos_token_id=eos_ids, pad_token_id=pad)

    def spec(drafter: str, rule: str):
        def go(ps: list[list[int]]):
            if drafter == "draft":
                d = DraftModelDrafter(draft, pad_token_id=pad, min_confidence=args.draft_confidence)
            else:
                d = PromptLookupDrafter()
            cfg = SpecConfig(rule=rule, gamma=args.gamma, theta=args.theta)
            return ours_spec(
                target, ps, d, max_new_tokens=new, eos_token_id=eos_ids, config=cfg, pad_token_id=pad,
                temperature=args.temperature, top_p=args.top_p, seed=args.seed,
            )  # fmt: skip

        return go

    tuned = dict(
        num_assistant_tokens=5, num_assistant_tokens_schedule="heuristic", assistant_confidence_threshold=0.0
    )
    rows = [
        ("greedy (HF generate)", 1, hf(), False),
        ("greedy (ours)", 1, greedy, False),
        ("HF assisted, draft (defaults)", 1, hf(assistant_model=draft), True),
        ("HF assisted, draft (5, heuristic)", 1, hf(assistant_model=draft, **tuned), True),
        (f"HF prompt lookup (k={args.lookup_k})", 1, hf(prompt_lookup_num_tokens=args.lookup_k), True),
        ("ours strict, draft", 1, spec("draft", "strict"), False),
        ("ours strict, prompt lookup", 1, spec("lookup", "strict"), False),
        ("ours MARS, draft", 1, spec("draft", "mars"), False),
        ("ours MARS, prompt lookup", 1, spec("lookup", "mars"), False),
        ("ours typical, draft", 1, spec("draft", "typical"), False),
        ("ours typical, prompt lookup", 1, spec("lookup", "typical"), False),
        # Our variants (relaxed in greedy decoding too; the same as the references when sampling).
        ("ours mars-greedy (variant), draft", 1, spec("draft", "mars-greedy"), False),
        ("ours mars-greedy (variant), prompt lookup", 1, spec("lookup", "mars-greedy"), False),
        ("ours typical-greedy (variant), draft", 1, spec("draft", "typical-greedy"), False),
        ("ours typical-greedy (variant), prompt lookup", 1, spec("lookup", "typical-greedy"), False),
        ("greedy (HF generate)", 8, hf(), False),
        ("greedy (ours)", 8, greedy, False),
        ("ours strict, draft", 8, spec("draft", "strict"), False),
        ("ours strict, prompt lookup", 8, spec("lookup", "strict"), False),
        ("ours MARS, draft", 8, spec("draft", "mars"), False),
        ("ours mars-greedy (variant), draft", 8, spec("draft", "mars-greedy"), False),
    ]
    if args.methods:
        wanted = [w.strip().lower() for w in args.methods.split(",") if w.strip()]
        rows = [r for r in rows if r[0].startswith("greedy") or any(w in r[0].lower() for w in wanted)]
    return rows


def _time_method(
    fn: Any, prompts: list[list[int]], batch: int, counter: _ForwardCounter, dcounter: _ForwardCounter
):
    outs: list[list[int]] = []
    accepted: list[int] = []
    t0 = time.perf_counter()
    f0, d0 = counter.n, dcounter.n
    for i in range(0, len(prompts), batch):
        o, stats = fn(prompts[i : i + batch])
        outs += o
        if stats is not None:
            accepted += stats.accepted_lengths
    return outs, time.perf_counter() - t0, counter.n - f0, accepted, dcounter.n - d0


def _encode(tok: Any, rows: list[dict], raw: bool, max_tokens: int) -> list[list[int]]:
    out = []
    for r in rows:
        if "messages" in r:
            msgs = r["messages"]
        elif "prompt" in r:
            msgs = [{"role": "user", "content": r["prompt"]}]
        else:
            raise UsageError(f'each prompts line needs "prompt" or "messages", got keys {sorted(r)}')
        if not raw and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        else:
            ids = tok("\n".join(m["content"] for m in msgs))["input_ids"]
        out.append(list(ids)[-max_tokens:])
    return out


def forward_costs(model: Any, prompt: list[int], ks: list[int], repeats: int = 30) -> dict[int, float]:
    """Median seconds of one forward of ``k`` new tokens over a cached ``prompt``, for each k in ``ks``.

    The cache is cropped back to the prompt after every forward, as a rejected verification is.
    """
    import statistics

    import torch
    from transformers import DynamicCache

    ids = torch.tensor([prompt])
    out: dict[int, float] = {}
    with torch.inference_mode():
        cache = DynamicCache()

        def fwd(x: Any) -> None:
            try:  # transformers 5.x names it `cache`; older models take `past_key_values`
                model(input_ids=x, cache=cache, use_cache=True)
            except TypeError:
                model(input_ids=x, past_key_values=cache, use_cache=True)

        fwd(ids)
        gen = torch.Generator().manual_seed(0)
        for k in ks:
            times = []
            for _ in range(repeats + 2):
                new = torch.randint(0, model.config.vocab_size, (1, k), generator=gen)
                t0 = time.perf_counter()
                fwd(new)
                times.append(time.perf_counter() - t0)
                cache.crop(-k)
            out[k] = statistics.median(times[2:])
    return out


def ceiling(t_target: dict[int, float], t_draft: float, gamma: int) -> float:
    """Speed over greedy of strict draft-model speculation at draft length ``gamma`` if every draft
    token were accepted: γ+1 tokens per γ draft forwards and one (γ+1)-token verification."""
    return (gamma + 1) * t_target[1] / (gamma * t_draft + t_target[gamma + 1])


def _cost_lines(target: Any, draft: Any, prompt: list[int], gamma: int) -> tuple[list[str], dict]:
    ks = list(range(1, gamma + 2))
    tt = forward_costs(target, prompt, ks)
    td = forward_costs(draft, prompt, [1])[1]
    lines = [
        f"Forward costs (one cached forward, prompt of {len(prompt)} tokens, median of 30):",
        "",
        "| model | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|---|" + "---:|" * len(ks),
        "| target ms | " + " | ".join(f"{tt[k] * 1e3:.2f}" for k in ks) + " |",
        "| target ms, ÷ k=1 | " + " | ".join(f"{tt[k] / tt[1]:.2f}" for k in ks) + " |",
        f"| draft ms (k=1) | {td * 1e3:.2f} |" + " |" * (len(ks) - 1),
        "",
    ]
    ceil = {g: ceiling(tt, td, g) for g in range(1, gamma + 1)}
    lines.append(
        "- ceiling of strict draft speculation over greedy (all drafts accepted), γ = "
        + ", ".join(f"{g}: {c:.2f}x" for g, c in ceil.items())
        + f"; draft/target forward cost {td / tt[1]:.2f}"
    )
    lookup = max((k * tt[1] / tt[k], k) for k in ks)
    lines.append(
        f"- ceiling of prompt lookup (free drafts, all accepted): {lookup[0]:.2f}x at k = {lookup[1]} tokens"
    )
    data = {"target_s": tt, "draft_s": td, "ceiling_draft": ceil, "ceiling_lookup": lookup[0]}
    return lines, data


# Target shapes for --ceiling-sweep: the lynn.lm presets plus one larger than this CPU can train.
SWEEP_SHAPES = {
    "base": (256, 4, 704, 8),
    "small": (512, 6, 1408, 8),
    "768x8": (768, 8, 2048, 12),
}


def ceiling_sweep(prompt_tokens: int = 100, max_gamma: int = 7) -> list[str]:
    """The ceiling of strict draft speculation for untrained LLaMA targets of each ``SWEEP_SHAPES``
    size against the ``draft`` preset, on this machine: what the hardware allows before any training."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from lynn.lm.train import SIZES

    def make(h: int, layers: int, mlp: int, heads: int) -> Any:
        cfg = LlamaConfig(
            vocab_size=4096, hidden_size=h, intermediate_size=mlp, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=2048,
        )  # fmt: skip
        return LlamaForCausalLM(cfg).eval()

    torch.manual_seed(0)
    prompt = torch.randint(0, 4096, (prompt_tokens,)).tolist()
    d = SIZES["draft"]
    draft = make(d["hidden"], d["layers"], d["mlp"], d["heads"])
    td = forward_costs(draft, prompt, [1])[1]
    lines = [
        f"| target | params | k=1 ms | k={max_gamma + 1} ms (÷ k=1) | draft ms | best ceiling (γ) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, shape in SWEEP_SHAPES.items():
        t = make(*shape)
        tt = forward_costs(t, prompt, list(range(1, max_gamma + 2)))
        best = max((ceiling(tt, td, g), g) for g in range(1, max_gamma + 1))
        n = sum(p.numel() for p in t.parameters()) / 1e6
        lines.append(
            f"| {name} | {n:.1f}M | {tt[1] * 1e3:.1f} | {tt[max_gamma + 1] * 1e3:.1f} "
            f"({tt[max_gamma + 1] / tt[1]:.2f}) | {td * 1e3:.2f} | {best[0]:.2f}x ({best[1]}) |"
        )
    return lines


def _table(rows: list[Row]) -> list[str]:
    head = (
        "| method | batch | tokens | s | tok/s | × greedy (same batch) | × HF assisted | mean accepted "
        "| target fwd/token | draft fwd/token | = greedy |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        acc = (
            "–"
            if r.mean_accepted is None
            else f"{'≈' if r.accepted_is_estimate else ''}{r.mean_accepted:.2f}"
        )
        vs_a = "–" if r.vs_hf_assisted is None else f"{r.vs_hf_assisted:.2f}"
        lines.append(
            f"| {r.method} | {r.batch} | {r.new_tokens} | {r.seconds:.2f} | {r.tokens_per_s:.1f} | "
            f"{r.vs_greedy:.2f} | {vs_a} | {acc} | {r.forwards_per_token:.3f} | {r.draft_forwards_per_token:.3f} | "
            f"{r.same_as_greedy:.0%} |"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    """Run the benchmark: print the table and write ``specdec.json`` and ``specdec.md`` under ``--out``."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.ceiling_sweep:
        print(f"Ceiling of strict draft speculation on this machine ({torch.get_num_threads()} threads):")
        print("\n".join(ceiling_sweep()))
        return 0
    if args.demo:
        if args.target or args.draft:
            raise UsageError("pass either --demo DIR or --target/--draft, not both")
        target_dir, draft_dir, prompts_file = build_demo(
            Path(args.demo), args.demo_steps, n_docs=args.demo_docs
        )
        args.prompts = args.prompts or str(prompts_file)
    else:
        if not (args.target and args.draft and args.prompts):
            raise UsageError("pass --target DIR --draft DIR --prompts FILE.jsonl (or --demo DIR)")
        target_dir, draft_dir = Path(args.target), Path(args.draft)
    for p in (target_dir, draft_dir, Path(args.prompts)):
        if not p.exists():
            raise UsageError(f"{p} does not exist")
    if min(args.n_prompts, args.max_new_tokens, args.repeats, args.gamma) < 1:
        raise UsageError("--n-prompts, --max-new-tokens, --repeats and --gamma must be at least 1")

    tok = AutoTokenizer.from_pretrained(target_dir)
    target = AutoModelForCausalLM.from_pretrained(target_dir).eval().to(args.device)
    draft = AutoModelForCausalLM.from_pretrained(draft_dir).eval().to(args.device)
    if draft.config.vocab_size != target.config.vocab_size:
        print(f"note: draft vocab {draft.config.vocab_size} != target vocab {target.config.vocab_size}")
    lines = [ln for ln in Path(args.prompts).read_text().splitlines() if ln.strip()]
    prompts = _encode(
        tok, [json.loads(ln) for ln in lines[: args.n_prompts]], args.raw, args.max_prompt_tokens
    )
    pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
    eos = {int(tok.eos_token_id)} if tok.eos_token_id is not None else set()
    methods = _methods(args, target, draft, pad, eos)
    counter, dcounter = _ForwardCounter(target), _ForwardCounter(draft)

    # Warm-up: one short call per method (first-call costs: HF's config building, allocator).
    for _, _, fn, _ in methods:
        fn([prompts[0]])
    results: dict[int, tuple] = {}
    for rnd in range(args.repeats):
        for i, (label, batch, fn, _) in enumerate(methods):
            res = _time_method(fn, prompts, batch, counter, dcounter)
            if i not in results or res[1] < results[i][1]:
                results[i] = res
            print(f"[round {rnd + 1}] {label} (batch {batch}): {res[1]:.2f}s", flush=True)
    counter.handle.remove()
    dcounter.handle.remove()

    greedy_out = results[1][0] if methods[1][0] == "greedy (ours)" else results[0][0]
    rows: list[Row] = []
    for i, (label, batch, _, hf_assisted) in enumerate(methods):
        outs, wall, fwd, acc, dfwd = results[i]
        n_tok = sum(len(o) for o in outs)
        if acc:
            mean_acc, est = sum(acc) / len(acc), False
        elif hf_assisted:
            # Each HF verification forward yields the accepted tokens plus one of the target's own.
            mean_acc, est = (n_tok / fwd - 1.0 if fwd else 0.0), True
        else:
            mean_acc, est = None, False
        rows.append(
            Row(
                method=label,
                batch=batch,
                prompts=len(prompts),
                new_tokens=n_tok,
                seconds=wall,
                tokens_per_s=n_tok / wall if wall else 0.0,
                target_forwards=fwd,
                forwards_per_token=fwd / n_tok if n_tok else 0.0,
                mean_accepted=mean_acc,
                draft_forwards_per_token=dfwd / n_tok if n_tok else 0.0,
                accepted_is_estimate=est,
                same_as_greedy=sum(a == b for a, b in zip(outs, greedy_out, strict=True)) / len(outs),
            )  # fmt: skip
        )
    base = {r.batch: r.tokens_per_s for r in rows if r.method == "greedy (HF generate)"}
    assisted = next((r.tokens_per_s for r in rows if r.method == "HF assisted, draft (defaults)"), None)
    for r in rows:
        r.vs_greedy = r.tokens_per_s / base[r.batch] if base.get(r.batch) else 0.0
        if assisted and "draft" in r.method and "HF" not in r.method:
            r.vs_hf_assisted = r.tokens_per_s / assisted

    def get(method: str, batch: int) -> Row | None:
        return next((r for r in rows if r.method == method and r.batch == batch), None)

    goals = []
    s1, a1, g1 = (
        get("ours strict, draft", 1),
        get("HF assisted, draft (defaults)", 1),
        get("greedy (HF generate)", 1),
    )
    if s1 and a1:
        goals.append(
            f"ours strict (draft, b1) / HF assisted: {s1.tokens_per_s / a1.tokens_per_s:.2f}x (goal >= 1.5)"
        )
    if s1 and g1:
        goals.append(
            f"ours strict (draft, b1) / greedy: {s1.tokens_per_s / g1.tokens_per_s:.2f}x (goal >= 2)"
        )
    s8, g8, o8 = get("ours strict, draft", 8), get("greedy (HF generate)", 8), get("greedy (ours)", 8)
    if s8 and g8 and o8:
        goals.append(
            f"ours strict (draft, b8) / greedy b8: {s8.tokens_per_s / g8.tokens_per_s:.2f}x vs HF, "
            f"{s8.tokens_per_s / o8.tokens_per_s:.2f}x vs ours (goal > 1)"
        )
    m1 = get("ours MARS, draft", 1)
    if s1 and m1 and s1.mean_accepted:
        goals.append(
            f"MARS / strict accepted length (draft, b1): {m1.mean_accepted / s1.mean_accepted:.2f}x (goal >= 1.15)"
        )

    meta = {
        "target": str(target_dir), "draft": str(draft_dir), "prompts_file": str(args.prompts),
        "prompts": len(prompts), "mean_prompt_tokens": sum(map(len, prompts)) / len(prompts),
        "target_params": sum(p.numel() for p in target.parameters()),
        "draft_params": sum(p.numel() for p in draft.parameters()),
        "max_new_tokens": args.max_new_tokens, "gamma": args.gamma, "theta": args.theta,
        "lookup_k": args.lookup_k, "draft_confidence": args.draft_confidence, "repeats": args.repeats, "threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "machine": platform.platform(), "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }  # fmt: skip
    title = (
        f"Speculative decoding, CPU ({meta['threads']} threads): target {meta['target_params'] / 1e6:.2f}M, "
        f"draft {meta['draft_params'] / 1e6:.2f}M params; {len(prompts)} prompts "
        f"(mean {meta['mean_prompt_tokens']:.0f} tokens), max {args.max_new_tokens} new tokens"
    )
    md = [f"**{title}**", "", *_table(rows), "", *(f"- {g}" for g in goals)]
    costs = None
    if args.forward_costs:
        cost_md, costs = _cost_lines(target, draft, prompts[0], args.gamma)
        md += ["", *cost_md]
    print("\n" + "\n".join(md))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "specdec.json").write_text(
        json.dumps(
            {"meta": meta, "rows": [asdict(r) for r in rows], "goals": goals, "forward_costs": costs},
            indent=2,
        )
    )
    (out / "specdec.md").write_text("\n".join(md) + "\n")
    print(f"\nwrote {out / 'specdec.json'} and {out / 'specdec.md'}")
    return 0
